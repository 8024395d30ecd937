//! [`RaftConfig`]: the raft parameters a shard's group runs with.

/// Raft parameters. Ticks are counted in the engine's tick interval (100 ms by default).
#[derive(Clone, Debug)]
pub struct RaftConfig {
    /// This member's raft ID (non-zero).
    pub id: u64,
    /// Ticks without a leader before an election: 10 ticks of 100 ms is etcd's 1 s default.
    pub election_tick: usize,
    /// Ticks between leader heartbeats: 1 tick of 100 ms is etcd's default heartbeat.
    pub heartbeat_tick: usize,
    /// Largest append message in bytes. 1 MiB matches etcd's `maxSizePerMsg` and keeps one
    /// message well under the gRPC frame limits.
    pub max_size_per_msg: u64,
    /// Append messages in flight per follower. 256 is etcd's `maxInflightMsgs`.
    pub max_inflight_msgs: usize,
    /// Pre-vote keeps a partitioned member from bumping the term when it returns (etcd enables
    /// it by default since 3.5).
    pub pre_vote: bool,
    /// A leader that cannot hear a quorum steps down, so stale leaders stop serving.
    pub check_quorum: bool,
    /// A leader whose commit index moves does not send an append of its own to say so: the
    /// index rides on the next append with entries (every append carries it). Under load that
    /// halves the messages per round (an append and its acknowledgement per follower), and each
    /// follower runs one Ready round per leader round instead of two. The caller then owes the
    /// followers the index whenever no next append follows soon: see
    /// [`RaftNode::tell_commit`](crate::RaftNode::tell_commit). Off by default (raft's own
    /// behaviour: every commit is broadcast at once).
    pub commit_with_next_append: bool,
}

impl Default for RaftConfig {
    fn default() -> Self {
        Self {
            id: 1,
            election_tick: 10,
            heartbeat_tick: 1,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            pre_vote: true,
            check_quorum: true,
            commit_with_next_append: false,
        }
    }
}
