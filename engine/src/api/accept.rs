//! Accepting client connections without spinning when the process is out of descriptors.
//!
//! `accept` fails at once, again and again, while the process has no descriptor free (EMFILE)
//! or the system none (ENFILE); a loop that retries at once burns a core and starves the
//! shards that might free descriptors. [`incoming`] backs off as Go's `net/http` server does
//! (5 ms, doubling to 1 s) and logs the first failure of each run, so running out shows in the
//! log instead of as a silent port.

use std::time::Duration;

use futures::Stream;
use tokio::net::{TcpListener, TcpStream};

/// The first pause after a failed accept (Go's `net/http` uses the same).
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
/// The longest pause between accept attempts: a freed descriptor is used within a second.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Yields the connections `listener` accepts; accept failures are logged and retried after a
/// growing pause, never yielded.
pub fn incoming(listener: TcpListener) -> impl Stream<Item = std::io::Result<TcpStream>> + Send + 'static {
    futures::stream::unfold((listener, Duration::ZERO), |(listener, mut backoff)| async move {
        loop {
            match listener.accept().await {
                Ok((tcp, _)) => {
                    if !backoff.is_zero() {
                        tracing::info!("accepting client connections again");
                    }
                    return Some((Ok(tcp), (listener, Duration::ZERO)));
                }
                // The peer gave up before we took the connection: nothing to wait for.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    if backoff.is_zero() {
                        tracing::error!(
                            addr = ?listener.local_addr().ok(),
                            error = %e,
                            "cannot accept client connections (out of file descriptors?); retrying"
                        );
                        backoff = FIRST_BACKOFF;
                    } else {
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    })
}
