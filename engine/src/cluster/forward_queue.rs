//! [`Forwarders`]: the queues of writes this member sends on to the members leading their
//! shards, one per leading member. The member's router owns them; `forwarding` drains them
//! into each member's stream. Kept apart from both so neither imports the other for them.

use std::collections::HashMap;

use ballast_proto::ballastpb::{ForwardResponse, RaftCommand};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

/// What a writer waits on: the leader's answer or the status the write failed with.
pub(super) type Reply = oneshot::Sender<Result<ForwardResponse, Status>>;

/// One write waiting to be sent.
pub(super) struct Queued {
    pub(super) shard: u32,
    pub(super) write: RaftCommand,
    pub(super) reply: Reply,
}

/// The forwarding queues of a member, one per member it sends writes to.
#[derive(Default)]
pub(super) struct Forwarders {
    pub(super) queues: Mutex<HashMap<u64, mpsc::Sender<Queued>>>,
}

impl std::fmt::Debug for Forwarders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarders").field("peers", &self.queues.lock().len()).finish()
    }
}
