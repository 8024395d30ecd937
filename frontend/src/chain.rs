//! The handler chain, built in exactly one function (kube's `DefaultBuildHandlerChain`).
//!
//! Execution order, outermost first:
//!
//! ```text
//! panic recovery → request info → authentication → max-in-flight → authorization → body limit → routes
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use tower::util::BoxCloneSyncService;
use tower::ServiceBuilder;

use crate::authn::Authenticator;
use crate::authz::RbacAuthorizer;
use crate::body::{Request, Response};
use crate::filters::authentication::AuthenticationLayer;
use crate::filters::authorization::AuthorizationLayer;
use crate::filters::body_limit::BodyLimitLayer;
use crate::filters::flow_control::MaxInFlightLayer;
use crate::filters::panic_recovery::PanicRecoveryLayer;
use crate::filters::request_info::RequestInfoLayer;
use crate::routes::Router;

/// The whole chain with its type erased once, at the router boundary.
pub type ChainService = BoxCloneSyncService<Request, Response, Infallible>;

/// What the filters need.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    /// Authentication methods.
    pub authenticator: Arc<Authenticator>,
    /// The RBAC authorizer.
    pub authorizer: Arc<RbacAuthorizer>,
    /// `--max-requests-inflight` (0 = unlimited).
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight` (0 = unlimited).
    pub max_mutating_requests_inflight: usize,
    /// Largest request body in bytes.
    pub max_request_body_bytes: usize,
}

/// Builds the handler chain around `router`.
pub fn build_handler_chain(router: Router, config: ChainConfig) -> ChainService {
    let service = ServiceBuilder::new()
        // Outermost, so a panic in any filter or handler below becomes a 500 Status.
        .layer(PanicRecoveryLayer)
        // Before authentication: every later filter (flow control, authorization) and the
        // router read the parsed RequestInfo, and it needs no identity.
        .layer(RequestInfoLayer)
        // Before flow control and authorization: both need the user (masters are exempt from
        // the in-flight limit; RBAC decides on the user). Bad credentials cost no slot.
        .layer(AuthenticationLayer::new(config.authenticator))
        // Before authorization, as in kube: authorization may read storage, so it is work the
        // in-flight limit must bound.
        .layer(MaxInFlightLayer::new(config.max_requests_inflight, config.max_mutating_requests_inflight))
        .layer(AuthorizationLayer::new(config.authorizer))
        // Last: only requests that may proceed get their bodies read.
        .layer(BodyLimitLayer::new(config.max_request_body_bytes))
        .service(router);
    BoxCloneSyncService::new(service)
}
