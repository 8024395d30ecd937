//! `/metrics`: the Prometheus text of [`crate::metrics::Metrics`]. Reading it is
//! authorized like kube's: `get` on the non-resource URL `/metrics`, which the built-in
//! `system:monitoring` role grants (bound to group `system:monitoring`) besides cluster-admin.

use http::{HeaderValue, StatusCode};

use super::state::AppState;
use crate::body::{self, Response};

/// The Prometheus text exposition content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the metrics.
pub fn handle(state: &AppState) -> Response {
    let mut text = state.metrics.render();
    state.watch_cache.render_metrics(&mut text);
    crate::storage::decode_errors::render_metrics(&mut text);
    let mut resp = body::text(StatusCode::OK, text);
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    resp
}
