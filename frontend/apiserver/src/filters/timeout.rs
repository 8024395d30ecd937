//! Request timeouts (kube's `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests`):
//! a non-long-running request that has not answered within `--request-timeout` (or the
//! request's own shorter `?timeout=`) is answered 504 with kube's Timeout Status, and its
//! handler is dropped, which cancels the storage call it waits on. Watches and connect
//! requests are exempt: they are meant to stay open.
//!
//! Sits outside authentication, as in kube, so slow authorization counts against the deadline.

use std::time::Duration;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::body::{Request, Response};
use crate::error::ApiError;
use crate::request_info::{query_pairs, query_param, RequestInfo};

/// When a non-long-running request's deadline passes (a request extension), so filters inside
/// can tell a timeout from other reasons their work was dropped.
#[derive(Debug, Clone, Copy)]
pub struct RequestDeadline(pub tokio::time::Instant);

/// The timeout filter.
#[derive(Debug, Clone)]
pub struct TimeoutLayer {
    limit: Duration,
}

impl TimeoutLayer {
    /// Builds the filter with `--request-timeout`.
    pub fn new(limit: Duration) -> Self {
        TimeoutLayer { limit }
    }
}

filter_layer!(TimeoutLayer);

/// The timeout service.
pub type Timeout<S> = Filtered<TimeoutLayer, S>;

/// Parses a Go duration as clients send it in `?timeout=` (`30s`, `1m0s`, `500ms`, `1h`).
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

impl Filter for TimeoutLayer {
    async fn filter<S: Inner>(self, req: Request, next: S) -> Response {
        if req.extensions().get::<RequestInfo>().is_none_or(RequestInfo::is_long_running) {
            return call_next(next, req).await;
        }
        let mut limit = self.limit;
        if let Some(asked) = query_param(&query_pairs(req.uri().query()), "timeout") {
            match parse_go_duration(asked) {
                Some(d) if d > Duration::ZERO => limit = limit.min(d),
                Some(_) => {}
                None => {
                    return ApiError::BadRequest("invalid timeout specified in the request URL".into()).into_response()
                }
            }
        }
        let mut req = req;
        req.extensions_mut().insert(RequestDeadline(tokio::time::Instant::now() + limit));
        match tokio::time::timeout(limit, call_next(next, req)).await {
            Ok(resp) => resp,
            Err(_) => ApiError::Timeout.into_response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http::StatusCode;
    use tower::{Layer, ServiceExt};

    use super::*;
    use crate::body::request_body;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("32s"), Some(Duration::from_secs(32)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("ten"), None);
        assert_eq!(parse_go_duration("5"), None);
    }

    #[tokio::test]
    async fn slow_requests_get_504_but_watches_run_on() {
        let slow = tower::service_fn(|_req: Request| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, Infallible>(crate::body::text(StatusCode::OK, "late".into()))
        });
        let svc = TimeoutLayer::new(Duration::from_millis(50)).layer(slow);
        let request = |path: &str, query: Option<&str>| {
            let uri = query.map_or(path.to_string(), |q| format!("{path}?{q}"));
            let mut req = http::Request::builder().uri(uri).body(request_body("")).expect("request");
            req.extensions_mut().insert(crate::request_info::parse(&http::Method::GET, path, query));
            req
        };
        let resp = svc.clone().oneshot(request("/api/v1/namespaces", None)).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::GATEWAY_TIMEOUT);
        let resp = svc.clone().oneshot(request("/api/v1/namespaces", Some("watch=true"))).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::OK);
        let resp = svc.oneshot(request("/api/v1/namespaces", Some("timeout=soon"))).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    }
}
