//! Small HTTP pieces the plain HTTP endpoints, the JSON gateway and the gRPC deadline layer share:
//! telling a gRPC request from another, and building plain responses.

use bytes::Bytes;
use tonic::body::Body;

/// Whether `req` is a gRPC call (its content type says so).
pub(crate) fn is_grpc(req: &http::Request<Body>) -> bool {
    req.headers().get(http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// Builds a response with `status`, `content_type` and `body`.
pub(crate) fn respond(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> http::Response<Body> {
    let mut resp = http::Response::new(Body::new(http_body_util::Full::new(body.into())));
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    resp
}

/// A plain-text error as Go's `http.Error` writes it (with `nosniff`, as etcd's carry).
pub(crate) fn plain_error(status: u16, text: &'static str) -> http::Response<Body> {
    let mut resp = respond(status, "text/plain; charset=utf-8", text);
    resp.headers_mut().insert("x-content-type-options", http::HeaderValue::from_static("nosniff"));
    resp
}
