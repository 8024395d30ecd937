//! Replication for Ballast shards, on tikv's raft-rs.
//!
//! This crate knows nothing of MVCC, RocksDB or Kubernetes. It gives the engine three seams and
//! one loop:
//!
//! * [`LogStore`]: durable raft log (the engine implements it on RocksDB; [`MemLogStore`] is
//!   the in-memory one for tests);
//! * [`StateMachine`]: what committed entries do, applied one round at a time;
//! * [`Transport`]: how messages reach other members ([`NoopTransport`] for a single voter,
//!   [`LocalTransport`] with filters for in-process clusters in tests);
//! * [`RaftNode`]: the only place the Ready contract is honoured ([`RaftNode::handle_ready`]).
//!
//! # The Ready contract (raft-rs `RawNode`)
//! 1. Messages in `Ready::messages` may be sent before persisting (the leader's appends).
//! 2. A snapshot in the Ready is applied to the store and the state machine first.
//! 3. New entries and the hard state are persisted (synced when `must_sync`) before
//!    `persisted_messages` are sent: a vote or an append acknowledgement must never get ahead of
//!    the disk.
//! 4. `advance` returns a `LightReady`: its commit index is recorded, its messages are sent.
//! 5. Committed entries from the Ready and the LightReady are applied in index order in one
//!    [`StateMachine::apply`] call, then `advance_apply`. Committed entries are always durable
//!    already, so when the Ready also holds newer entries that commit nothing more, the round
//!    is applied before they are persisted ([`StateMachine::apply_before_append`]), letting
//!    the machine's write go out with the append.
//! 6. Nothing calls `step`, `propose` or `tick` between `ready` and `advance`: the node's
//!    methods take `&mut self`, and `handle_ready` does the whole round.
//!
//! Reading order: [`error`], [`config`], [`log_store`], [`state_machine`], [`transport`],
//! [`node`].

pub mod config;
pub mod error;
pub mod log_store;
pub mod mem_log_store;
pub mod node;
pub mod state_machine;
pub mod transport;

pub use config::RaftConfig;
pub use error::RaftError;
pub use log_store::LogStore;
pub use mem_log_store::MemLogStore;
pub use node::{RaftNode, ReadyOutcome};
pub use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, HardState, Message,
    MessageType, Snapshot, SnapshotMetadata,
};
pub use raft::{GetEntriesContext, RaftState, StateRole, Storage};
pub use state_machine::StateMachine;
pub use transport::{LocalNetwork, LocalTransport, NoopTransport, Transport};
