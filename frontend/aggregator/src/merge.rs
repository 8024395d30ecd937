//! Documents the aggregator answers by adding to the delegate's (`/apis`, `/openapi/v3`): the
//! delegate's answer read whole, and the merged one written back with its headers.

use bytes::Bytes;
use http::header;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use ballast_apiserver::body::{self, Request, Response};
use ballast_apiserver::delegation::Handler;

/// The delegate's document for `req`: its response head, the parsed JSON and the bytes.
/// A response that is not a 200 with a JSON body comes back as `Err`, to be answered as is.
pub async fn delegate_document(
    delegate: Handler,
    mut req: Request,
) -> Result<(http::response::Parts, Value, Bytes), Response> {
    // The client's cached copy may be of the delegate's document alone: the delegate must not
    // confirm it with a 304.
    req.headers_mut().remove(header::IF_NONE_MATCH);
    let Ok(resp) = delegate.oneshot(req).await;
    if resp.status() != StatusCode::OK {
        return Err(resp);
    }
    let (parts, body) = resp.into_parts();
    let Ok(bytes) = body.collect().await.map(|b| b.to_bytes());
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(doc) => Ok((parts, doc, bytes)),
        Err(_) => Err(http::Response::from_parts(parts, body::full(bytes))),
    }
}

/// The delegate's response head with `doc` as the body (its ETag, which named the
/// delegate's document, dropped).
pub fn merged(mut parts: http::response::Parts, doc: &Value) -> Response {
    parts.headers.remove(header::ETAG);
    parts.headers.remove(header::CONTENT_LENGTH);
    http::Response::from_parts(parts, body::full(serde_json::to_vec(doc).unwrap_or_default()))
}

/// The delegate's response unchanged.
pub fn unchanged(parts: http::response::Parts, bytes: Bytes) -> Response {
    http::Response::from_parts(parts, body::full(bytes))
}
