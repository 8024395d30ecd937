//! [`PingPolicy`]: etcd's gRPC keepalive enforcement on a client connection. A client that
//! pings more often than `--grpc-keepalive-min-time` allows is sent GOAWAY with
//! ENHANCE_YOUR_CALM and the debug data `too_many_pings`, and the connection is closed, as
//! grpc-go's server does for etcd; clients (grpc-go, tonic) read that answer and double their
//! keepalive interval.
//!
//! The rule is grpc-go's, with etcd's settings (`PermitWithoutStream: false`): a ping is a strike
//! when it comes sooner than the minimum time after the previous one, or, while the connection
//! has no stream open, sooner than two hours after it; the server sending headers or data
//! forgives all strikes (at the next ping); the third strike past two (more than
//! [`MAX_STRIKES`]) closes the connection. hyper has no such policy (it answers every ping), so
//! this wrapper follows the frames both ways: the client's HEADERS, RST_STREAM and PING, the
//! server's HEADERS, DATA and RST_STREAM, headers only (payloads are not looked at). A connection
//! that does not start with the HTTP/2 preface (the HTTP/1.1 endpoints) passes unchanged.

use std::collections::HashSet;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

use super::authority::{FRAME_HEADER, HEADERS, PREFACE};
use crate::clock::Clock;

const DATA: u8 = 0x0;
const RST_STREAM: u8 = 0x3;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
/// END_STREAM on DATA and HEADERS, ACK on PING.
const END_STREAM_OR_ACK: u8 = 0x1;
/// HTTP/2's ENHANCE_YOUR_CALM error code.
const ENHANCE_YOUR_CALM: u32 = 0xb;
/// grpc-go's debug data for this GOAWAY, which clients match on.
const TOO_MANY_PINGS: &[u8] = b"too_many_pings";
/// Strikes a connection may have; one more closes it (grpc-go's `maxPingStrikes`).
pub const MAX_STRIKES: u32 = 2;
/// The least time between pings on a connection with no stream open (grpc-go's
/// `defaultPingTimeout`, applied because etcd does not permit pings without a stream).
pub const PING_WITHOUT_STREAM: Duration = Duration::from_secs(2 * 60 * 60);

/// A frame's header: type, flags and stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
}

/// Follows frame boundaries through the bytes of one direction of a connection.
#[derive(Debug, Default)]
struct Walker {
    header: [u8; FRAME_HEADER],
    have: usize,
    payload_left: usize,
}

impl Walker {
    /// Walks `bytes`, calling `on` with each frame whose header completes in them.
    fn feed(&mut self, mut bytes: &[u8], mut on: impl FnMut(Frame)) {
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (FRAME_HEADER - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == FRAME_HEADER {
                let h = self.header;
                self.have = 0;
                self.payload_left = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                on(Frame { kind: h[3], flags: h[4], stream });
            }
        }
    }

    /// Whether the walk is between frames.
    fn at_boundary(&self) -> bool {
        self.have == 0 && self.payload_left == 0
    }
}

/// The keepalive rule's state for one connection.
#[derive(Debug)]
struct Strikes {
    min_time: Duration,
    last_ping: Option<Instant>,
    strikes: u32,
    /// The server sent headers or data since the last ping.
    forgive: bool,
    open: HashSet<u32>,
    last_stream: u32,
}

impl Strikes {
    fn new(min_time: Duration) -> Self {
        Strikes { min_time, last_ping: None, strikes: 0, forgive: false, open: HashSet::new(), last_stream: 0 }
    }

    /// Takes one client frame; true when the connection is to be closed.
    fn client(&mut self, frame: Frame, now: Instant) -> bool {
        match frame.kind {
            HEADERS if frame.stream % 2 == 1 && frame.stream > self.last_stream => {
                self.open.insert(frame.stream);
                self.last_stream = frame.stream;
            }
            RST_STREAM => {
                self.open.remove(&frame.stream);
            }
            PING if frame.flags & END_STREAM_OR_ACK == 0 => return self.ping(now),
            _ => {}
        }
        false
    }

    /// Takes one server frame.
    fn server(&mut self, frame: Frame) {
        match frame.kind {
            DATA | HEADERS => {
                self.forgive = true;
                if frame.flags & END_STREAM_OR_ACK != 0 {
                    self.open.remove(&frame.stream);
                }
            }
            RST_STREAM => {
                self.open.remove(&frame.stream);
            }
            _ => {}
        }
    }

