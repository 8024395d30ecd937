//! Ways into a shard that do not wake its thread when waking it would change nothing.
//!
//! [`WriteInbox`]: a shard leader whose round is in flight can evaluate no write before that
//! round commits, and the round commits only when the followers' answers arrive, which wake the
//! thread anyway. A write arriving meanwhile is held here instead of going through the mailbox,
//! whose every message wakes the thread: at 16 writes in flight that was one wake-up (and one
//! pass of the loop) per write.
//!
//! [`AppliedWaiters`]: a member answers a write it sent on to the leader only once it has
//! applied the write too. The waiter is woken by the shard thread right after it publishes its
//! applied index, in the round that applies the write, instead of asking through the mailbox
//! (a wake-up per forwarded write, on a thread that wakes for the round anyway).

use parking_lot::Mutex;
use tokio::sync::oneshot;

use ballast_proto::ballastpb::raft_command::Command;

use super::{Reply, WriteResponse};
use crate::error::{EngineError, Result};

/// A write and where its answer goes.
pub(super) type HeldWrite = (Command, Reply<WriteResponse>);

/// Writes held for a shard while its thread need not wake for them (see the module doc).
#[derive(Debug)]
pub(super) struct WriteInbox {
    state: Mutex<InboxState>,
    /// Most writes held; beyond it writes go through the mailbox (and its bound).
    cap: usize,
}

#[derive(Debug, Default)]
struct InboxState {
    held: Vec<HeldWrite>,
    /// Set by the shard thread before it waits while it will wake anyway.
    holding: bool,
}

impl WriteInbox {
    pub(super) fn new(cap: usize) -> Self {
        Self { state: Mutex::new(InboxState::default()), cap }
    }

    /// Holds `write` when the shard said it will wake without it; gives it back otherwise, for
    /// the mailbox (which wakes the thread).
    pub(super) fn offer(&self, write: HeldWrite) -> std::result::Result<(), HeldWrite> {
        let mut st = self.state.lock();
        if st.holding && st.held.len() < self.cap {
            st.held.push(write);
            Ok(())
        } else {
            Err(write)
        }
    }

    /// The shard thread, before it waits: `holding` says whether writes may be held from now
    /// on. Returns what is held: a write offered before this call is returned here, one after
    /// it sees the new setting (both under one lock), so no write is held while the thread
    /// waits without a wake to come.
    pub(super) fn set_holding(&self, holding: bool) -> Vec<HeldWrite> {
        let mut st = self.state.lock();
        st.holding = holding;
        std::mem::take(&mut st.held)
    }

    /// Returns how many writes are held.
    pub(super) fn len(&self) -> usize {
        self.state.lock().held.len()
    }
}

/// Waiters for a shard's applied index (see the module doc).
#[derive(Debug, Default)]
pub(super) struct AppliedWaiters {
    state: Mutex<WaitersState>,
}

#[derive(Debug, Default)]
struct WaitersState {
    waiting: Vec<(u64, oneshot::Sender<()>)>,
    /// The shard stopped: nothing will be applied any more.
    stopped: bool,
}

impl AppliedWaiters {
    /// Returns a receiver that completes once `applied()` reaches `index`, or an error when the
    /// shard has stopped. `applied` is read under the lock [`AppliedWaiters::applied`] takes
    /// after the shard stored the index, so the waiter is either woken by that call or sees the
    /// index itself.
    pub(super) fn wait(&self, index: u64, applied: impl Fn() -> u64) -> Result<Option<oneshot::Receiver<()>>> {
        let mut st = self.state.lock();
        if applied() >= index {
            return Ok(None);
        }
        if st.stopped {
            return Err(EngineError::Stopped);
        }
        // A waiter whose request timed out is dropped here, not kept until its index applies.
        st.waiting.retain(|(_, tx)| !tx.is_closed());
        let (tx, rx) = oneshot::channel();
        st.waiting.push((index, tx));
        Ok(Some(rx))
    }

    /// The shard thread, after it stored its applied index `applied`: wakes the waiters it
    /// reaches.
    pub(super) fn applied(&self, applied: u64) {
        let mut st = self.state.lock();
        if st.waiting.is_empty() {
            return;
        }
        let mut i = 0;
        while i < st.waiting.len() {
            if st.waiting[i].0 <= applied {
                let _ = st.waiting.swap_remove(i).1.send(());
            } else {
                i += 1;
            }
        }
    }

    /// The shard stopped: every waiter is told so (its receiver sees the sender dropped), and
    /// later ones at once.
    pub(super) fn stop(&self) {
        let mut st = self.state.lock();
        st.stopped = true;
        st.waiting.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_proto::etcdserverpb::PutRequest;

    fn write() -> (HeldWrite, oneshot::Receiver<Result<WriteResponse>>) {
        let (tx, rx) = oneshot::channel();
        ((Command::Put(PutRequest::default()), tx), rx)
    }

    #[test]
    fn writes_are_held_only_while_the_shard_says_so_and_up_to_the_cap() {
        let inbox = WriteInbox::new(2);
        assert!(inbox.offer(write().0).is_err(), "not holding: for the mailbox");
        assert!(inbox.set_holding(true).is_empty());
        assert!(inbox.offer(write().0).is_ok());
        assert!(inbox.offer(write().0).is_ok());
        assert!(inbox.offer(write().0).is_err(), "full: for the mailbox");
        assert_eq!(inbox.len(), 2);
        assert_eq!(inbox.set_holding(false).len(), 2, "the thread takes what was held");
        assert!(inbox.offer(write().0).is_err());
        assert_eq!(inbox.len(), 0);
    }

    #[tokio::test]
    async fn a_waiter_is_woken_once_its_index_applies_and_told_when_the_shard_stops() {
        let waiters = AppliedWaiters::default();
        assert!(waiters.wait(5, || 5).expect("running").is_none(), "already applied");
        let rx7 = waiters.wait(7, || 5).expect("running").expect("waits");
        let rx9 = waiters.wait(9, || 5).expect("running").expect("waits");
        waiters.applied(8);
        rx7.await.expect("woken at 8");
        waiters.stop();
        assert!(rx9.await.is_err(), "the shard stopped before 9");
        assert!(matches!(waiters.wait(10, || 8), Err(EngineError::Stopped)));
    }
}
