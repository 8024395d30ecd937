//! Accepting connections (the client ports' and the peer port's) without spinning when the process is out of descriptors.
//!
//! `accept` fails at once, again and again, while the process has no descriptor free (EMFILE)
//! or the system none (ENFILE); a loop that retries at once burns a core and starves the
//! shards that might free descriptors. [`incoming`] backs off as Go's `net/http` server does
//! (5 ms, doubling to 1 s) and logs the first failure of each run, so running out shows in the
//! log instead of as a silent port. The TLS ports (`https://`, `unixs://`) accept through the
//! same [`Backoff`] before their handshakes.

use std::time::Duration;

use futures::Stream;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// The first pause after a failed accept (Go's `net/http` uses the same).
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
/// The longest pause between accept attempts: a freed descriptor is used within a second.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A socket listener clients connect to: TCP or a Unix socket, plain or with TLS on top.
pub trait Listener: Send + Sync + 'static {
    /// The accepted connection.
    type Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static;

    /// Accepts the next connection; answers it and the peer's name for logs.
    fn accept_one(&self) -> impl std::future::Future<Output = std::io::Result<(Self::Io, String)>> + Send;

    /// Where the listener listens, for logs.
    fn name(&self) -> String;
}

impl Listener for TcpListener {
    type Io = TcpStream;

    async fn accept_one(&self) -> std::io::Result<(TcpStream, String)> {
        let (tcp, peer) = self.accept().await?;
        let _ = tcp.set_nodelay(true);
        Ok((tcp, peer.to_string()))
    }

    fn name(&self) -> String {
        self.local_addr().map_or_else(|_| "a TCP listener".into(), |a| a.to_string())
    }
}

impl Listener for UnixListener {
    type Io = UnixStream;

    async fn accept_one(&self) -> std::io::Result<(UnixStream, String)> {
        let (unix, _) = self.accept().await?;
        Ok((unix, "unix socket".to_string()))
    }

    fn name(&self) -> String {
        self.local_addr().ok().and_then(|a| a.as_pathname().map(|p| p.display().to_string())).unwrap_or_default()
    }
}

/// The pause an accept loop takes after failures: none while accepts succeed, then
/// [`FIRST_BACKOFF`] doubling to [`MAX_BACKOFF`]; the first failure of a run and the recovery
/// are logged.
#[derive(Debug, Default)]
pub struct Backoff {
    pause: Duration,
}

impl Backoff {
    /// Notes an accepted connection.
    pub fn succeeded(&mut self) {
        if !self.pause.is_zero() {
            tracing::info!("accepting connections again");
        }
        self.pause = Duration::ZERO;
    }

    /// Notes a failed accept on `listener` and waits before the next attempt. A connection
    /// its peer gave up on before it was taken needs no wait.
    pub async fn failed(&mut self, listener: &impl Listener, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::ConnectionAborted {
            return;
        }
        if self.pause.is_zero() {
            tracing::error!(
                listener = %listener.name(),
                error = %e,
                "cannot accept connections (out of file descriptors?); retrying"
            );
            self.pause = FIRST_BACKOFF;
        } else {
            self.pause = (self.pause * 2).min(MAX_BACKOFF);
        }
        tokio::time::sleep(self.pause).await;
    }
}

/// Accepts connections from `listener` until `closed` completes and hands each one, with its
/// peer's name, to `take`; accept failures are logged and retried after a growing pause
/// ([`Backoff`]). The TLS ports and the peer port sort their connections this way.
pub async fn each_connection<L: Listener>(
    listener: L,
    closed: impl std::future::Future<Output = ()>,
    mut take: impl FnMut(L::Io, String),
) {
    let mut backoff = Backoff::default();
    tokio::pin!(closed);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept_one() => accepted,
            () = &mut closed => return,
        };
        match accepted {
            Ok((io, peer)) => {
                backoff.succeeded();
                take(io, peer);
            }
            Err(e) => backoff.failed(&listener, &e).await,
        }
    }
}

/// Yields the connections `listener` accepts; accept failures are logged and retried after a
/// growing pause ([`Backoff`]), never yielded.
pub fn incoming<L: Listener>(listener: L) -> impl Stream<Item = std::io::Result<L::Io>> + Send + 'static {
    futures::stream::unfold((listener, Backoff::default()), |(listener, mut backoff)| async move {
        loop {
            match listener.accept_one().await {
                Ok((io, _)) => {
                    backoff.succeeded();
                    return Some((Ok(io), (listener, backoff)));
                }
                Err(e) => backoff.failed(&listener, &e).await,
            }
        }
    })
}