    fn ping(&mut self, now: Instant) -> bool {
        let last = self.last_ping.replace(now);
        if std::mem::take(&mut self.forgive) {
            self.strikes = 0;
            return false;
        }
        let least = if self.open.is_empty() { PING_WITHOUT_STREAM } else { self.min_time };
        if last.is_some_and(|last| now < last + least) {
            self.strikes += 1;
        }
        self.strikes > MAX_STRIKES
    }

    /// The GOAWAY that closes the connection: the last stream the client opened,
    /// ENHANCE_YOUR_CALM, `too_many_pings`.
    fn goaway(&self) -> Vec<u8> {
        let len = 8 + TOO_MANY_PINGS.len();
        let mut f = Vec::with_capacity(FRAME_HEADER + len);
        f.extend_from_slice(&u32::try_from(len).unwrap_or(0).to_be_bytes()[1..]);
        f.extend_from_slice(&[GOAWAY, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&self.last_stream.to_be_bytes());
        f.extend_from_slice(&ENHANCE_YOUR_CALM.to_be_bytes());
        f.extend_from_slice(TOO_MANY_PINGS);
        f
    }
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Matching the preface; `n` bytes of it seen.
    Preface(usize),
    /// HTTP/2: frames are followed.
    Frames,
    /// Not HTTP/2: bytes pass unchanged.
    Pass,
    /// Too many pings: the GOAWAY goes out at the next frame boundary of the server's writes,
    /// from `at` on.
    Closing { goaway: Vec<u8>, at: usize },
    /// The GOAWAY was written: reads see the end, writes fail.
    Closed,
}

/// A client connection under etcd's keepalive enforcement (see the module doc).
#[derive(Debug)]
pub struct PingPolicy<T> {
    inner: T,
    clock: Arc<dyn Clock>,
    state: State,
    client_frames: Walker,
    server_frames: Walker,
    strikes: Strikes,
}

impl<T> PingPolicy<T> {
    /// Wraps a server-side connection; `min_time` is `--grpc-keepalive-min-time`.
    pub fn new(inner: T, min_time: Duration, clock: Arc<dyn Clock>) -> Self {
        PingPolicy {
            inner,
            clock,
            state: State::Preface(0),
            client_frames: Walker::default(),
            server_frames: Walker::default(),
            strikes: Strikes::new(min_time),
        }
    }

    fn saw_client_bytes(&mut self, mut bytes: &[u8]) {
        if let State::Preface(seen) = self.state {
            let n = (PREFACE.len() - seen).min(bytes.len());
            if bytes[..n] != PREFACE[seen..seen + n] {
                self.state = State::Pass;
                return;
            }
            self.state = if seen + n == PREFACE.len() { State::Frames } else { State::Preface(seen + n) };
            bytes = &bytes[n..];
        }
        if self.state != State::Frames {
            return;
        }
        let (strikes, clock) = (&mut self.strikes, &self.clock);
        let mut close = false;
        self.client_frames.feed(bytes, |frame| close |= strikes.client(frame, clock.now()));
        if close {
            tracing::warn!(
                strikes = self.strikes.strikes,
                "client pings too often: closing with GOAWAY too_many_pings"
            );
            self.state = State::Closing { goaway: self.strikes.goaway(), at: 0 };
        }
    }

