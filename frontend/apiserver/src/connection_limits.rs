//! What one client connection to the secure port may hold, and for how long: the limits
//! kube-apiserver's Go HTTP server applies (`ReadHeaderTimeout`, `IdleTimeout`, HTTP/2
//! `MaxConcurrentStreams`), a bound on concurrent connections, and HTTP/2 reset-flood
//! ("rapid reset") protection.
//!
//! [`Activity`] counts a connection's requests in flight; the connection's task closes it
//! (gracefully: HTTP/2 GOAWAY, HTTP/1.1 close) once it has had none for the idle timeout, so an
//! idle HTTP/1.1 or HTTP/2 connection, or one that never sends a request after its TLS
//! handshake, does not hold a descriptor and a task forever. Watches are requests in flight:
//! a connection carrying one is never idle.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The secure port's connection limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's headers (HTTP/1.1), counted from when the
    /// connection is ready for the request. kube-apiserver's `ReadHeaderTimeout`, 32 s: longer
    /// than any real client needs, short enough that a slowloris client sending a header byte
    /// at a time cannot hold connections for minutes.
    pub header_read_timeout: Duration,
    /// How long a connection with no request in flight stays open. kube-apiserver's
    /// `IdleTimeout` (HTTP/1.1 and HTTP/2 alike), 90 s: clients reuse a connection within
    /// seconds, and an abandoned one is released.
    pub idle_timeout: Duration,
    /// Most concurrent HTTP/2 streams per connection: kube-apiserver's
    /// `--http2-max-streams-per-connection` default, 250 (enough for a client's watches, the
    /// rest of its requests queue).
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 streams a client may reset before the server took them, after which the
    /// connection is closed with ENHANCE_YOUR_CALM: the rapid-reset attack (CVE-2023-44487)
    /// opens and cancels streams faster than a server can refuse them. 20 is hyper's default and
    /// Go's bound on concurrently handled resets is of the same order.
    pub http2_max_pending_accept_reset_streams: usize,
    /// Most client connections open at once. Each costs a descriptor, TLS state and a task;
    /// past this the port stops accepting (new connections wait in the kernel's backlog) and
    /// says so in the log. 10,000: far above a control plane's clients (kubelets and
    /// controllers share a few connections each), well below the open-file limit start-up asks
    /// for.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            http2_max_concurrent_streams: 250,
            http2_max_pending_accept_reset_streams: 20,
            max_connections: 10_000,
        }
    }
}

/// Requests in flight on one connection.
#[derive(Debug, Clone, Default)]
pub struct Activity(Arc<AtomicUsize>);

impl Activity {
    /// Marks a request as started; it ends when the returned guard is dropped (with its
    /// response body, so a streaming answer keeps the connection busy).
    pub fn start(&self) -> InFlight {
        self.0.fetch_add(1, Ordering::Relaxed);
        InFlight(self.0.clone())
    }

    /// Whether no request is in flight.
    pub fn idle(&self) -> bool {
        self.0.load(Ordering::Relaxed) == 0
    }
}

/// One request in flight (see [`Activity::start`]).
#[derive(Debug)]
pub struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How often a connection looks whether it has been idle long enough: a tenth of the idle
/// timeout, so a connection closes at most 10% late, checked a few times a minute at the
/// default.
pub fn idle_check_interval(limits: &ConnectionLimits) -> Duration {
    (limits.idle_timeout / 10).max(Duration::from_millis(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_counts_requests_until_their_guards_drop() {
        let a = Activity::default();
        assert!(a.idle());
        let one = a.start();
        let two = a.start();
        drop(one);
        assert!(!a.idle());
        drop(two);
        assert!(a.idle());
    }
}
