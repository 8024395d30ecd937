//! [`CoalescingStream`]: a connection that lets one scheduler turn pass before the first write of
//! each flush, so the HTTP/2 frames of many requests or responses leave in one `writev`. The
//! engine wraps every accepted client connection in it, and the load tool its own connections.
//!
//! Why: hyper runs every HTTP/2 stream as its own task. When a round of requests is answered
//! (or issued), each stream task queues its frames and wakes the connection task, and tokio
//! runs a task woken that way right after the waker (its LIFO slot). Without a pause the
//! connection task therefore flushes after every single message: one `writev`, one loopback
//! transmit and one wakeup of the peer each. Yielding once before the first write of a flush
//! puts the connection task behind the other stream tasks already queued, so it writes
//! everything they produced at once. When nothing else is queued the yield costs one task poll.
//!
//! This changes only when bytes are written, never what or in which order: HTTP/2 framing and
//! ordering stay h2's.
#![warn(missing_docs, unreachable_pub, clippy::all, missing_debug_implementations)]

// #[PerformanceCriticalPath]
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// Where a connection is between two flushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlushState {
    /// Nothing written since the last flush: the next write yields first.
    Idle,
    /// Yielded once; the next write goes to the socket.
    Yielded,
    /// Writing: further writes of this flush go straight to the socket.
    Writing,
}

/// A connection whose writes wait one scheduler turn per flush (see the module doc).
#[derive(Debug)]
pub struct CoalescingStream<T> {
    inner: T,
    state: FlushState,
}

impl<T> CoalescingStream<T> {
    /// Wraps a connection.
    pub fn new(inner: T) -> Self {
        Self { inner, state: FlushState::Idle }
    }

    /// Returns true when this write should wait a turn: the task is woken at once, so it is polled
    /// again after the tasks already queued.
    fn defer(&mut self, cx: &mut Context<'_>) -> bool {
        match self.state {
            FlushState::Idle => {
                self.state = FlushState::Yielded;
                cx.waker().wake_by_ref();
                true
            }
            FlushState::Yielded | FlushState::Writing => {
                self.state = FlushState::Writing;
                false
            }
        }
    }
}

impl<T: Connected> Connected for CoalescingStream<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CoalescingStream<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CoalescingStream<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.defer(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.defer(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // h2 flushes after writing out everything it had buffered: the next write starts a new
        // batch.
        self.state = FlushState::Idle;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    #[tokio::test]
    async fn writes_arrive_whole_and_in_order_after_the_yield() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.expect("read");
            got
        });
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut s = CoalescingStream::new(tcp);
        for chunk in [&b"one "[..], b"two ", b"three"] {
            s.write_all(chunk).await.expect("write");
        }
        s.flush().await.expect("flush");
        s.write_all(b" four").await.expect("write after flush");
        s.shutdown().await.expect("shutdown");
        drop(s);
        assert_eq!(client.await.expect("client"), b"one two three four");
    }

    #[test]
    fn the_first_write_of_each_flush_waits_one_turn() {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let _client = TcpStream::connect(addr).await.expect("connect");
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut s = CoalescingStream::new(tcp);
            assert!(Pin::new(&mut s).poll_write(&mut cx, b"a").is_pending());
            assert!(matches!(Pin::new(&mut s).poll_write(&mut cx, b"a"), Poll::Ready(Ok(1))));
            assert!(matches!(Pin::new(&mut s).poll_write(&mut cx, b"b"), Poll::Ready(Ok(1))));
            assert!(matches!(Pin::new(&mut s).poll_flush(&mut cx), Poll::Ready(Ok(()))));
            assert!(Pin::new(&mut s).poll_write(&mut cx, b"c").is_pending());
        });
    }
}
