//! The HTTP types every layer shares: boxed request and response bodies, and builders for the
//! JSON and text answers. Keeping one body type per direction erases the filter stack's types once,
//! instead of a body or error type per layer that each outer layer must wrap (tower#131).

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

/// An error from reading a request body (the connection, or the body-size limit).
///
/// A named type rather than a bare `Box<dyn Error>`: the boxed trait object's lifetime in
/// the request type trips higher-ranked `Send` inference in the generic filter futures.
#[derive(Debug)]
pub struct BodyError(pub Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// A request body: hyper's incoming stream, possibly wrapped by the size limit.
pub type RequestBody = UnsyncBoxBody<Bytes, BodyError>;

/// A response body: a full buffer, or a stream of watch events.
pub type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// A request as every filter and handler sees it.
pub type Request = http::Request<RequestBody>;

/// A response as every filter and handler produces it.
pub type Response = http::Response<ResponseBody>;

/// Returns a request body holding `bytes` (tests and internal callers).
pub fn request_body(bytes: impl Into<Bytes>) -> RequestBody {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

/// Returns a response body holding `bytes`.
pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into()).boxed_unsync()
}

/// Builds a response with a JSON body and `Content-Type: application/json`.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    json_with_type(status, value, "application/json")
}

/// Builds a JSON response with an explicit content type (aggregated discovery needs its own).
pub fn json_with_type(status: StatusCode, value: &serde_json::Value, content_type: &'static str) -> Response {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = http::Response::new(full(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    resp
}

/// Builds a `text/plain` response (health checks answer `ok`).
pub(crate) fn text(status: StatusCode, body: String) -> Response {
    let mut resp = http::Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    resp
}
