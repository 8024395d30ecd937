//! [`Pool`]: keep-alive connections to extension servers, reused across proxied requests and
//! availability checks instead of a TCP and TLS handshake per request.
//!
//! A connection goes back to the pool once its response is over (hyper reports it ready for
//! the next request), stays there at most the idle timeout, and at most `capacity` idle
//! connections are kept per backend (more are closed). Connections in use are not counted:
//! many concurrent watches to one server are many connections, as they must be.
//!
//! A backend is its address, the name its certificate must carry and the trust settings
//! (`caBundle`, `insecureSkipTLSVerify`): an APIService whose bundle changes gets new
//! connections, verified with the new bundle, and never one verified with the old.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use hyper::client::conn::http1::SendRequest;

use ballast_apiserver::body::RequestBody;

/// What makes two connections interchangeable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendKey {
    /// Host connected to.
    pub host: String,
    /// Port.
    pub port: u16,
    /// The name the server's certificate was verified for.
    pub server_name: String,
    /// The `caBundle` it was verified with.
    pub ca_bundle: Vec<u8>,
    /// Whether it was not verified at all.
    pub insecure: bool,
}

/// One idle connection.
struct Idle {
    /// Tells it apart from the others of its backend, for its idle timer.
    id: u64,
    sender: SendRequest<RequestBody>,
}

/// The idle connections, by backend.
pub struct Pool {
    /// Idle connections kept per backend.
    capacity: usize,
    /// How long a connection stays idle before it is closed.
    idle_timeout: Duration,
    next_id: AtomicU64,
    idle: Mutex<HashMap<BackendKey, Vec<Idle>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle: usize = self.idle.lock().unwrap_or_else(PoisonError::into_inner).values().map(Vec::len).sum();
        f.debug_struct("Pool")
            .field("capacity", &self.capacity)
            .field("idle_timeout", &self.idle_timeout)
            .field("idle", &idle)
            .finish()
    }
}

impl Pool {
    /// An empty pool keeping at most `capacity` idle connections per backend for at most
    /// `idle_timeout` each (a capacity of 0 keeps none: a connection per request).
    pub fn new(capacity: usize, idle_timeout: Duration) -> Arc<Pool> {
        Arc::new(Pool { capacity, idle_timeout, next_id: AtomicU64::new(0), idle: Mutex::default() })
    }

    /// An idle connection to `key`, the most recently used first (the likeliest to be still
    /// open at the server's end); connections closed meanwhile are dropped on the way.
    pub fn checkout(&self, key: &BackendKey) -> Option<SendRequest<RequestBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let list = idle.get_mut(key)?;
        let mut found = None;
        while let Some(entry) = list.pop() {
            if entry.sender.is_ready() {
                found = Some(entry.sender);
                break;
            }
        }
        if list.is_empty() {
            idle.remove(key);
        }
        found
    }

    /// Hands `sender` back once its connection has finished the current exchange: kept if it
    /// is still open and the backend has room, else closed (dropped). Runs on the current
    /// runtime; a connection that never finishes (a watch) is never returned and ends with its
    /// stream.
    pub fn release(self: &Arc<Pool>, key: BackendKey, mut sender: SendRequest<RequestBody>) {
        if self.capacity == 0 {
            return;
        }
        let pool = Arc::downgrade(self);
        tokio::spawn(async move {
            if sender.ready().await.is_err() {
                return;
            }
            if let Some(pool) = pool.upgrade() {
                pool.keep(key, sender);
            }
        });
    }

    /// Number of idle connections to `key`.
    pub fn idle_count(&self, key: &BackendKey) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).get(key).map_or(0, Vec::len)
    }

    fn keep(self: &Arc<Pool>, key: BackendKey, sender: SendRequest<RequestBody>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let list = idle.entry(key.clone()).or_default();
            if list.len() >= self.capacity {
                return;
            }
            list.push(Idle { id, sender });
        }
        let (pool, timeout) = (Arc::downgrade(self), self.idle_timeout);
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            expire(&pool, &key, id);
        });
    }
}

/// Closes idle connection `id` of `key` if it is still idle (not taken meanwhile).
fn expire(pool: &Weak<Pool>, key: &BackendKey, id: u64) {
    let Some(pool) = pool.upgrade() else { return };
    let mut idle = pool.idle.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(list) = idle.get_mut(key) {
        list.retain(|e| e.id != id);
        if list.is_empty() {
            idle.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;

    fn key() -> BackendKey {
        BackendKey { host: "h".into(), port: 1, server_name: "h".into(), ca_bundle: vec![], insecure: false }
    }

    /// A sender whose connection is an in-memory pipe nobody reads: ready at once, and
    /// closed when `peer` is dropped.
    async fn sender() -> (SendRequest<RequestBody>, tokio::io::DuplexStream) {
        let (ours, peer) = tokio::io::duplex(64);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(ours)).await.expect("handshake");
        tokio::spawn(conn);
        (sender, peer)
    }

    async fn settle(pool: &Pool, want: usize) {
        for _ in 0..100 {
            if pool.idle_count(&key()) == want {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn keeps_up_to_capacity_until_the_idle_timeout() {
        let pool = Pool::new(2, Duration::from_secs(2));
        let mut peers = Vec::new();
        for _ in 0..3 {
            let (s, peer) = sender().await;
            peers.push(peer);
            pool.release(key(), s);
        }
        settle(&pool, 2).await;
        assert_eq!(pool.idle_count(&key()), 2, "capacity bounds the idle connections");
        let taken = pool.checkout(&key()).expect("an idle connection");
        assert_eq!(pool.idle_count(&key()), 1);
        drop(taken);
        for _ in 0..500 {
            if pool.idle_count(&key()) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(pool.idle_count(&key()), 0, "idle connections expire");
        assert!(pool.checkout(&key()).is_none());
    }

    #[tokio::test]
    async fn a_closed_connection_is_not_handed_out() {
        let pool = Pool::new(4, Duration::from_secs(90));
        let (s, peer) = sender().await;
        pool.release(key(), s);
        settle(&pool, 1).await;
        drop(peer);
        let mut handed = None;
        for _ in 0..100 {
            handed = pool.checkout(&key());
            if handed.is_none() {
                break;
            }
            // Not yet seen closed: give it back and let the connection task notice.
            pool.release(key(), handed.take().expect("sender"));
            tokio::task::yield_now().await;
        }
        assert!(handed.is_none(), "a closed connection was handed out");
    }

    #[tokio::test]
    async fn capacity_zero_keeps_nothing() {
        let pool = Pool::new(0, Duration::from_secs(90));
        let (s, _peer) = sender().await;
        pool.release(key(), s);
        tokio::task::yield_now().await;
        assert_eq!(pool.idle_count(&key()), 0);
    }
}
