//! The API aggregator (kube's `k8s.io/kube-aggregator`): the first server of the delegation
//! chain. APIService objects (`apiregistration.k8s.io/v1`) say, for each group version,
//! whether it is served here (Local: the built-in API or a CustomResourceDefinition) or by an
//! extension API server behind a Service, to which this server proxies it with the caller's
//! identity in the front-proxy headers.
//!
//! # Place in the delegation chain
//!
//! ```text
//! aggregator (this crate)                 /apis (merged), /apis/<group>/<version>/... of a
//!   |                                     remote APIService -> proxy
//!   -> built-in API (ballast-frontend)    the 59 built-in resources, discovery, OpenAPI
//!     -> apiextensions (ballast-apiextensions)   custom resources
//!       -> 404
//! ```
//!
//! The handler chain's filters run before it: a proxied request is authenticated, impersonated
//! and authorized (RBAC on its group and resource) like any other, so a caller without the
//! right gets 403 and the extension server never sees the request.
//!
//! # Map
//!
//! * [`apiservice`]: an APIService read from its JSON; [`priorities`]: the built-in group
//!   versions' priorities; [`validation`]: kube's checks of APIServices, as admission on the
//!   built-in store (which stores, prints and serves APIService objects).
//! * [`informer`]: APIServices, Services, EndpointSlices and CustomResourceDefinitions
//!   followed in memory (one list and one watch each); [`state`]: what the server and the
//!   controllers share, the APIServices as [`state::Routes`].
//! * [`autoregister`]: a Local APIService for every built-in and custom resource group version.
//! * [`available`]: the `Available` condition of every APIService (Service checks, discovery
//!   GET), and the remote discovery documents.
//! * [`server`]: the chain's server; [`proxy`]: the proxy and the front-proxy headers;
//!   [`discovery`]: `/apis` merged and ordered by priority; [`openapi`]: the extension
//!   servers' OpenAPI v3 documents in `/openapi/v3` (both on [`merge`]); [`openapi_v2`]: their
//!   v2 documents merged into `/openapi/v2`; [`resolve`]: Service to address; [`backend`]: the
//!   HTTPS client with the front-proxy certificate; [`pool`]: its keep-alive connections per
//!   extension server; [`front_proxy`]: the front-proxy CA and client certificate `ballast
//!   serve` generates.
//! * [`config`]: [`AggregatorConfig`], the timeouts, intervals and capacities with their reasons.
//!
//! # Layering
//!
//! May depend on every server below it (the built-in API, apiextensions) to delegate to them;
//! nothing below it depends on it. It depends only on `ballast-apiserver`: it reaches the
//! servers behind through the chain's [`Handler`] and storage through the shared store.
//! Inside: `server` → `proxy`, `discovery`, `openapi`, `openapi_v2` → `state` → `backend` →
//! `pool`, `resolve`, `informer`; `available`, `autoregister` → `state`, `apiservice`.

pub mod apiservice;
pub mod autoregister;
pub mod available;
pub mod backend;
pub mod config;
pub mod discovery;
pub mod front_proxy;
pub mod informer;
pub mod merge;
pub mod openapi;
pub mod openapi_v2;
pub mod pool;
pub mod priorities;
pub mod proxy;
pub mod resolve;
pub mod server;
pub mod state;
pub mod validation;

use std::sync::Arc;

use ballast_apiserver::delegation::{in_front_of, DelegateContext, Handler};
use ballast_apiserver::registry::admission::Admission;

pub use backend::BackendError;
pub use config::AggregatorConfig;

/// The admission plugins the aggregator adds to the built-in store (APIService validation).
pub fn admission() -> Vec<Arc<dyn Admission>> {
    vec![Arc::new(validation::ApiServiceAdmission)]
}

/// The aggregator, configured: what the binary puts in front of the built-in API.
#[derive(Debug)]
pub struct Aggregator {
    config: AggregatorConfig,
    identity: backend::ClientIdentity,
}

impl Aggregator {
    /// Reads the front-proxy identity of `config`.
    ///
    /// # Errors
    ///
    /// `ClientCertificate` when the front-proxy certificate or key is unusable.
    pub fn new(config: AggregatorConfig) -> Result<Aggregator, BackendError> {
        let identity = backend::ClientIdentity::from_pem(
            config.proxy_client_cert_pem.as_deref(),
            config.proxy_client_key_pem.as_deref(),
        )?;
        Ok(Aggregator { config, identity })
    }

    /// The aggregator in front of `delegate` (the built-in API), on the built-in API's
    /// storage. Starts following APIServices, Services (and EndpointSlices with aggregator
    /// routing) and CustomResourceDefinitions, autoregistration and the availability controller
    /// on the current runtime; without a runtime, or on a built-in API lacking those kinds, it
    /// is `delegate` itself.
    pub fn server(self, context: DelegateContext, delegate: Handler) -> Handler {
        let Aggregator { config, identity } = self;
        let store = context.store;
        let kinds = store.kinds();
        let (Some(apiservices), Some(services), Some(slices), Some(definitions)) = (
            kinds.find("apiregistration.k8s.io", "v1", "apiservices"),
            kinds.find("", "v1", "services"),
            kinds.find("discovery.k8s.io", "v1", "endpointslices"),
            kinds.find("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        ) else {
            tracing::warn!(
                "the built-in API lacks APIServices, Services, EndpointSlices or definitions: no aggregation"
            );
            return delegate;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return delegate;
        }
        let retry = config.retry_interval;
        let apiservice_objects = informer::follow(store.clone(), apiservices, retry);
        let service_objects = informer::follow(store.clone(), services, retry);
        let slice_objects = config.enable_aggregator_routing.then(|| informer::follow(store.clone(), slices, retry));
        let definition_objects = informer::follow(store.clone(), definitions, retry);
        let shared =
            Arc::new(state::Shared::new(config, identity, apiservice_objects.clone(), service_objects, slice_objects));
        tokio::spawn(autoregister::run(
            store.clone(),
            apiservices,
            delegate.clone(),
            apiservice_objects,
            definition_objects,
        ));
        tokio::spawn(available::run(shared.clone(), store, apiservices));
        in_front_of(server::AggregatorServer::new(shared, delegate.clone()), delegate)
    }
}
