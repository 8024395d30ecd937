//! [`EngineError`]: every way an engine request can fail, in etcd's own vocabulary.
//!
//! The variants name etcd's errors one to one so that `api::status` (the single mapping to the
//! wire) can give clients etcd's exact gRPC code and message text, which clientv3 and
//! kube-apiserver match on.

use crate::storage::StorageError;

/// An engine request failure.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A key-bearing request had an empty key.
    #[error("key is not provided")]
    EmptyKey,
    /// `ignore_value`/`ignore_lease` on a key that does not exist.
    #[error("key not found")]
    KeyNotFound,
    /// A value was given together with `ignore_value`.
    #[error("value is provided")]
    ValueProvided,
    /// A lease was given together with `ignore_lease`.
    #[error("lease is provided")]
    LeaseProvided,
    /// A txn had more compares or ops per branch than `max_txn_ops`.
    #[error("too many operations in txn request")]
    TooManyOps,
    /// A txn wrote one key twice (or wrote a key inside a range it deletes).
    #[error("duplicate key given in txn request")]
    DuplicateKey,
    /// The encoded request exceeds `max_request_bytes`.
    #[error("request is too large")]
    RequestTooLarge,
    /// A sort order or target outside the enum.
    #[error("invalid sort option")]
    InvalidSortOption,
    /// The requested revision was compacted away.
    #[error("mvcc: required revision has been compacted")]
    Compacted {
        /// The store's compacted revision.
        compact_revision: i64,
    },
    /// The requested revision is above the current one.
    #[error("mvcc: required revision is a future revision")]
    FutureRev,
    /// The lease ID is unknown.
    #[error("requested lease not found")]
    LeaseNotFound,
    /// A lease with the requested ID already exists.
    #[error("lease already exists")]
    LeaseExist,
    /// The requested TTL is above etcd's maximum (9,000,000,000 s).
    #[error("too large lease TTL")]
    LeaseTtlTooLarge,
    /// The backend quota is exhausted and the NOSPACE alarm is raised.
    #[error("mvcc: database space exceeded")]
    NoSpace,
    /// The shard's raft group has no leader.
    #[error("no leader")]
    NoLeader,
    /// The member is not the leader of the shard's raft group.
    #[error("not leader")]
    NotLeader,
    /// The engine is shutting down.
    #[error("server stopped")]
    Stopped,
    /// The request did not complete within its deadline.
    #[error("request timed out")]
    Timeout,
    /// The request needs something this member does not support.
    #[error("not capable")]
    NotCapable,
    /// The member ID is unknown.
    #[error("member not found")]
    MemberNotFound,
    /// A write (Txn, DeleteRange) needs keys of several shards: Ballast does not write
    /// atomically across shards. etcd has no such error; Kubernetes never sends such a write
    /// (see `engine/SHARDING.md`).
    #[error("{what} spans shards {shards}; this member runs {count} shards and serves {what} within one shard only")]
    CrossShard {
        /// What was asked ("a txn", "a delete range").
        what: &'static str,
        /// The shards involved, as a list ("0, 3") or a span ("0-7").
        shards: String,
        /// The member's shard count.
        count: u32,
    },
    /// The engine was started with a shard count it cannot use (outside 1..=256, or not the
    /// count the data directory was created with).
    #[error("{0}")]
    ShardCount(String),
    /// A shard's thread could not be started or pinned to its CPU.
    #[error("cannot start the thread of shard {shard}: {reason}")]
    Executor {
        /// The shard.
        shard: usize,
        /// What failed.
        reason: String,
    },
    /// The storage backend failed.
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    /// Replication failed.
    #[error("raft: {0}")]
    Raft(#[from] ballast_raft::RaftError),
    /// The shard's mailbox is full.
    #[error("too many requests")]
    TooManyRequests,
    /// `--initial-cluster` and its companions do not describe a cluster this member can join
    /// (etcd's bootstrap check messages).
    #[error("{0}")]
    BadCluster(String),
    /// A membership change is still being applied; raft takes one at a time.
    #[error("another membership change is in progress; try again")]
    ConfChangePending,
    /// MemberAdd or MemberUpdate named peer URLs another member has.
    #[error("Peer URLs already exists")]
    PeerUrlExists,
    /// The change would leave fewer started voting members than a quorum.
    #[error("re-configuration failed due to not enough started members")]
    NotEnoughStartedMembers,
    /// MemberPromote of a voting member.
    #[error("can only promote a learner member")]
    MemberNotLearner,
    /// MemberPromote of a learner that is behind the leader.
    #[error("can only promote a learner member which is in sync with leader")]
    LearnerNotReady,
    /// MemberAdd of a learner beyond the cluster's limit.
    #[error("too many learner members in cluster")]
    TooManyLearners,
    /// The call needs a voting member and this one is a learner.
    #[error("rpc not supported for learner")]
    NotSupportedForLearner,
    /// A membership change while a voting member is not connected to the leader.
    #[error("unhealthy cluster")]
    Unhealthy,
    /// MemberAdd without usable peer URLs.
    #[error("given member URLs are invalid")]
    MemberBadUrls,
    /// MoveLeader named a member that does not exist or cannot lead (a learner).
    #[error("bad leader transferee")]
    BadLeaderTransferee,
    /// The shard's leader changed while the write waited: it may or may not have been applied.
    #[error("leader changed")]
    LeaderChanged,
    /// A peer belongs to another cluster.
    #[error("cluster ID mismatch: this member is in cluster {local:x}, the peer in {remote:x}")]
    ClusterIdMismatch {
        /// This member's cluster ID.
        local: u64,
        /// The peer's cluster ID.
        remote: u64,
    },
    /// The shard's leader, reached over the peer port, answered with this status; it goes to
    /// the client unchanged (it is already etcd's code and text).
    #[error("{}", .0.message())]
    Remote(tonic::Status),
    /// AuthEnable without a root user.
    #[error("root user does not exist")]
    RootUserNotExist,
    /// AuthEnable while the root user lacks the root role.
    #[error("root user does not have root role")]
    RootRoleNotExist,
    /// UserAdd of an existing user.
    #[error("user name already exists")]
    UserAlreadyExist,
    /// A user name was empty, or a request needing credentials had none.
    #[error("user name is empty")]
    UserEmpty,
    /// The named user does not exist.
    #[error("user name not found")]
    UserNotFound,
    /// RoleAdd of an existing role.
    #[error("role name already exists")]
    RoleAlreadyExist,
    /// The named role does not exist.
    #[error("role name not found")]
    RoleNotFound,
    /// RoleAdd with an empty name.
    #[error("role name is empty")]
    RoleEmpty,
    /// Authenticate with an unknown user, a wrong password, or a user without password.
    #[error("authentication failed, invalid user ID or password")]
    AuthFailed,
    /// Authenticate with a password for a user created without one (`--no-password`).
    #[error("authentication failed, password was given for no password user")]
    NoPasswordUser,
    /// The user's roles do not grant the request.
    #[error("permission denied")]
    PermissionDenied,
    /// UserRevokeRole of a role the user does not have.
    #[error("role is not granted to the user")]
    RoleNotGranted,
    /// RoleRevokePermission of a permission the role does not have.
    #[error("permission is not granted to the role")]
    PermissionNotGranted,
    /// Authenticate while auth is disabled.
    #[error("authentication is not enabled")]
    AuthNotEnabled,
    /// The token is unknown, expired or malformed.
    #[error("invalid auth token")]
    InvalidAuthToken,
    /// A change that would lock out root (delete root, revoke its root role, delete the root role) while auth is on.
    #[error("invalid auth management")]
    InvalidAuthMgmt,
    /// Credentials checked at an auth revision older than the store's.
    #[error("revision of auth store is old")]
    AuthOldRevision,
    /// A snapshot of several shards could not stop them all at one revision in time (a shard
    /// was busy or could not take the request); nothing was copied, and a retry may succeed.
    #[error("snapshot: the shards could not all be stopped at one revision; try again")]
    SnapshotCut,
}

/// Shorthand for results of engine operations.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
