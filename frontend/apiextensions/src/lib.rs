//! The apiextensions server (kube's `k8s.io/apiextensions-apiserver`): serves the REST of the
//! resources that CustomResourceDefinitions declare. Empty so far: CRD serving is built here.
//!
//! # Place in the delegation chain
//!
//! A request that passed the handler chain goes to the first server that claims its path:
//!
//! ```text
//! aggregator (ballast-aggregator)         /apis/<group>/<version> of an APIService -> proxy
//!   -> built-in API (ballast-frontend)    the 59 built-in resources, discovery, OpenAPI
//!     -> apiextensions (this crate)       /apis/<crd group>/<version>/...
//!       -> 404
//! ```
//!
//! Today the built-in server answers 404 itself for any path it does not serve, and stores
//! CustomResourceDefinition objects without serving their resources.
//!
//! # What will live here
//!
//! * A watch on `customresourcedefinitions` that keeps the set of served CRD versions current
//!   (any frontend rebuilds it from storage: frontends hold no authoritative state).
//! * REST handlers for custom resources on the frontend's generic registry store, with the
//!   CRD's structural schema for defaulting, pruning and validation, `/status` and `/scale`.
//! * Discovery and OpenAPI contributions for the served CRDs.
//!
//! # Layering
//!
//! May depend on `ballast-apimachinery` and on the generic server's registry and storage seam;
//! must not depend on the built-in API's kinds or on the aggregator (the chain delegates
//! downwards only).
