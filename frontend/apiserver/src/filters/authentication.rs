//! Authentication: turns the connection's client certificate or the bearer token into a
//! `UserInfo` request extension, or answers 401. The `Authorization` header is removed once
//! used, and so are the request-header identity headers (`X-Remote-*`) whatever method
//! succeeded, so handlers never see credentials and nothing behind trusts a forged identity
//! (as kube does).
//!
//! A refused request is audited here (kube's `WithFailedAuthenticationAudit`), since the audit
//! filter after this one never sees it: the policy is evaluated without a user, and a
//! `ResponseStarted` event records the 401 and the methods that were tried.

use std::sync::Arc;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::audit::policy::{Level, Stage};
use crate::audit::{AuditEvent, AuditId, Auditor};
use crate::authn::{Authenticator, PeerCertificates, UserInfo};
use crate::body::{Request, Response};
use crate::request_info::RequestInfo;

/// The authentication filter.
#[derive(Debug, Clone)]
pub struct AuthenticationLayer {
    authenticator: Arc<Authenticator>,
    auditor: Option<Arc<Auditor>>,
}

impl AuthenticationLayer {
    /// Builds the filter; refusals are audited through `auditor`, if any.
    pub fn new(authenticator: Arc<Authenticator>, auditor: Option<Arc<Auditor>>) -> Self {
        AuthenticationLayer { authenticator, auditor }
    }
}

/// kube's `getAuthMethods` text for the audit event of a refused request.
fn attempted(req: &Request, peer: &PeerCertificates) -> String {
    let mut methods = Vec::new();
    let auth = req.headers().get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("").trim();
    let scheme = auth.split(' ').next().unwrap_or("").to_ascii_lowercase();
    if scheme == "basic" {
        methods.push("basic");
    }
    if scheme == "bearer" && auth.contains(' ') {
        methods.push("bearer");
    }
    if peer.0.as_ref().is_some_and(|c| !c.is_empty()) {
        methods.push("x509");
    }
    if methods.is_empty() {
        "Authentication failed, no credentials provided".into()
    } else {
        format!("Authentication failed, attempted: {}", methods.join(", "))
    }
}

fn audit_refusal(auditor: &Arc<Auditor>, req: &Request, peer: &PeerCertificates) {
    let (Some(info), Some(id)) = (req.extensions().get::<RequestInfo>(), req.extensions().get::<AuditId>()) else {
        return;
    };
    let nobody = UserInfo::new("", "", Vec::new());
    let decision = auditor.evaluate(&nobody, info);
    if decision.level == Level::None {
        return;
    }
    let event = AuditEvent::new(auditor.clone(), decision, id, &nobody, info, req);
    event.set("responseStatus", serde_json::json!({"metadata": {}, "code": 401, "message": attempted(req, peer)}));
    event.emit(Stage::ResponseStarted);
}

filter_layer!(AuthenticationLayer);

/// The authentication service.
pub type Authentication<S> = Filtered<AuthenticationLayer, S>;

impl Filter for AuthenticationLayer {
    async fn filter<S: Inner>(self, mut req: Request, next: S) -> Response {
        let peer = req.extensions().get::<PeerCertificates>().cloned().unwrap_or_default();
        match self.authenticator.authenticate(&peer, req.headers()).await {
            Ok(user) => {
                req.headers_mut().remove(http::header::AUTHORIZATION);
                if let Some(request_header) = self.authenticator.request_header() {
                    request_header.strip(req.headers_mut());
                }
                req.extensions_mut().insert(user);
                call_next(next, req).await
            }
            Err(e) => {
                if let Some(auditor) = &self.auditor {
                    audit_refusal(auditor, &req, &peer);
                }
                e.into_response()
            }
        }
    }
}
