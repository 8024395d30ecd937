//! Keys of the shard's `Cf::Meta` that the raft log shares with the snapshot code, here so the
//! snapshot code can read them without depending on the log (which depends on it).

/// Meta key (`Cf::Meta`, written by the shard's state machine with each applied round) of the
/// last applied raft index (u64 BE): a snapshot for a follower is taken at it.
pub const META_APPLIED_INDEX: &[u8] = b"applied_index";