    fn saw_server_bytes(&mut self, bytes: &[u8]) {
        if self.state == State::Frames {
            let strikes = &mut self.strikes;
            self.server_frames.feed(bytes, |frame| strikes.server(frame));
        }
    }
}

impl<T: AsyncWrite + Unpin> PingPolicy<T> {
    /// Writes the pending GOAWAY if the server's writes are between frames; Ready(Err) once
    /// the connection is closed.
    fn poll_goaway(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match &mut self.state {
                State::Closing { goaway, at } if self.server_frames.at_boundary() => {
                    if *at < goaway.len() {
                        let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &goaway[*at..]))?;
                        if n == 0 {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                        }
                        *at += n;
                        continue;
                    }
                    ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
                    self.state = State::Closed;
                }
                State::Closed => {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed: too_many_pings")))
                }
                _ => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl<T: Connected> Connected for PingPolicy<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for PingPolicy<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.state == State::Closed {
            return Poll::Ready(Ok(()));
        }
        let start = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if this.state != State::Pass {
            this.saw_client_bytes(&buf.filled()[start..]);
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for PingPolicy<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_goaway(cx))?;
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, data))?;
        this.saw_server_bytes(&data[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_goaway(cx))?;
        let n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        let mut left = n;
        for b in bufs {
            if left == 0 {
                break;
            }
            let take = left.min(b.len());
            this.saw_server_bytes(&b[..take]);
            left -= take;
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_goaway(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = u32::try_from(payload.len()).expect("small").to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn ping() -> Vec<u8> {
        frame(PING, 0, 0, &[0; 8])
    }

    fn strikes() -> Strikes {
        Strikes::new(Duration::from_secs(5))
    }

    fn ping_at(s: &mut Strikes, now: Instant) -> bool {
        s.client(Frame { kind: PING, flags: 0, stream: 0 }, now)
    }

    #[test]
    fn frames_are_followed_across_any_split() {
        let bytes = [frame(HEADERS, 4, 1, b"abc"), ping(), frame(DATA, 1, 1, &[7; 300])].concat();
        for chunk in [1, 2, 9, 10, 64, bytes.len()] {
            let mut w = Walker::default();
            let mut seen = Vec::new();
            for piece in bytes.chunks(chunk) {
                w.feed(piece, |f| seen.push((f.kind, f.stream)));
            }
            assert_eq!(seen, [(HEADERS, 1), (PING, 0), (DATA, 1)], "chunks of {chunk}");
            assert!(w.at_boundary());
        }
    }

    #[test]
    fn pings_without_a_stream_strike_within_two_hours() {
        let now = ManualClock::new().now();
        let mut s = strikes();
        // The first ping is free; then three within two hours of each other make three strikes.
        let minute = Duration::from_secs(60);
        let closes: Vec<bool> = (0..4).map(|i| ping_at(&mut s, now + minute * i)).collect();
        assert_eq!(closes, [false, false, false, true]);
        // Two hours apart is fine.
        let mut s = strikes();
        assert!((0..10).all(|i| !ping_at(&mut s, now + PING_WITHOUT_STREAM * i)));
    }

    #[test]
    fn with_a_stream_open_the_minimum_time_applies_and_answers_forgive() {
        let now = ManualClock::new().now();
        let mut s = strikes();
        s.client(Frame { kind: HEADERS, flags: 4, stream: 1 }, now);
        let secs = |n: u64| now + Duration::from_secs(n);
        assert!((0..10).all(|i| !ping_at(&mut s, secs(6 * i))), "pings 6 s apart are allowed");
        assert!(!ping_at(&mut s, secs(61)));
        assert!(!ping_at(&mut s, secs(62)));
        // Data from the server forgives the strikes.
        s.server(Frame { kind: DATA, flags: 0, stream: 1 });
        assert!(!ping_at(&mut s, secs(63)));
        assert!(!ping_at(&mut s, secs(64)));
        assert!(!ping_at(&mut s, secs(65)));
        assert!(ping_at(&mut s, secs(66)), "the third strike past two closes");
        // Once the server ends the stream, the two-hour rule applies again.
        let mut s = strikes();
        s.client(Frame { kind: HEADERS, flags: 4, stream: 1 }, now);
        s.server(Frame { kind: HEADERS, flags: END_STREAM_OR_ACK, stream: 1 });
        assert!(s.open.is_empty());
    }

    #[tokio::test]
    async fn too_many_pings_get_goaway_and_the_connection_ends() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (client, server) = tokio::io::duplex(1 << 16);
        let mut conn = PingPolicy::new(server, Duration::from_secs(5), Arc::new(ManualClock::new()));
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, 4, 3, b"h"));
        for _ in 0..4 {
            input.extend(ping());
        }
        client_write.write_all(&input).await.expect("client writes");
        let mut buf = vec![0; input.len()];
        conn.read_exact(&mut buf).await.expect("server reads");
        assert_eq!(buf, input, "reads pass unchanged");
        // The server's next write (its PING ACK) is preceded by the GOAWAY, then refused.
        let err = conn.write_all(&frame(PING, 1, 0, &[0; 8])).await.expect_err("closed");
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        let mut got = vec![0; FRAME_HEADER + 8 + TOO_MANY_PINGS.len()];
        client_read.read_exact(&mut got).await.expect("client reads the GOAWAY");
        assert_eq!(got[3], GOAWAY);
        assert_eq!(got[9..13], 3u32.to_be_bytes(), "last stream");
        assert_eq!(got[13..17], ENHANCE_YOUR_CALM.to_be_bytes());
        assert_eq!(&got[17..], TOO_MANY_PINGS);
        assert_eq!(conn.read(&mut buf).await.expect("read"), 0, "reads see the end");
    }

    #[tokio::test]
    async fn http1_passes_unchanged() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let mut conn = PingPolicy::new(server, Duration::from_secs(5), Arc::new(ManualClock::new()));
        let request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
        client.write_all(request).await.expect("write");
        let mut buf = vec![0; request.len()];
        conn.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, request);
        assert_eq!(conn.state, State::Pass);
    }
}
