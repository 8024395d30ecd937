//! The proxy (kube-aggregator's proxy handler): a request for a group version an APIService
//! hands to an extension server goes there with its path, query, method and body unchanged,
//! the caller's credentials removed and its identity (as authenticated, or as impersonated)
//! in the front-proxy headers. Request bodies stream to the server and its responses (watch
//! streams included) stream back; upgrade requests (exec, attach, port-forward over SPDY or
//! websockets) become a byte stream between the caller and the server once the server
//! switches protocols. A failure concerns that request only.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::StatusCode;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::json;

use ballast_apiserver::authn::user::UserInfo;
use ballast_apiserver::body::{self, Request, Response};

use crate::apiservice::ApiService;
use crate::backend::send;
use crate::state::{Shared, TargetError};

/// The header carrying the user name to the extension server.
pub const REMOTE_USER: &str = "x-remote-user";
/// One header per group.
pub const REMOTE_GROUP: &str = "x-remote-group";
/// The user's uid, when it has one.
pub const REMOTE_UID: &str = "x-remote-uid";
/// The prefix of the extra attributes' headers (`X-Remote-Extra-<escaped key>`).
pub const REMOTE_EXTRA_PREFIX: &str = "x-remote-extra-";

/// Headers that belong to one connection, never forwarded (RFC 9110 section 7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Proxies `req` to `api`'s server.
pub async fn proxy(shared: &Shared, api: &ApiService, req: Request) -> Response {
    if !api.available {
        return service_unavailable();
    }
    let Some(user) = req.extensions().get::<UserInfo>().cloned() else {
        return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "missing user");
    };
    let target = match shared.target(api) {
        Ok(t) => t,
        Err(TargetError::Backend(e)) => {
            return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &e.to_string());
        }
        Err(e) => {
            tracing::info!(apiservice = %api.name, error = ?e, "cannot resolve an APIService's service");
            return service_unavailable();
        }
    };
    let (mut parts, body) = req.into_parts();
    // An upgrade needs the caller's connection handed over, which only HTTP/1.1 connections
    // of the Kubernetes port offer; without it the request goes as a plain one.
    let upgrade = upgrade_protocol(&parts.headers)
        .and_then(|protocol| Some((protocol, parts.extensions.remove::<hyper::upgrade::OnUpgrade>()?)));
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = http::Request::new(body);
    *out.method_mut() = parts.method.clone();
    *out.uri_mut() = match path.parse() {
        Ok(uri) => uri,
        Err(_) => return status(StatusCode::BAD_REQUEST, "BadRequest", "invalid request URI"),
    };
    *out.headers_mut() = forwarded_headers(&parts.headers, &user);
    if let Some((protocol, _)) = &upgrade {
        out.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        out.headers_mut().insert(header::UPGRADE, protocol.clone());
    }
    if let Ok(host) = HeaderValue::from_str(target.url().trim_start_matches("https://")) {
        out.headers_mut().insert(header::HOST, host);
    }
    match send(&shared.pool, &target, out, &shared.config).await {
        Ok(resp) if resp.status() == StatusCode::SWITCHING_PROTOCOLS => match upgrade {
            Some((_, caller)) => switch(api, resp, caller),
            None => status(StatusCode::BAD_GATEWAY, "InternalError", "the extension server switched protocols unasked"),
        },
        Ok(resp) => {
            let (mut parts, incoming) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            http::Response::from_parts(parts, Streamed(incoming).boxed_unsync())
        }
        Err(e) => {
            tracing::info!(apiservice = %api.name, error = %e, "proxying to an extension server");
            status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                &format!("error trying to reach service: {e}"),
            )
        }
    }
}

/// The protocol a request asks to switch to (`Connection: Upgrade` and `Upgrade: <protocol>`,
/// as kubectl's SPDY/3.1 and websocket streams ask), if it asks.
pub fn upgrade_protocol(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    if asks {
        headers.get(header::UPGRADE).cloned()
    } else {
        None
    }
}

/// The extension server agreed to switch protocols: its 101 goes to the caller, and once both
/// connections are handed over the bytes are copied both ways until each side has closed its
/// half. The stream has no timeout: an exec session or a port forward lasts as long as the
/// user keeps it.
fn switch(api: &ApiService, mut resp: http::Response<Incoming>, caller: hyper::upgrade::OnUpgrade) -> Response {
    let server = hyper::upgrade::on(&mut resp);
    let (mut parts, _) = resp.into_parts();
    let protocol = parts.headers.get(header::UPGRADE).cloned();
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Some(protocol) = protocol {
        parts.headers.insert(header::UPGRADE, protocol);
    }
    let name = api.name.clone();
    tokio::spawn(async move {
        let (caller, server) = match tokio::try_join!(caller, server) {
            Ok(both) => both,
            Err(e) => {
                tracing::info!(apiservice = %name, error = %e, "an upgraded connection was not handed over");
                return;
            }
        };
        let (mut caller, mut server) = (TokioIo::new(caller), TokioIo::new(server));
        match tokio::io::copy_bidirectional(&mut caller, &mut server).await {
            Ok((up, down)) => tracing::debug!(apiservice = %name, up, down, "upgraded stream ended"),
            Err(e) => tracing::debug!(apiservice = %name, error = %e, "upgraded stream ended"),
        }
    });
    http::Response::from_parts(parts, body::full(Bytes::new()))
}

