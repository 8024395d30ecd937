//! Audit (kube's `WithAudit`): after authentication, the policy picks the request's level;
//! unless it is `None`, an [`AuditEvent`] goes into the request for the later filters to fill,
//! and events are written at each stage the policy keeps:
//!
//! * `RequestReceived` before the request is handled;
//! * `ResponseStarted` when a long-running response (a watch) starts;
//! * `ResponseComplete` when the response is complete (for a watch, when its stream ends);
//! * `Panic` when the handler panicked (the panic then continues to panic recovery).
//!
//! At `Request` level and above a JSON request body is read here (bounded by the body limit,
//! 413 beyond it) and recorded; at `RequestResponse` the JSON body of a non-long-running
//! response too.

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use http_body_util::{BodyExt, Limited};

use super::timeout::RequestDeadline;
use super::{call_next, filter_layer, guard_body, Filter, Filtered, Inner};
use crate::audit::policy::{Level, Stage};
use crate::audit::{AuditEvent, AuditId, Auditor};
use crate::authn::UserInfo;
use crate::body::{self, Request, Response};
use crate::error::ApiError;
use crate::request_info::RequestInfo;

/// The audit filter.
#[derive(Debug, Clone)]
pub struct AuditLayer {
    auditor: Option<Arc<Auditor>>,
    max_body_bytes: usize,
}

impl AuditLayer {
    /// Builds the filter; `None` audits nothing.
    pub fn new(auditor: Option<Arc<Auditor>>, max_body_bytes: usize) -> Self {
        AuditLayer { auditor, max_body_bytes }
    }
}

filter_layer!(AuditLayer);

/// The audit service.
pub type Audit<S> = Filtered<AuditLayer, S>;

/// Armed while the handler runs: if the timeout filter drops the request past its deadline, the
/// event is still completed, with the 504 the client got (a client that goes away early gets no
/// `ResponseComplete`, as there was no response).
struct UntilAnswered {
    event: Option<AuditEvent>,
    deadline: Option<tokio::time::Instant>,
}

impl UntilAnswered {
    fn disarm(&mut self) {
        self.event = None;
    }
}

impl Drop for UntilAnswered {
    fn drop(&mut self) {
        let (Some(event), Some(deadline)) = (self.event.take(), self.deadline) else { return };
        if tokio::time::Instant::now() >= deadline {
            let status = ApiError::Timeout.status();
            event.set(
                "responseStatus",
                serde_json::json!({"metadata": {}, "code": 504, "status": status["status"],
                                   "message": status["message"], "reason": status["reason"]}),
            );
            event.emit(Stage::ResponseComplete);
        }
    }
}

/// Writes `ResponseComplete` when a long-running response's body is done.
struct CompleteOnDrop(AuditEvent);

impl Drop for CompleteOnDrop {
    fn drop(&mut self) {
        self.0.emit(Stage::ResponseComplete);
    }
}

fn is_json(content_type: Option<&http::HeaderValue>) -> bool {
    content_type.and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"))
}

/// The Status fields kube copies into `responseStatus` (no details).
fn response_status(code: u16, body: &[u8]) -> serde_json::Value {
    let mut status = serde_json::json!({"metadata": {}, "code": code});
    if code >= 300 {
        if let Ok(parsed) = serde_json::from_slice::<serde_json::Value>(body) {
            if parsed["kind"] == "Status" {
                for key in ["status", "message", "reason"] {
                    if let Some(v) = parsed.get(key) {
                        status[key] = v.clone();
                    }
                }
            }
        }
    }
    status
}

impl Filter for AuditLayer {
    async fn filter<S: Inner>(self, req: Request, next: S) -> Response {
        let Some(auditor) = self.auditor else { return call_next(next, req).await };
        let (Some(user), Some(info), Some(id)) = (
            req.extensions().get::<UserInfo>().cloned(),
            req.extensions().get::<RequestInfo>().cloned(),
            req.extensions().get::<AuditId>().cloned(),
        ) else {
            return call_next(next, req).await;
        };
        let decision = auditor.evaluate(&user, &info);
        if decision.level == Level::None {
            return call_next(next, req).await;
        }
        let event = AuditEvent::new(auditor, decision.clone(), &id, &user, &info, &req);
        let (mut parts, request_body) = req.into_parts();
        let mut request_body = Some(request_body);
        if decision.level >= Level::Request && is_json(parts.headers.get(http::header::CONTENT_TYPE)) {
            let limited =
                Limited::new(request_body.take().unwrap_or_else(|| body::request_body("")), self.max_body_bytes);
            let bytes: Bytes = match limited.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(e) => {
                    let error = if e.is::<http_body_util::LengthLimitError>() {
                        ApiError::RequestEntityTooLarge { limit: self.max_body_bytes }
                    } else {
                        ApiError::BadRequest(format!("error reading request body: {e}"))
                    };
                    let resp = error.into_response();
                    event.set("responseStatus", response_status(resp.status().as_u16(), b""));
                    event.emit(Stage::ResponseComplete);
                    return resp;
                }
            };
            if let Ok(object) = serde_json::from_slice::<serde_json::Value>(&bytes) {
                event.set("requestObject", object);
            }
            request_body = Some(body::request_body(bytes));
        }
        parts.extensions.insert(event.clone());
        let deadline = parts.extensions.get::<RequestDeadline>().map(|d| d.0);
        let req = http::Request::from_parts(parts, request_body.unwrap_or_else(|| body::request_body("")));
        event.emit(Stage::RequestReceived);

        let mut pending = UntilAnswered { event: Some(event.clone()), deadline };
        let resp = match std::panic::AssertUnwindSafe(call_next(next, req)).catch_unwind().await {
            Ok(resp) => {
                pending.disarm();
                resp
            }
            Err(panic) => {
                pending.disarm();
                event.set("responseStatus", serde_json::json!({"metadata": {}, "code": 500}));
                event.emit(Stage::Panic);
                std::panic::resume_unwind(panic);
            }
        };
        let code = resp.status().as_u16();
        if info.is_long_running() {
            event.set("responseStatus", response_status(code, b""));
            event.emit(Stage::ResponseStarted);
            return guard_body(resp, CompleteOnDrop(event));
        }
        let buffer = code >= 300 || decision.level == Level::RequestResponse;
        if !buffer {
            event.set("responseStatus", response_status(code, b""));
            event.emit(Stage::ResponseComplete);
            return resp;
        }
        // A refusal's Status is small. At RequestResponse the event carries the whole response
        // object, as kube's does, so a streamed LIST is collected here: that level costs the
        // answer's size in memory, which is why policies keep it for small resources.
        let (parts, response_body) = resp.into_parts();
        let bytes = match response_body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        };
        event.set("responseStatus", response_status(code, &bytes));
        if decision.level == Level::RequestResponse && is_json(parts.headers.get(http::header::CONTENT_TYPE)) {
            if let Ok(object) = serde_json::from_slice::<serde_json::Value>(&bytes) {
                event.set("responseObject", object);
            }
        }
        event.emit(Stage::ResponseComplete);
        http::Response::from_parts(parts, body::full(bytes))
    }
}
