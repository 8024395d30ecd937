//! [`Transport`]: how raft messages reach other members.
//!
//! [`NoopTransport`] serves a single voter (it never has anyone to talk to). [`LocalTransport`]
//! connects nodes of one process through a shared [`LocalNetwork`] whose filters can drop
//! messages between chosen members, for partition tests.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use raft::eraftpb::Message;

/// Sends raft messages.
pub trait Transport {
    /// Sends `msgs`; delivery is best effort, raft retries what is lost.
    fn send(&self, msgs: Vec<Message>);

    /// Tells the transport that `to` could not be reached (a hook for backoff).
    fn report_unreachable(&self, _to: u64) {}
}

/// The transport of a single voter: there is no one to send to.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopTransport;

impl Transport for NoopTransport {
    fn send(&self, msgs: Vec<Message>) {
        debug_assert!(msgs.iter().all(|m| m.to == m.from), "a single voter sent a message to {msgs:?}");
    }
}

#[derive(Debug, Default)]
struct NetworkState {
    queue: VecDeque<Message>,
    /// Directed links (from, to) whose messages are dropped.
    cut: HashSet<(u64, u64)>,
}

/// An in-process network: messages queue here until the test delivers them.
#[derive(Clone, Debug, Default)]
pub struct LocalNetwork {
    state: Arc<Mutex<NetworkState>>,
}

impl LocalNetwork {
    /// Returns an empty network.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns a transport that sends into this network.
    pub fn transport(&self) -> LocalTransport {
        LocalTransport { net: self.clone() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NetworkState> {
        // A poisoned lock only means another test thread panicked; the queue is still usable.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops every message to and from `id` until [`LocalNetwork::heal`].
    pub fn isolate(&self, id: u64, all: &[u64]) {
        let mut s = self.lock();
        for &other in all {
            if other != id {
                s.cut.insert((id, other));
                s.cut.insert((other, id));
            }
        }
    }

    /// Removes every filter.
    pub fn heal(&self) {
        self.lock().cut.clear();
    }

    /// Takes every queued message that passes the filters.
    pub fn drain(&self) -> Vec<Message> {
        let mut s = self.lock();
        let msgs: Vec<Message> = s.queue.drain(..).collect();
        msgs.into_iter().filter(|m| !s.cut.contains(&(m.from, m.to))).collect()
    }
}

/// A node's handle on a [`LocalNetwork`].
#[derive(Clone, Debug)]
pub struct LocalTransport {
    net: LocalNetwork,
}

impl Transport for LocalTransport {
    fn send(&self, msgs: Vec<Message>) {
        self.net.lock().queue.extend(msgs);
    }
}
