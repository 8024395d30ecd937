//! Authorization: asks the authorizer about the `UserInfo` and `RequestInfo` extensions;
//! a denial is 403 with kube's message, a storage failure while reading RBAC objects is 500
//! (fail closed).

use std::sync::Arc;

use crate::audit::AuditEvent;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::authn::UserInfo;
use crate::authz::{forbidden_reason, Authorizer, Decision};
use crate::body::{Request, Response};
use crate::error::ApiError;
use crate::request_info::RequestInfo;

/// The audit annotation with the decision (`allow` or `forbid`).
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The audit annotation with the authorizer's reason.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// The authorization filter.
#[derive(Debug, Clone)]
pub struct AuthorizationLayer {
    authorizer: Arc<dyn Authorizer>,
}

impl AuthorizationLayer {
    /// Builds the filter.
    pub fn new(authorizer: Arc<dyn Authorizer>) -> Self {
        AuthorizationLayer { authorizer }
    }
}

filter_layer!(AuthorizationLayer);

/// The authorization service.
pub type Authorization<S> = Filtered<AuthorizationLayer, S>;

impl Filter for AuthorizationLayer {
    async fn filter<S: Inner>(self, req: Request, next: S) -> Response {
        let (Some(user), Some(info)) = (req.extensions().get::<UserInfo>(), req.extensions().get::<RequestInfo>())
        else {
            return ApiError::Internal("no user or request info on the request".into()).into_response();
        };
        let decision = self.authorizer.authorize(user, info).await;
        if let (Some(event), Ok(decision)) = (req.extensions().get::<AuditEvent>(), &decision) {
            event.annotate(DECISION_ANNOTATION, if decision.allowed() { "allow" } else { "forbid" });
            event.annotate(REASON_ANNOTATION, decision.reason());
        }
        match decision {
            Ok(Decision::Allow(_)) => call_next(next, req).await,
            Ok(Decision::Deny) => ApiError::Forbidden {
                group: info.api_group.clone(),
                resource: info.resource.clone(),
                name: info.name.clone(),
                reason: forbidden_reason(user, info),
            }
            .into_response(),
            Err(e) => ApiError::Storage(e).into_response(),
        }
    }
}
