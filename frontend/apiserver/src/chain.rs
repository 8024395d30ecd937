//! The handler chain, built in exactly one function (kube's `DefaultBuildHandlerChain`).
//!
//! Execution order, outermost first, as kube-apiserver 1.33 orders the same filters:
//!
//! ```text
//! audit init → panic recovery → request info → metrics → timeout → authentication → audit
//!   → impersonation → max-in-flight → authorization → body limit → the delegation chain
//! ```
//!
//! kube's filters without a counterpart here: CORS, HSTS, warning recorder, cache control
//! (routes set it), retry-after during shutdown, latency trackers, HTTP logging, and priority
//! and fairness (max-in-flight is kube's alternative to it).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::ServiceBuilder;

use crate::audit::Auditor;
use crate::authn::Authenticator;
use crate::authz::RbacAuthorizer;
use crate::body::{Request, Response};
use crate::delegation::Handler;
use crate::filters::audit::AuditLayer;
use crate::filters::audit_init::AuditInitLayer;
use crate::filters::authentication::AuthenticationLayer;
use crate::filters::authorization::AuthorizationLayer;
use crate::filters::body_limit::BodyLimitLayer;
use crate::filters::flow_control::MaxInFlightLayer;
use crate::filters::impersonation::ImpersonationLayer;
use crate::filters::metrics::{Metrics, MetricsLayer};
use crate::filters::panic_recovery::PanicRecoveryLayer;
use crate::filters::request_info::RequestInfoLayer;
use crate::filters::timeout::TimeoutLayer;

/// The whole chain with its type erased once, at the router boundary.
pub type ChainService = BoxCloneSyncService<Request, Response, Infallible>;

/// What the filters need.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    /// Authentication methods.
    pub authenticator: Arc<Authenticator>,
    /// The RBAC authorizer (also authorizes impersonation).
    pub authorizer: Arc<RbacAuthorizer>,
    /// The audit policy and log; `None` audits nothing.
    pub auditor: Option<Arc<Auditor>>,
    /// The metric registry `/metrics` renders.
    pub metrics: Arc<Metrics>,
    /// `--max-requests-inflight` (0 = unlimited).
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight` (0 = unlimited).
    pub max_mutating_requests_inflight: usize,
    /// `--request-timeout`.
    pub request_timeout: Duration,
    /// Largest request body in bytes.
    pub max_request_body_bytes: usize,
}

/// Builds the handler chain around `handler`, the first server of the delegation chain.
pub fn build_handler_chain(handler: Handler, config: ChainConfig) -> ChainService {
    let service = ServiceBuilder::new()
        // Outermost (kube's WithAuditInit): every answer, even a panic's 500, carries the
        // Audit-Id header, and the receive timestamp is taken before any work.
        .layer(AuditInitLayer)
        // So a panic in any filter or handler below becomes a 500 Status.
        .layer(PanicRecoveryLayer)
        // Before everything that classifies requests: metrics labels, the long-running check of
        // the timeout, flow control and audit, the attributes of authorization, the router.
        .layer(RequestInfoLayer)
        // Outside the refusing filters, so 401, 403, 429 and 504 answers are counted too.
        .layer(MetricsLayer::new(config.metrics.clone()))
        // Outside authentication, as kube's deadline filters: the deadline covers
        // authentication, authorization's storage reads and the handler.
        .layer(TimeoutLayer::new(config.request_timeout))
        // Audits its own refusals (401), which the audit filter after it never sees.
        .layer(AuthenticationLayer::new(config.authenticator, config.auditor.clone()))
        // After authentication (the policy matches on the user), before impersonation (the
        // event records the real user and, set by impersonation, the impersonated one).
        .layer(AuditLayer::new(config.auditor, config.max_request_body_bytes))
        // Before flow control and authorization, which must see the impersonated user.
        .layer(ImpersonationLayer::new(config.authorizer.clone()))
        // Before authorization, as in kube: authorization may read storage, so it is work the
        // in-flight limit must bound. Masters and long-running requests are exempt.
        .layer(MaxInFlightLayer::new(
            config.max_requests_inflight,
            config.max_mutating_requests_inflight,
            config.metrics,
        ))
        .layer(AuthorizationLayer::new(config.authorizer))
        // Last: only requests that may proceed get their bodies read.
        .layer(BodyLimitLayer::new(config.max_request_body_bytes))
        .service(handler);
    BoxCloneSyncService::new(service)
}
