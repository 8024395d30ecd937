//! [`RaftError`]: how replication fails.

/// A replication failure.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    /// A proposal was made on a member that is not the leader.
    #[error("not leader (leader is {leader_id})")]
    NotLeader {
        /// The leader this member knows of; 0 when none.
        leader_id: u64,
    },
    /// raft-rs dropped the proposal (for example during a leadership transfer).
    #[error("proposal dropped")]
    ProposalDropped,
    /// The log store or state machine failed; the member cannot continue safely.
    #[error("log store: {0}")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// raft-rs reported an error.
    #[error(transparent)]
    Raft(#[from] raft::Error),
}