/// kube-aggregator's answer for an APIService that is not available (or whose Service cannot
/// be resolved): 503 with the plain-text body `service unavailable`, which kubectl reports as
/// "the server is currently unable to handle the request".
pub fn service_unavailable() -> Response {
    let mut resp = http::Response::new(body::full("service unavailable\n"));
    *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    resp
}

/// A `metav1.Status` failure.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    body::json(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code.as_u16()}),
    )
}

/// The caller's headers as the extension server gets them: connection headers, credentials
/// (`Authorization`, `Impersonate-*`) and any identity headers the caller sent itself dropped,
/// then the identity this server vouches for added.
pub fn forwarded_headers(incoming: &HeaderMap, user: &UserInfo) -> HeaderMap {
    let mut headers = incoming.clone();
    strip_hop_by_hop(&mut headers);
    headers.remove(header::HOST);
    headers.remove(header::AUTHORIZATION);
    let dropped: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("impersonate-") || k.as_str().starts_with("x-remote-"))
        .cloned()
        .collect();
    for name in dropped {
        headers.remove(name);
    }
    set_identity(&mut headers, user);
    headers
}

/// Adds the front-proxy identity headers for `user`. Values a header cannot carry are left
/// out (and logged) rather than sent altered.
pub fn set_identity(headers: &mut HeaderMap, user: &UserInfo) {
    let mut add = |name: HeaderName, value: &str| match HeaderValue::from_str(value) {
        Ok(v) => {
            headers.append(name, v);
        }
        Err(_) => tracing::warn!(header = %name, "identity value not representable in a header; left out"),
    };
    add(HeaderName::from_static(REMOTE_USER), &user.name);
    if !user.uid.is_empty() {
        add(HeaderName::from_static(REMOTE_UID), &user.uid);
    }
    for group in &user.groups {
        add(HeaderName::from_static(REMOTE_GROUP), group);
    }
    for (key, values) in &user.extra {
        let Ok(name) = HeaderName::from_bytes(format!("{REMOTE_EXTRA_PREFIX}{}", escape_key(key)).as_bytes()) else {
            continue;
        };
        for value in values {
            add(name.clone(), value);
        }
    }
}

/// Escapes an extra key for a header name as kube does: every byte but ASCII letters, digits
/// and `-_.~` as `%XX`.
pub fn escape_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// An extension server's response body, streamed to the caller. A failure part-way (the
/// server went away, sent garbage framing) ends the body: the headers are already sent, so
/// the caller sees a truncated response, as from kube.
struct Streamed(Incoming);

impl Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match Pin::new(&mut self.0).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(Err(e))) => {
                tracing::info!(error = %e, "extension server response ended early");
                Poll::Ready(None)
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_replaces_credentials_and_forged_headers() {
        let mut incoming = HeaderMap::new();
        for (k, v) in [
            ("authorization", "Bearer secret"),
            ("impersonate-user", "bob"),
            ("x-remote-user", "forged"),
            ("x-remote-group", "system:masters"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("accept", "application/json"),
        ] {
            incoming.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let mut user = UserInfo::new("alice", "1001", vec!["dev".into(), "system:authenticated".into()]);
        user.extra.insert("scopes.example.com/a b".into(), vec!["x".into(), "y".into()]);
        let out = forwarded_headers(&incoming, &user);
        assert!(out.get("authorization").is_none() && out.get("impersonate-user").is_none());
        assert!(out.get("x-hop").is_none() && out.get("connection").is_none());
        assert_eq!(out.get_all(REMOTE_USER).iter().collect::<Vec<_>>(), ["alice"]);
        assert_eq!(out.get_all(REMOTE_GROUP).iter().collect::<Vec<_>>(), ["dev", "system:authenticated"]);
        assert_eq!(out.get(REMOTE_UID).map(|v| v.as_bytes()), Some(&b"1001"[..]));
        assert_eq!(out.get_all("x-remote-extra-scopes.example.com%2Fa%20b").iter().count(), 2);
        assert_eq!(out.get("accept").map(|v| v.as_bytes()), Some(&b"application/json"[..]));
    }
}
