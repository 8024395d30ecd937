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
//! Today [`server`] is its delegate: no APIService is acted on yet (APIService objects are
//! stored by the built-in API like any other object), so every request goes to the built-in
//! server. The binary already builds the chain through it, so proxying lands in place.
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
//! nothing below it depends on it. Today it depends only on `ballast-apiserver`, for the
//! delegation chain's [`Handler`].

use ballast_apiserver::delegation::Handler;

/// The aggregator in front of `delegate` (the built-in API). It proxies nothing yet, so it is
/// `delegate` itself.
pub fn server(delegate: Handler) -> Handler {
    delegate
}
