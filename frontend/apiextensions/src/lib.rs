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
//! Today [`server`] is its delegate: CustomResourceDefinition objects are stored by the
//! built-in API without their resources being served, so what the built-in server does not
//! serve goes on to the 404. The binary already builds the chain through it.
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
//! downwards only). Today it depends only on `ballast-apiserver`, for the delegation chain's
//! [`Handler`].

use ballast_apiserver::delegation::Handler;

/// The apiextensions server in front of `delegate` (the 404). It serves no custom resource
/// yet, so it is `delegate` itself.
pub fn server(delegate: Handler) -> Handler {
    delegate
}
