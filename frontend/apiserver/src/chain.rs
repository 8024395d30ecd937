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
use crate::authz::Authorizer;
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
    /// The authorizer (also authorizes impersonation).
    pub authorizer: Arc<dyn Authorizer>,
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

#[cfg(test)]
mod tests {
    //! The whole chain in process: filters, the router of a served set of kinds on the
    //! in-memory storage, and the end of the delegation chain.

    use http::{Method, StatusCode};
    use tower::ServiceExt;

    use super::*;
    use futures::future::BoxFuture;

    use crate::authn::token_file::TokenFile;
    use crate::authn::{UserInfo, MASTERS_GROUP};
    use crate::authz::Decision;
    use crate::delegation::{in_front_of, NotFound};
    use crate::registry::testing::TestKinds;
    use crate::registry::Store;
    use crate::request_info::RequestInfo;
    use crate::routes::{AppState, Router};
    use crate::storage::{MemStorage, SharedStorage, StorageError};
    use crate::watch_cache::{WatchCacheConfig, WatchCaches};

    /// Allows `system:masters` everything and anyone `GET /version`; denies the rest.
    #[derive(Debug)]
    struct MastersAndVersion;

    impl Authorizer for MastersAndVersion {
        fn authorize<'a>(
            &'a self,
            user: &'a UserInfo,
            request: &'a RequestInfo,
        ) -> BoxFuture<'a, Result<Decision, StorageError>> {
            let allowed = user.in_group(MASTERS_GROUP) || (request.path == "/version" && request.verb == "get");
            let decision = if allowed { Decision::Allow("test".into()) } else { Decision::Deny };
            Box::pin(std::future::ready(Ok(decision)))
        }
    }

    const TOKENS: &str = "admin-token,admin,1,system:masters\nalice-token,alice,2\n";

    async fn chain() -> ChainService {
        let storage: SharedStorage = Arc::new(MemStorage::new());
        let store = Store::new(storage.clone(), "/registry", Arc::new(TestKinds));
        store.ensure_system_namespaces().await.expect("system namespaces");
        let authorizer: Arc<dyn Authorizer> = Arc::new(MastersAndVersion);
        let metrics = Arc::new(Metrics::default());
        let state = Arc::new(AppState {
            store,
            version: crate::served::Version { major: 1, minor: 33, patch: 0 },
            advertise_address: "127.0.0.1:6443".into(),
            metrics: metrics.clone(),
            watch_cache: WatchCaches::new(storage, WatchCacheConfig::default()),
            delegated: None,
            engine_probe: None,
        });
        let tokens = TokenFile::parse(TOKENS).expect("token file");
        build_handler_chain(
            in_front_of(Router::new(state), NotFound::handler()),
            ChainConfig {
                authenticator: Arc::new(Authenticator::new(None, Some(tokens), true)),
                authorizer,
                auditor: None,
                metrics,
                max_requests_inflight: 400,
                max_mutating_requests_inflight: 200,
                request_timeout: Duration::from_secs(60),
                max_request_body_bytes: 3 << 20,
            },
        )
    }

    async fn send(chain: &ChainService, method: Method, uri: &str, token: Option<&str>, body: &str) -> StatusCode {
        let mut req = http::Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if !body.is_empty() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req.body(crate::body::request_body(body.to_string())).expect("request");
        chain.clone().oneshot(req).await.expect("infallible").status()
    }

    #[tokio::test]
    async fn requests_pass_the_filters_to_the_served_kinds_and_down_the_delegation_chain() {
        let c = chain().await;
        let collection = "/api/v1/namespaces/default/configmaps";
        let body = r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#;
        assert_eq!(send(&c, Method::POST, collection, Some("admin-token"), body).await, StatusCode::CREATED);
        assert_eq!(send(&c, Method::GET, &format!("{collection}/a"), Some("admin-token"), "").await, StatusCode::OK);
        // Others are denied; a bad token is refused before that; anonymous may read the version.
        assert_eq!(send(&c, Method::GET, collection, Some("alice-token"), "").await, StatusCode::FORBIDDEN);
        assert_eq!(send(&c, Method::GET, collection, Some("wrong"), "").await, StatusCode::UNAUTHORIZED);
        assert_eq!(send(&c, Method::GET, "/version", None, "").await, StatusCode::OK);
        // Kinds and paths this server does not serve go to the end of the chain.
        let unserved = "/api/v1/namespaces/default/secrets";
        assert_eq!(send(&c, Method::GET, unserved, Some("admin-token"), "").await, StatusCode::NOT_FOUND);
        assert_eq!(
            send(&c, Method::GET, "/apis/example.com/v1/widgets", Some("admin-token"), "").await,
            StatusCode::NOT_FOUND
        );
        assert_eq!(send(&c, Method::GET, "/nothing/here", Some("admin-token"), "").await, StatusCode::NOT_FOUND);
    }
}
