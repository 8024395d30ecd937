//! [`ShardMsg`]: everything the network plane can ask of a shard. The shard thread is the only
//! owner of the shard's state; these messages are the only way in.

use ballast_proto::ballastpb::raft_command::Command;
use ballast_proto::etcdserverpb::{
    AlarmResponse, CompactionResponse, DeleteRangeResponse, HashKvResponse, LeaseGrantResponse, LeaseLeasesResponse,
    LeaseRevokeResponse, LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, PutResponse, RangeRequest, RangeResponse,
    TxnRequest, TxnResponse, WatchCreateRequest,
};
use tokio::sync::oneshot;

use crate::error::Result;
use crate::watch::{StreamId, WatchSender};

/// A reply channel.
pub type Reply<T> = oneshot::Sender<Result<T>>;

/// Where a write's answer goes.
#[derive(Debug)]
pub enum WriteReply {
    /// A task of this member.
    Local(Reply<WriteResponse>),
    /// The member with raft ID `to`, which sent the write on to this shard's leader under the
    /// number `id` (`cluster::forwarding`).
    Peer {
        /// The sending member's raft ID.
        to: u64,
        /// The sender's number for the write.
        id: u64,
    },
}

/// Takes the answers of writes other members sent on to a shard this member leads back to
/// them: the network plane encodes them for the wire (a shard knows no wire format).
pub trait PeerAnswers: Send + Sync + std::fmt::Debug {
    /// Sends member `to` the answers of a round (each write's number and result), with the raft
    /// index the shard had applied when it answered.
    fn send(&self, to: u64, answers: Vec<(u64, Result<WriteResponse>)>, applied: u64);
}

/// The response of a committed write.
#[derive(Debug)]
pub enum WriteResponse {
    /// Answer to a Put.
    Put(PutResponse),
    /// Answer to a DeleteRange.
    DeleteRange(DeleteRangeResponse),
    /// Answer to a Txn.
    Txn(TxnResponse),
    /// Answer to a Compact.
    Compaction(CompactionResponse),
    /// Answer to a LeaseGrant.
    LeaseGrant(LeaseGrantResponse),
    /// Answer to a LeaseRevoke.
    LeaseRevoke(LeaseRevokeResponse),
    /// Answer to an Alarm activation or deactivation.
    Alarm(AlarmResponse),
    /// Answer to an auth store change (shard 0): the auth revision after it.
    Auth(ballast_proto::ballastpb::AuthApplied),
}

/// What a shard reports for `Status`.
#[derive(Debug, Clone, Default)]
pub struct ShardStatus {
    /// Approximate backend size in bytes.
    pub db_size: i64,
    /// The raft leader's ID (0: none).
    pub leader: u64,
    /// Last raft log index.
    pub raft_index: u64,
    /// Current raft term.
    pub raft_term: u64,
    /// Applied raft index.
    pub raft_applied_index: u64,
    /// Current store revision.
    pub revision: i64,
    /// Active alarms, as etcd's `AlarmType` numbers.
    pub alarms: Vec<i32>,
}

/// The leader's view of its group, for membership checks.
#[derive(Debug, Clone, Default)]
pub struct GroupProgress {
    /// Every member: (raft ID, match index, heard from within an election timeout).
    pub members: Vec<(u64, u64, bool)>,
    /// The leader's last log index.
    pub last_index: u64,
}

/// A message to a shard.
#[derive(Debug)]
pub enum ShardMsg {
    /// A Range, served from the shard's applied state.
    Range(RangeRequest, Reply<RangeResponse>),
    /// A Txn that cannot write, served without raft.
    ReadTxn(TxnRequest, Reply<TxnResponse>),
    /// A write, proposed through raft and answered once applied.
    Write(Command, Reply<WriteResponse>),
    /// A write another member sent on to this shard's leader: as `Write`, but the sending
    /// member answers its client only once it applied the write itself, so it needs the commit
    /// index at once (rounds do not gather while such writes come, `ShardConfig::round_gather`).
    ForwardedWrite(Command, WriteReply),
    /// A lease keep-alive: replies with the granted TTL, or 0 when the lease is gone.
    LeaseKeepAlive(i64, Reply<i64>),
    /// A lease time-to-live query.
    LeaseTimeToLive(LeaseTimeToLiveRequest, Reply<LeaseTimeToLiveResponse>),
    /// Lists leases.
    LeaseLeases(Reply<LeaseLeasesResponse>),
    /// A new client watch stream.
    WatchOpen(StreamId, WatchSender),
    /// A watch create request on a stream.
    WatchCreate(StreamId, WatchCreateRequest),
    /// Refuse a watch create on the stream, for this reason (its credentials do not allow it):
    /// answered `created` and `canceled` with watch ID -1, in order with the stream's other
    /// answers.
    WatchRefuse(StreamId, &'static str),
    /// A watch cancel request on a stream.
    WatchCancel(StreamId, i64),
    /// A progress request on a stream.
    WatchProgress(StreamId),
    /// The client stream ended.
    WatchClose(StreamId),
    /// Status figures.
    Status(Reply<ShardStatus>),
    /// etcd's Hash: a checksum of the whole key-value history.
    Hash(Reply<u32>),
    /// etcd's HashKV at a revision (0: current).
    HashKv(i64, Reply<HashKvResponse>),
    /// Reclaims disk space.
    Defragment(Reply<()>),
    /// Writes a consistent copy of the store into the given directory and answers the revision
    /// it holds; with a [`Cut`](super::cut::Cut), only once every shard of the cut stands still,
    /// so all the copies hold the same revision.
    Checkpoint(std::path::PathBuf, Option<std::sync::Arc<super::cut::Cut>>, Reply<i64>),
    /// Raft messages from other members' replicas of this shard.
    Raft(Vec<ballast_raft::Message>),
    /// The peer with this raft ID could not be reached.
    Unreachable(u64),
    /// Answers once the shard has applied the given raft index (a write forwarded to the leader
    /// is answered by this member after it applied the write too).
    WaitApplied(u64, Reply<()>),
    /// Hands the shard's leadership to the member with this raft ID (MoveLeader); answers once
    /// the transfer was started.
    TransferLeader(u64, Reply<()>),
    /// Proposes a membership change (shard 0 of a cluster) and answers once it is applied.
    ConfChange(ballast_raft::ConfChange, Reply<()>),
    /// The leader's view of its group (see [`GroupProgress`]).
    Progress(Reply<GroupProgress>),
    /// The member with this raft ID fetched the snapshot it was sent (true) or failed to.
    SnapshotStatus(u64, bool),
    /// The revision allocator's answer to this shard's request for its round with this number
    /// (None: not granted; the shard asks again). See `cluster::allocation`.
    Granted(u64, Option<crate::cluster::allocation::Granted>),
    /// Wakes the loop: shard 0's revision allocator wants a higher ceiling committed.
    Wake,
    /// Stops the shard loop after answering what is in flight.
    Shutdown,
}
