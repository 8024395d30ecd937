//! Max-in-flight flow control (kube's `WithMaxInFlightLimit`): at most N read-only and M
//! mutating requests run at once; over the limit the answer is 429 with `Retry-After: 1`, which
//! clients retry. Long-running requests (watches) are exempt, since they would hold a slot for
//! their whole life, and so is `system:masters`, as in kube, so an administrator can always get
//! in. A limit of 0 disables that class's limit.
//!
//! Runs after authentication and impersonation (it needs the effective user) and before
//! authorization, as in kube. The `apiserver_current_inflight_requests` gauge counts the
//! requests holding a slot.

use std::sync::Arc;

use std::sync::atomic::Ordering;

use tokio::sync::Semaphore;

use super::metrics::Metrics;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::authn::{UserInfo, MASTERS_GROUP};
use crate::body::{Request, Response};
use crate::error::ApiError;
use crate::request_info::RequestInfo;

/// The max-in-flight filter.
#[derive(Debug, Clone)]
pub struct MaxInFlightLayer {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    metrics: Arc<Metrics>,
}

impl MaxInFlightLayer {
    /// Builds the filter with kube's flags `--max-requests-inflight` and
    /// `--max-mutating-requests-inflight` (0 = unlimited).
    /// `apiserver_current_inflight_requests` goes to `metrics`.
    pub fn new(max_read_only: usize, max_mutating: usize, metrics: Arc<Metrics>) -> Self {
        let sem = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        MaxInFlightLayer { read_only: sem(max_read_only), mutating: sem(max_mutating), metrics }
    }
}

filter_layer!(MaxInFlightLayer);

/// One request counted in `apiserver_current_inflight_requests` while it lives.
struct InFlightGauge {
    metrics: Arc<Metrics>,
    mutating: bool,
}

impl InFlightGauge {
    fn enter(metrics: Arc<Metrics>, mutating: bool) -> Self {
        let gauge = InFlightGauge { metrics, mutating };
        gauge.gauge().fetch_add(1, Ordering::Relaxed);
        gauge
    }

    fn gauge(&self) -> &std::sync::atomic::AtomicI64 {
        if self.mutating {
            &self.metrics.inflight_mutating
        } else {
            &self.metrics.inflight_read_only
        }
    }
}

impl Drop for InFlightGauge {
    fn drop(&mut self) {
        self.gauge().fetch_sub(1, Ordering::Relaxed);
    }
}

/// The max-in-flight service.
pub type MaxInFlight<S> = Filtered<MaxInFlightLayer, S>;

impl Filter for MaxInFlightLayer {
    async fn filter<S: Inner>(self, req: Request, next: S) -> Response {
        let info = req.extensions().get::<RequestInfo>();
        let exempt = info.is_none_or(RequestInfo::is_long_running)
            || req.extensions().get::<UserInfo>().is_some_and(|u| u.in_group(MASTERS_GROUP));
        if exempt {
            return call_next(next, req).await;
        }
        let mutating = info.is_some_and(RequestInfo::is_mutating);
        let semaphore = if mutating { self.mutating } else { self.read_only };
        let Some(semaphore) = semaphore else { return call_next(next, req).await };
        match semaphore.try_acquire_owned() {
            // The permit lives until the response is produced (the body of a non-watch response
            // is already complete by then).
            Ok(_permit) => {
                // A guard, so a request cancelled by the timeout filter leaves the gauge too.
                let _counted = InFlightGauge::enter(self.metrics.clone(), mutating);
                call_next(next, req).await
            }
            Err(_) => ApiError::TooManyRequests { retry_after_seconds: 1 }.into_response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use http::StatusCode;
    use tower::{Layer, ServiceExt};

    use super::*;
    use crate::body::request_body;
    use crate::request_info;

    fn request(method: &http::Method, path: &str, query: Option<&str>, user: UserInfo) -> Request {
        let uri = match query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_string(),
        };
        let mut req = http::Request::builder().method(method.clone()).uri(uri).body(request_body("")).expect("req");
        req.extensions_mut().insert(request_info::parse(method, path, query));
        req.extensions_mut().insert(user);
        req
    }

    fn user(groups: &[&str]) -> UserInfo {
        UserInfo::new("u", "", groups.iter().map(|g| g.to_string()).collect())
    }

    #[tokio::test]
    async fn over_the_limit_is_429_but_watches_and_masters_pass() {
        // The inner service blocks until released, so the first request holds the only slot.
        let (release, gate) = tokio::sync::watch::channel(false);
        let slow = tower::service_fn(move |_req: Request| {
            let mut gate = gate.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok::<_, Infallible>(crate::body::text(StatusCode::OK, "ok".into()))
            }
        });
        let svc = MaxInFlightLayer::new(1, 1, Arc::default()).layer(slow);
        let list = || request(&http::Method::GET, "/api/v1/namespaces", None, user(&["system:authenticated"]));
        let first = tokio::spawn(svc.clone().oneshot(list()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let resp = svc.clone().oneshot(list()).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[http::header::RETRY_AFTER], "1");
        // The mutating class has its own slot.
        let create = request(&http::Method::POST, "/api/v1/namespaces", None, user(&[]));
        let created = tokio::spawn(svc.clone().oneshot(create));
        // Watches and system:masters are exempt.
        let watch = request(&http::Method::GET, "/api/v1/namespaces", Some("watch=true"), user(&[]));
        let watched = tokio::spawn(svc.clone().oneshot(watch));
        let admin = request(&http::Method::GET, "/api/v1/namespaces", None, user(&[MASTERS_GROUP]));
        let admitted = tokio::spawn(svc.clone().oneshot(admin));
        tokio::time::sleep(Duration::from_millis(50)).await;
        release.send(true).expect("release");
        for handle in [first, created, watched, admitted] {
            assert_eq!(handle.await.expect("join").expect("infallible").status(), StatusCode::OK);
        }
    }
}
