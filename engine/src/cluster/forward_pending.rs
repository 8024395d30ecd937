//! [`Forwarders`]: the writes this member sends on to the members leading their shards, from
//! the frame they are gathered into until their answer. The member's router owns them;
//! `forwarding` gathers, adds and answers them, the raft connections' ends fail them. Kept apart from both so neither imports the
//! other for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use ballast_proto::ballastpb::{ForwardItem, ForwardResponse};
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tonic::Status;

/// What a writer waits on: the leader's answer or the status the write failed with.
pub(super) type Reply = oneshot::Sender<Result<ForwardResponse, Status>>;

/// The unanswered forwarded writes of a member, by the number each was sent with.
#[derive(Default)]
pub(super) struct Forwarders {
    next_id: AtomicU64,
    /// Each write's leading member (raft ID) and writer.
    waiting: Mutex<HashMap<u64, (u64, Reply)>>,
    /// Writes gathered for one frame to each leading member, not yet handed to its connection.
    gathered: Mutex<HashMap<u64, Vec<ForwardItem>>>,
}

impl Forwarders {
    /// Remembers a write sent to `peer`; answers its number.
    pub(super) fn add(&self, peer: u64, reply: Reply) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        self.waiting.lock().insert(id, (peer, reply));
        id
    }

    /// Adds `write` to the frame gathered for `peer`; true when it is the first, whose writer
    /// then sends the frame ([`Forwarders::take_gathered`]).
    pub(super) fn gather(&self, peer: u64, write: ForwardItem) -> bool {
        let mut gathered = self.gathered.lock();
        let frame = gathered.entry(peer).or_default();
        frame.push(write);
        frame.len() == 1
    }

    /// Takes the writes gathered for `peer`.
    pub(super) fn take_gathered(&self, peer: u64) -> Vec<ForwardItem> {
        self.gathered.lock().remove(&peer).unwrap_or_default()
    }

    /// Forgets the write numbered `id` (its writer gave up).
    pub(super) fn forget(&self, id: u64) {
        self.waiting.lock().remove(&id);
    }

    /// Hands `result` to the writer of the write numbered `id`, if it still waits.
    pub(super) fn answer(&self, id: u64, result: Result<ForwardResponse, Status>) {
        if let Some((_, reply)) = self.waiting.lock().remove(&id) {
            let _ = reply.send(result);
        }
    }

    /// Fails every write waiting on `peer` with `status`; answers how many there were.
    pub(super) fn fail_peer(&self, peer: u64, status: &Status) -> usize {
        let failed: Vec<Reply> =
            self.waiting.lock().extract_if(|_, (to, _)| *to == peer).map(|(_, (_, reply))| reply).collect();
        let n = failed.len();
        for reply in failed {
            let _ = reply.send(Err(status.clone()));
        }
        n
    }

    /// Returns how many writes wait.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.waiting.lock().len()
    }
}

impl std::fmt::Debug for Forwarders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarders").field("waiting", &self.waiting.lock().len()).finish()
    }
}
