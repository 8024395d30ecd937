//! Panic recovery: a panic anywhere below becomes a 500 `InternalError` Status and a log line;
//! the connection and the server live on. Outermost, so it covers every other filter.

use futures::FutureExt;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::body::{Request, Response};
use crate::error::ApiError;

/// The panic-recovery filter.
#[derive(Debug, Clone, Default)]
pub struct PanicRecoveryLayer;

filter_layer!(PanicRecoveryLayer);

/// The panic-recovery service.
pub type PanicRecovery<S> = Filtered<PanicRecoveryLayer, S>;

impl Filter for PanicRecoveryLayer {
    async fn filter<S: Inner>(self, req: Request, next: S) -> Response {
        let method = req.method().clone();
        let uri = req.uri().clone();
        match std::panic::AssertUnwindSafe(call_next(next, req)).catch_unwind().await {
            Ok(resp) => resp,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(%method, %uri, panic = %what, "request handler panicked");
                ApiError::Internal("This request caused apiserver to panic. Look in the logs for details.".into())
                    .into_response()
            }
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

    #[tokio::test]
    async fn panics_become_500_status() {
        let panicking = tower::service_fn(|req: Request| async move {
            if req.uri().path() == "/boom" {
                panic!("boom");
            }
            Ok::<_, Infallible>(crate::body::text(StatusCode::OK, "fine".into()))
        });
        let svc = PanicRecoveryLayer.layer(panicking);
        let req = http::Request::builder().uri("/boom").body(request_body("")).expect("request");
        let resp = svc.clone().oneshot(req).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let req = http::Request::builder().uri("/fine").body(request_body("")).expect("request");
        assert_eq!(svc.oneshot(req).await.expect("infallible").status(), StatusCode::OK);
    }
}
