//! etcd's answer to a request message over the size limit: gRPC ResourceExhausted with
//! grpc-go's text, `grpc: received message larger than max (N vs. M)`. tonic refuses such a
//! message with OutOfRange and its own text, which an etcd client would take for a compacted
//! revision's code; this layer rewrites that one answer and passes every other through.

use std::task::{Context, Poll};

use http::HeaderValue;
use tower::{Layer, Service};

/// tonic's text for a message over the decoding limit, up to the figures.
const TONIC_TOO_LARGE: &str = "Error, decoded message length too large: found ";

/// Wraps a service with [`MessageLimit`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MessageLimitLayer;

impl<S> Layer<S> for MessageLimitLayer {
    type Service = MessageLimit<S>;

    fn layer(&self, inner: S) -> MessageLimit<S> {
        MessageLimit { inner }
    }
}

/// Rewrites tonic's "message too large" answer into etcd's.
#[derive(Clone, Debug)]
pub struct MessageLimit<S> {
    inner: S,
}

impl<S, Req, B> Service<Req> for MessageLimit<S>
where
    S: Service<Req, Response = http::Response<B>>,
    S::Future: Send + 'static,
    B: 'static,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<http::Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let answer = self.inner.call(req);
        Box::pin(async move {
            let mut resp = answer.await?;
            rewrite(resp.headers_mut());
            Ok(resp)
        })
    }
}

/// Turns a trailers-only OutOfRange "decoded message length too large" into etcd's
/// ResourceExhausted.
fn rewrite(headers: &mut http::HeaderMap) {
    if headers.get("grpc-status").map(HeaderValue::as_bytes) != Some(b"11") {
        return;
    }
    let Some(text) = headers.get("grpc-message").and_then(|m| m.to_str().ok()).map(decode) else { return };
    let Some(figures) = etcd_text(&text) else { return };
    if let Ok(message) = HeaderValue::from_str(&figures) {
        headers.insert("grpc-status", HeaderValue::from_static("8"));
        headers.insert("grpc-message", message);
    }
}

/// `found N bytes, the limit is: M bytes` → `grpc: received message larger than max (N vs. M)`.
fn etcd_text(tonic_text: &str) -> Option<String> {
    let rest = tonic_text.strip_prefix(TONIC_TOO_LARGE)?;
    let (found, rest) = rest.split_once(" bytes, the limit is: ")?;
    let limit = rest.strip_suffix(" bytes")?;
    Some(format!("grpc: received message larger than max ({found} vs. {limit})"))
}

/// Undoes gRPC's percent-encoding of `grpc-message`.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tonics_too_large_becomes_etcds_resource_exhausted() {
        let mut h = http::HeaderMap::new();
        h.insert("grpc-status", HeaderValue::from_static("11"));
        h.insert(
            "grpc-message",
            HeaderValue::from_static(
                "Error, decoded message length too large: found 3000000 bytes, the limit is: 2097152 bytes",
            ),
        );
        rewrite(&mut h);
        assert_eq!(h["grpc-status"], "8");
        assert_eq!(h["grpc-message"], "grpc: received message larger than max (3000000 vs. 2097152)");
        // A compacted revision's OutOfRange is left alone.
        let mut other = http::HeaderMap::new();
        other.insert("grpc-status", HeaderValue::from_static("11"));
        other
            .insert("grpc-message", HeaderValue::from_static("etcdserver: mvcc: required revision has been compacted"));
        rewrite(&mut other);
        assert_eq!(other["grpc-status"], "11");
    }
}
