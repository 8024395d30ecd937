//! What one client connection to the secure port may hold, and for how long: the limits
//! kube-apiserver's Go HTTP server applies (`ReadHeaderTimeout`, `IdleTimeout`, HTTP/2
//! `MaxConcurrentStreams`), a bound on concurrent connections, and HTTP/2 reset-flood
//! ("rapid reset") protection.
//!
//! [`Activity`] counts a connection's requests in flight and the bytes it read; [`Deadlines`]
//! turns them into Go's two clocks, and the connection's task closes the connection
//! (gracefully: HTTP/2 GOAWAY, HTTP/1.1 close) when one runs out: an HTTP/1.1 request whose
//! headers take longer than the header read timeout (a slowloris client, or one that never
//! sends a request after its TLS handshake), or a connection with no request for the idle
//! timeout (an HTTP/1.1 keep-alive connection between requests, an HTTP/2 one with no stream).
//! The two are independent: a keep-alive connection between requests waits the idle timeout,
//! not the header timeout. Watches are requests in flight: a connection carrying one is never
//! idle.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The secure port's connection limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's headers (HTTP/1.1), counted from the
    /// connection's start for its first request and from the first byte of each later one (a
    /// keep-alive connection waiting between requests is under `idle_timeout` instead).
    /// kube-apiserver's `ReadHeaderTimeout`, 32 s: longer
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

/// What one connection's task watches: requests in flight, and the bytes read from the client
/// (counted by [`CountReads`]), to tell a connection waiting for its next request from one
/// sending a request's headers.
#[derive(Debug, Clone, Default)]
pub struct Activity(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    in_flight: AtomicUsize,
    /// Requests started on the connection.
    started: AtomicU64,
    /// Bytes read from the client.
    read: AtomicU64,
    /// `read` when the last request ended: bytes beyond it belong to the next request.
    read_at_last_end: AtomicU64,
}

impl Activity {
    /// Marks a request as started; it ends when the returned guard is dropped (with its
    /// response body, so a streaming answer keeps the connection busy).
    pub fn start(&self) -> InFlight {
        self.0.started.fetch_add(1, Ordering::Relaxed);
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.0.clone())
    }

    /// Whether no request is in flight.
    pub fn idle(&self) -> bool {
        self.0.in_flight.load(Ordering::Relaxed) == 0
    }

    /// Counts `n` bytes read from the client.
    pub fn read(&self, n: usize) {
        self.0.read.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Whether a request's headers are due: nothing was asked yet on the connection, or bytes
    /// of the next request arrived since the last one ended.
    fn head_due(&self) -> bool {
        self.0.started.load(Ordering::Relaxed) == 0
            || self.0.read.load(Ordering::Relaxed) > self.0.read_at_last_end.load(Ordering::Relaxed)
    }
}

/// One request in flight (see [`Activity::start`]).
#[derive(Debug)]
pub struct InFlight(Arc<Counters>);

impl Drop for InFlight {
    fn drop(&mut self) {
        // What the client sent up to now was this request's; later bytes start the next one.
        self.0.read_at_last_end.store(self.0.read.load(Ordering::Relaxed), Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How often a connection looks whether it has waited too long: a tenth of the shorter
/// timeout, so a connection closes at most 10% late, checked a few times a minute at the
/// defaults.
pub fn check_interval(limits: &ConnectionLimits) -> Duration {
    (limits.idle_timeout.min(limits.header_read_timeout) / 10).max(Duration::from_millis(10))
}

/// Why a connection is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// An HTTP/1.1 request's headers took longer than the header read timeout.
    HeaderRead,
    /// No request for the idle timeout.
    Idle,
}

/// The two clocks of a connection, as Go's HTTP server keeps them: an HTTP/1.1 request's
/// headers must arrive within the header read timeout, counted from the connection's start for
/// the first request and from the next request's first byte after that; a connection waiting
/// for its next request (HTTP/1.1 keep-alive, or HTTP/2 with no stream open) is closed after the
/// idle timeout. Advanced by [`Self::tick`] every [`check_interval`].
#[derive(Debug)]
pub struct Deadlines {
    limits: ConnectionLimits,
    http1: bool,
    head_for: Duration,
    idle_for: Duration,
}

impl Deadlines {
    /// The clocks of a new connection; `http1` when it speaks HTTP/1.1 (HTTP/2 has no header
    /// read timeout: its streams' headers arrive in frames of a live connection).
    pub fn new(limits: ConnectionLimits, http1: bool) -> Self {
        Deadlines { limits, http1, head_for: Duration::ZERO, idle_for: Duration::ZERO }
    }

    /// Advances the clocks by `elapsed`; returns why the connection is to be closed, if it is.
    pub fn tick(&mut self, activity: &Activity, elapsed: Duration) -> Option<Expired> {
        if !activity.idle() {
            (self.head_for, self.idle_for) = (Duration::ZERO, Duration::ZERO);
            return None;
        }
        if self.http1 && activity.head_due() {
            self.idle_for = Duration::ZERO;
            self.head_for += elapsed;
            (self.head_for >= self.limits.header_read_timeout).then_some(Expired::HeaderRead)
        } else {
            self.head_for = Duration::ZERO;
            self.idle_for += elapsed;
            (self.idle_for >= self.limits.idle_timeout).then_some(Expired::Idle)
        }
    }
}

/// A connection's I/O with the bytes read counted into an [`Activity`].
#[derive(Debug)]
pub struct CountReads<T> {
    inner: T,
    activity: Activity,
}

impl<T> CountReads<T> {
    /// Wraps `inner`, counting into `activity`.
    pub fn new(inner: T, activity: Activity) -> Self {
        CountReads { inner, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CountReads<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.activity.read(buf.filled().len() - before);
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CountReads<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            ..ConnectionLimits::default()
        }
    }

    /// Ticks `clock` by a second `n` times; the first expiry seen, with the tick it came at.
    fn run(clock: &mut Deadlines, a: &Activity, n: u64) -> Option<(u64, Expired)> {
        (1..=n).find_map(|t| clock.tick(a, Duration::from_secs(1)).map(|e| (t, e)))
    }

    #[test]
    fn a_first_request_must_come_within_the_header_timeout() {
        let a = Activity::default();
        let mut clock = Deadlines::new(limits(), true);
        assert_eq!(run(&mut clock, &a, 100), Some((32, Expired::HeaderRead)));
        // HTTP/2 has only the idle clock.
        let mut clock = Deadlines::new(limits(), false);
        assert_eq!(run(&mut clock, &a, 100), Some((90, Expired::Idle)));
    }

    #[test]
    fn a_keep_alive_connection_between_requests_waits_the_idle_timeout() {
        let a = Activity::default();
        let mut clock = Deadlines::new(limits(), true);
        a.read(40);
        let request = a.start();
        assert_eq!(run(&mut clock, &a, 200), None, "a request in flight never expires");
        a.read(1000); // its body
        drop(request);
        assert_eq!(run(&mut clock, &a, 100), Some((90, Expired::Idle)));
    }

    #[test]
    fn the_header_clock_starts_at_the_next_requests_first_byte() {
        let a = Activity::default();
        let mut clock = Deadlines::new(limits(), true);
        drop(a.start());
        assert_eq!(run(&mut clock, &a, 60), None, "60 s between requests is within the idle timeout");
        a.read(5); // `GET /` and no more
        assert_eq!(run(&mut clock, &a, 100), Some((32, Expired::HeaderRead)));
    }
}
