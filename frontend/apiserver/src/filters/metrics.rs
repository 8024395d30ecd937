//! The filter that records request metrics into [`Metrics`] (names, labels and what is counted
//! are in [`crate::metrics`]).
//!
//! It sits just inside request info, so every answer is counted, refusals (401, 403, 429, 504)
//! included. A long-running request is counted when its response starts, and stays in the
//! long-running gauge until its body ends.

use std::sync::Arc;

use super::{call_next, filter_layer, guard_body, Filter, Filtered, Inner};
use crate::body::{Request, Response};
pub use crate::metrics::Metrics;
use crate::metrics::{labels, RequestLabels};
use crate::request_info::RequestInfo;

/// The metrics filter.
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Arc<Metrics>,
}

impl MetricsLayer {
    /// Builds the filter recording into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        MetricsLayer { metrics }
    }
}

filter_layer!(MetricsLayer);

/// The metrics service.
pub type MetricsService<S> = Filtered<MetricsLayer, S>;

/// Takes a long-running request out of the gauge when its body ends.
struct LongRunningGuard {
    metrics: Arc<Metrics>,
    labels: RequestLabels,
}

impl Drop for LongRunningGuard {
    fn drop(&mut self) {
        self.metrics.add_longrunning(&self.labels, -1);
    }
}

impl Filter for MetricsLayer {
    async fn filter<S: Inner>(self, req: Request, next: S) -> Response {
        let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
        let labels = labels(&info, &req);
        let long_running = info.is_long_running();
        let started = crate::clock::monotonic_now();
        if long_running {
            self.metrics.add_longrunning(&labels, 1);
            let guard = LongRunningGuard { metrics: self.metrics.clone(), labels: labels.clone() };
            let resp = call_next(next, req).await;
            self.metrics.record(&labels, resp.status().as_u16(), None);
            return guard_body(resp, guard);
        }
        let resp = call_next(next, req).await;
        let observe = !matches!(labels.verb.as_str(), "WATCH" | "CONNECT");
        self.metrics.record(&labels, resp.status().as_u16(), observe.then(|| started.elapsed().as_secs_f64()));
        resp
    }
}
