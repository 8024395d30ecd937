//! Watch responses: newline-delimited JSON events, streamed and flushed one by one
//! (`Transfer-Encoding: chunked` on HTTP/1.1, DATA frames on HTTP/2).
//!
//! A task per watch moves items from the registry's `Watch` into a bounded channel that the
//! response body drains, encoding each in the negotiated form: the object as JSON (the shared
//! line the watch cache encoded once), a one-row Table (`kubectl get -w`; column definitions
//! only in the first event, as kube), or `PartialObjectMetadata`. A slow client fills the
//! channel, the task then waits, and the watch cache terminates the subscription once its own
//! queue is full: one slow watcher never slows the others. The task ends when the client goes
//! away, the timeout passes (`timeoutSeconds`, else 30–60 minutes as kube picks), or the watch
//! ends.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::negotiation::Output;
use super::state::AppState;
use crate::body::Response;
use crate::error::ApiError;
use crate::registry::table::{self, Printer, TableOptions};
use crate::registry::ResourceKind;
use crate::watch::{Watch, WatchOptions, WatchOutput};

/// Events buffered per watch between the producer task and the HTTP body. Small, because the
/// watch cache's per-client queue behind it is the real buffer.
const WATCH_CHANNEL_CAPACITY: usize = 16;

/// kube's minimum request timeout; a watch without `timeoutSeconds` lasts 1–2× this.
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// How one watch's items become bytes.
#[derive(Debug)]
struct Encoder {
    kind: &'static ResourceKind,
    /// The kind's Table printer.
    printer: &'static Printer,
    output: Output,
    include_object: table::IncludeObject,
    /// Whether a Table event was sent already (later ones leave out the column definitions).
    sent_table: bool,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut out = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

impl Encoder {
    fn table_options(&mut self) -> TableOptions {
        let api_version = match self.output {
            Output::Table(v) => v,
            _ => "meta.k8s.io/v1",
        };
        let opts = TableOptions { api_version, include_object: self.include_object, no_headers: self.sent_table };
        self.sent_table = true;
        opts
    }

    fn encode(&mut self, item: &WatchOutput) -> Bytes {
        match item {
            WatchOutput::Event { kind, event } => {
                let obj = event.object(*kind).unwrap_or(&Value::Null);
                match self.output {
                    Output::Json | Output::Yaml => event.json_line(*kind),
                    Output::Table(_) => {
                        let opts = self.table_options();
                        line(kind.as_str(), &table::from_object(self.printer, obj, opts, crate::clock::unix_now()))
                    }
                    Output::Metadata(v) => line(kind.as_str(), &table::partial_metadata(obj, v)),
                }
            }
            WatchOutput::Bookmark { revision, initial_events_end } => {
                let mut metadata = json!({"resourceVersion": revision.to_string()});
                if *initial_events_end {
                    metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                }
                let object = match self.output {
                    Output::Json | Output::Yaml => {
                        json!({"kind": self.kind.kind, "apiVersion": self.kind.api_version(), "metadata": metadata})
                    }
                    Output::Table(v) => {
                        json!({"kind": "Table", "apiVersion": v, "metadata": metadata, "columnDefinitions": null, "rows": []})
                    }
                    Output::Metadata(v) => {
                        json!({"kind": "PartialObjectMetadata", "apiVersion": v, "metadata": metadata})
                    }
                };
                line("BOOKMARK", &object)
            }
            WatchOutput::Error(status) => line("ERROR", status),
        }
    }
}

/// Starts a watch and returns the streaming response.
///
/// # Errors
///
/// Returns the errors of starting the watch (bad options, storage).
pub async fn serve(
    state: &AppState,
    kind: &'static ResourceKind,
    namespace: &str,
    opts: WatchOptions,
    timeout_seconds: Option<u64>,
    output: Output,
    include_object: table::IncludeObject,
) -> Result<Response, ApiError> {
    let mut watch = Watch::start(&state.store, &state.watch_cache, kind, namespace, opts).await?;
    let timeout = match timeout_seconds {
        Some(secs) => Duration::from_secs(secs),
        None => MIN_REQUEST_TIMEOUT.mul_f64(1.0 + rand::thread_rng().gen::<f64>()),
    };
    let printer = state.store.kinds().printer(kind);
    let mut encoder = Encoder { kind, printer, output, include_object, sent_table: false };
    let (tx, rx) = mpsc::channel::<Bytes>(WATCH_CHANNEL_CAPACITY);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let item = tokio::select! {
                item = watch.next() => item,
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(deadline) => {
                    if let Some(bookmark) = watch.closing_bookmark() {
                        // Best effort: a full channel means the client is not reading anyway.
                        let _ = tx.try_send(encoder.encode(&bookmark));
                    }
                    return;
                }
            };
            let Some(item) = item else { return };
            // A client that stops reading must not keep this task past its deadline.
            tokio::select! {
                sent = tx.send(encoder.encode(&item)) => if sent.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
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
