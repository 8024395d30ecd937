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

use crate::metrics::Metrics;

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

    /// Returns a sink whose queue nobody drains, and the receiver (tests of the full policy).
    #[cfg(test)]
    fn undrained(capacity: usize, metrics: Arc<Metrics>) -> (Sink, mpsc::Receiver<Vec<u8>>) {
        let (queue, rx) = mpsc::channel(capacity);
        (Sink { queue, metrics }, rx)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let metrics = Arc::new(Metrics::default());
        let (sink, mut rx) = Sink::undrained(2, metrics.clone());
        for i in 0..5u8 {
            sink.send(vec![i]);
        }
        assert_eq!(metrics.audit_events.load(Ordering::Relaxed), 5);
        assert_eq!(metrics.audit_errors.load(Ordering::Relaxed), 3);
        assert_eq!(rx.recv().await, Some(vec![0]));
        assert_eq!(rx.recv().await, Some(vec![1]));
        // Room again: the next event is queued.
        sink.send(vec![9]);
        assert_eq!(rx.recv().await, Some(vec![9]));
        assert_eq!(metrics.audit_errors.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn writes_json_lines_to_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/audit.log");
        let sink = Sink::start(&path, 8, Arc::default()).await.expect("start");
        sink.send(b"{\"a\":1}".to_vec());
        sink.send(b"{\"b\":2}".to_vec());
        let mut text = String::new();
        for _ in 0..100 {
            text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(text, "{\"a\":1}\n{\"b\":2}\n");
    }
}
