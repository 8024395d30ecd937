//! The audit log writer: events are queued on a bounded channel to one writer task that appends
//! JSON lines to the log file (or standard output for `-`).
//!
//! Full-buffer policy: like kube's `batch` mode, a request never waits for the log. When the
//! queue is full (the disk is slower than the request rate for longer than the buffer absorbs),
//! the event is dropped and counted in `apiserver_audit_error_total{plugin="log"}`, with a
//! warning. kube's default `blocking` mode would instead make requests wait on the disk, which
//! is the unbounded wait this server avoids.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

use crate::filters::metrics::Metrics;

/// The sending side of the writer task.
#[derive(Debug, Clone)]
pub struct Sink {
    queue: mpsc::Sender<Vec<u8>>,
    metrics: Arc<Metrics>,
}

impl Sink {
    /// Opens `path` for appending (`-` = standard output) and starts the writer task with room
    /// for `capacity` queued events.
    ///
    /// # Errors
    ///
    /// Returns the I/O error when the file cannot be opened.
    pub async fn start(path: &Path, capacity: usize, metrics: Arc<Metrics>) -> std::io::Result<Sink> {
        let out: Box<dyn AsyncWrite + Send + Unpin> = if path == Path::new("-") {
            Box::new(tokio::io::stdout())
        } else {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                tokio::fs::create_dir_all(dir).await?;
            }
            Box::new(tokio::fs::OpenOptions::new().create(true).append(true).open(path).await?)
        };
        let (queue, rx) = mpsc::channel(capacity.max(1));
        tokio::spawn(write_loop(rx, BufWriter::new(out), metrics.clone()));
        Ok(Sink { queue, metrics })
    }

    /// Queues one event line without waiting; drops and counts it when the queue is full.
    pub fn send(&self, line: Vec<u8>) {
        self.metrics.audit_events.fetch_add(1, Ordering::Relaxed);
        if self.queue.try_send(line).is_err() {
            let dropped = self.metrics.audit_errors.fetch_add(1, Ordering::Relaxed);
            // One warning per 1000 drops keeps a stalled disk from flooding the log as well.
            if dropped % 1000 == 0 {
                tracing::warn!(dropped = dropped + 1, "audit buffer full; dropping audit events");
            }
        }
    }
}

async fn write_loop(
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut out: BufWriter<Box<dyn AsyncWrite + Send + Unpin>>,
    metrics: Arc<Metrics>,
) {
    while let Some(mut line) = rx.recv().await {
        line.push(b'\n');
        let mut result = out.write_all(&line).await;
        // Flush when the queue is drained, so a quiet server's log is current and a busy one
        // writes in large chunks.
        if result.is_ok() && rx.is_empty() {
            result = out.flush().await;
        }
        if let Err(e) = result {
            metrics.audit_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "writing the audit log failed");
        }
    }
}
