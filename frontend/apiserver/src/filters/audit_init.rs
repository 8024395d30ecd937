//! Audit init (kube's `WithAuditInit`, outermost): gives every request an audit ID — the
//! client's `Audit-ID` header if it sent one, else a new UUID — and the receive time, and
//! answers with the `Audit-Id` header, so a client can find its request in the audit log.

use http::HeaderValue;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::audit::AuditId;
use crate::body::{Request, Response};
use crate::uid::new_uid;

/// The header name (HTTP canonical form `Audit-Id`).
pub const AUDIT_ID_HEADER: &str = "audit-id";

/// The audit-init filter.
#[derive(Debug, Clone, Default)]
pub struct AuditInitLayer;

filter_layer!(AuditInitLayer);

/// The audit-init service.
pub type AuditInit<S> = Filtered<AuditInitLayer, S>;

impl Filter for AuditInitLayer {
    async fn filter<S: Inner>(self, mut req: Request, next: S) -> Response {
        let id = req
            .headers()
            .get(AUDIT_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map_or_else(new_uid, str::to_string);
        let header = HeaderValue::from_str(&id).ok();
        req.extensions_mut().insert(AuditId { id, received: crate::clock::now_micro_rfc3339() });
        let mut resp = call_next(next, req).await;
        if let Some(header) = header {
            resp.headers_mut().insert(AUDIT_ID_HEADER, header);
        }
        resp
    }
}
