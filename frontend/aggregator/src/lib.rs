//! The API aggregator (kube's `k8s.io/kube-aggregator`): the first server of the delegation
//! chain, proxying the group versions that APIService objects hand to other servers. Empty so
//! far: APIService proxying is built here.
//!
//! # Place in the delegation chain
//!
//! ```text
//! aggregator (this crate)                 /apis/<group>/<version> of an APIService -> proxy
//!   -> built-in API (ballast-frontend)    the 59 built-in resources, discovery, OpenAPI
//!     -> apiextensions (ballast-apiextensions)   custom resources
//!       -> 404
//! ```
//!
//! Today requests go straight to the built-in server, and APIService objects are stored
//! without being acted on.
//!
//! # What will live here
//!
//! * A watch on `apiservices` that keeps the routing table current, and availability checks
//!   that set each APIService's `Available` condition.
//! * The proxy: requests for a delegated group version go to its service with the user's
//!   identity in the front-proxy headers, as kube-aggregator sends them.
//! * Aggregated discovery and OpenAPI that merge the delegates' documents.
//!
//! # Layering
//!
//! May depend on every server below it (the built-in API, apiextensions) to delegate to them;
//! nothing below it depends on it.
