//! Watch responses: newline-delimited JSON events, streamed and flushed one by one
//! (`Transfer-Encoding: chunked` on HTTP/1.1, DATA frames on HTTP/2).
//!
//! A task per watch moves events from the registry's `Watch` into a bounded channel that the
//! response body drains. A slow client fills the channel and the task then waits, which in turn
//! leaves events in this watch's own etcd stream (flow-controlled by gRPC): one slow watcher
//! slows only itself. The task ends when the client goes away, the timeout passes
//! (`timeoutSeconds`, else 30–60 minutes as kube picks), or the watch ends.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use rand::Rng;
use tokio::sync::mpsc;

use crate::body::Response;
use crate::error::ApiError;
use crate::registry::watch::{Watch, WatchOptions};
use crate::registry::{ResourceKind, Store};

/// Events buffered per watch between the producer task and the HTTP body. Small, because the
/// etcd stream behind it is the real buffer.
const WATCH_CHANNEL_CAPACITY: usize = 16;

/// kube's minimum request timeout; a watch without `timeoutSeconds` lasts 1–2× this.
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// Starts a watch and returns the streaming response.
///
/// # Errors
///
/// Returns the errors of starting the watch (bad options, storage).
pub async fn serve(
    store: &Store,
    kind: &'static ResourceKind,
    namespace: &str,
    opts: WatchOptions,
    timeout_seconds: Option<u64>,
) -> Result<Response, ApiError> {
    let mut watch = Watch::start(store, kind, namespace, opts).await?;
    let timeout = match timeout_seconds {
        Some(secs) => Duration::from_secs(secs),
        None => MIN_REQUEST_TIMEOUT.mul_f64(1.0 + rand::thread_rng().gen::<f64>()),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(WATCH_CHANNEL_CAPACITY);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let event = tokio::select! {
                event = watch.next() => event,
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(deadline) => return,
            };
            let Some(event) = event else { return };
            let mut line = serde_json::to_vec(&event).unwrap_or_default();
            line.push(b'\n');
            if tx.send(Bytes::from(line)).await.is_err() {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|bytes| (Ok::<_, std::convert::Infallible>(Frame::data(bytes)), rx))
    });
    let mut resp = http::Response::new(StreamBody::new(stream).boxed_unsync());
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    Ok(resp)
}
