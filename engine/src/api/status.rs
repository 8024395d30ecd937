//! The one mapping of [`EngineError`] to the wire: etcd's gRPC code and exact message text for
//! every error (clientv3 and kube-apiserver match on the text). `tests::golden` pins each string.

use tonic::{Code, Status};

use crate::error::EngineError;

/// Returns the gRPC code and message etcd sends for `e`.
pub fn code_and_message(e: &EngineError) -> (Code, String) {
    use EngineError as E;
    let fixed = |code, msg: &str| (code, msg.to_string());
    match e {
        E::EmptyKey => fixed(Code::InvalidArgument, "etcdserver: key is not provided"),
        E::KeyNotFound => fixed(Code::InvalidArgument, "etcdserver: key not found"),
        E::ValueProvided => fixed(Code::InvalidArgument, "etcdserver: value is provided"),
        E::LeaseProvided => fixed(Code::InvalidArgument, "etcdserver: lease is provided"),
        E::TooManyOps => fixed(Code::InvalidArgument, "etcdserver: too many operations in txn request"),
        E::DuplicateKey => fixed(Code::InvalidArgument, "etcdserver: duplicate key given in txn request"),
        E::RequestTooLarge => fixed(Code::InvalidArgument, "etcdserver: request is too large"),
        E::InvalidSortOption => fixed(Code::InvalidArgument, "etcdserver: invalid sort option"),
        E::Compacted { .. } => fixed(Code::OutOfRange, "etcdserver: mvcc: required revision has been compacted"),
        E::FutureRev => fixed(Code::OutOfRange, "etcdserver: mvcc: required revision is a future revision"),
        E::LeaseNotFound => fixed(Code::NotFound, "etcdserver: requested lease not found"),
        E::LeaseExist => fixed(Code::FailedPrecondition, "etcdserver: lease already exists"),
        E::LeaseTtlTooLarge => fixed(Code::OutOfRange, "etcdserver: too large lease TTL"),
        E::NoSpace => fixed(Code::ResourceExhausted, "etcdserver: mvcc: database space exceeded"),
        E::TooManyRequests => fixed(Code::ResourceExhausted, "etcdserver: too many requests"),
        E::NoLeader => fixed(Code::Unavailable, "etcdserver: no leader"),
        E::NotLeader | E::Raft(ballast_raft::RaftError::NotLeader { .. }) => {
            fixed(Code::FailedPrecondition, "etcdserver: not leader")
        }
        E::Stopped => fixed(Code::Unavailable, "etcdserver: server stopped"),
        E::Timeout | E::Raft(ballast_raft::RaftError::ProposalDropped) => {
            fixed(Code::Unavailable, "etcdserver: request timed out")
        }
        E::NotCapable => fixed(Code::FailedPrecondition, "etcdserver: not capable"),
        E::MemberNotFound => fixed(Code::NotFound, "etcdserver: member not found"),
        E::CrossShard { .. } => (Code::FailedPrecondition, format!("ballast: {e}")),
        E::ShardCount(_) => (Code::FailedPrecondition, format!("ballast: {e}")),
        E::Executor { .. } => (Code::Unavailable, format!("ballast: {e}")),
        E::SnapshotCut => (Code::Unavailable, format!("ballast: {e}")),
        E::BadCluster(_) => (Code::FailedPrecondition, format!("etcdserver: {e}")),
        E::LeaderChanged => fixed(Code::Unavailable, "etcdserver: leader changed"),
        E::ConfChangePending => (Code::Unavailable, format!("ballast: {e}")),
        E::PeerUrlExists => fixed(Code::FailedPrecondition, "etcdserver: Peer URLs already exists"),
        E::NotEnoughStartedMembers => {
            fixed(Code::FailedPrecondition, "etcdserver: re-configuration failed due to not enough started members")
        }
        E::MemberNotLearner => fixed(Code::FailedPrecondition, "etcdserver: can only promote a learner member"),
        E::LearnerNotReady => fixed(
            Code::FailedPrecondition,
            "etcdserver: can only promote a learner member which is in sync with leader",
        ),
        E::TooManyLearners => fixed(Code::FailedPrecondition, "etcdserver: too many learner members in cluster"),
        E::Unhealthy => fixed(Code::Unavailable, "etcdserver: unhealthy cluster"),
        E::NotSupportedForLearner => fixed(Code::Unavailable, "etcdserver: rpc not supported for learner"),
        E::MemberBadUrls => fixed(Code::InvalidArgument, "etcdserver: given member URLs are invalid"),
        E::BadLeaderTransferee => fixed(Code::FailedPrecondition, "etcdserver: bad leader transferee"),
        E::RootUserNotExist => fixed(Code::FailedPrecondition, "etcdserver: root user does not exist"),
        E::RootRoleNotExist => fixed(Code::FailedPrecondition, "etcdserver: root user does not have root role"),
        E::UserAlreadyExist => fixed(Code::FailedPrecondition, "etcdserver: user name already exists"),
        E::UserEmpty => fixed(Code::InvalidArgument, "etcdserver: user name is empty"),
        E::UserNotFound => fixed(Code::FailedPrecondition, "etcdserver: user name not found"),
        E::RoleAlreadyExist => fixed(Code::FailedPrecondition, "etcdserver: role name already exists"),
        E::RoleNotFound => fixed(Code::FailedPrecondition, "etcdserver: role name not found"),
        E::RoleEmpty => fixed(Code::InvalidArgument, "etcdserver: role name is empty"),
        E::AuthFailed => fixed(Code::InvalidArgument, "etcdserver: authentication failed, invalid user ID or password"),
        // etcd's auth store error, which its server passes on unconverted (gRPC code Unknown).
        E::NoPasswordUser => {
            fixed(Code::Unknown, "auth: authentication failed, password was given for no password user")
        }
        E::PermissionDenied => fixed(Code::PermissionDenied, "etcdserver: permission denied"),
        E::RoleNotGranted => fixed(Code::FailedPrecondition, "etcdserver: role is not granted to the user"),
        E::PermissionNotGranted => fixed(Code::FailedPrecondition, "etcdserver: permission is not granted to the role"),
        E::AuthNotEnabled => fixed(Code::FailedPrecondition, "etcdserver: authentication is not enabled"),
        E::InvalidAuthToken => fixed(Code::Unauthenticated, "etcdserver: invalid auth token"),
        E::InvalidAuthMgmt => fixed(Code::InvalidArgument, "etcdserver: invalid auth management"),
        E::AuthOldRevision => fixed(Code::InvalidArgument, "etcdserver: revision of auth store is old"),
        E::ClusterIdMismatch { .. } => (Code::FailedPrecondition, e.to_string()),
        E::Remote(status) => (status.code(), status.message().to_string()),
        // etcd has no error for a failing disk (it panics); these end the member, and the
        // client sees a retryable code while it restarts.
        E::Storage(_) | E::Raft(_) => (Code::Unavailable, format!("etcdserver: {e}")),
    }
}

/// etcd's maintenance service (Defragment, Hash, HashKV, Snapshot) returns its auth store's
/// errors unconverted, so clients see gRPC code Unknown and the store's own text.
pub fn unconverted_auth(e: EngineError) -> Status {
    let text = match e {
        EngineError::UserEmpty => "auth: user name is empty",
        EngineError::UserNotFound => "auth: user not found",
        EngineError::PermissionDenied => "auth: permission denied",
        EngineError::InvalidAuthToken => "auth: invalid auth token",
        other => return other.into(),
    };
    Status::unknown(text)
}

impl From<EngineError> for Status {
    fn from(e: EngineError) -> Self {
        let (code, message) = code_and_message(&e);
        Status::new(code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let cases: Vec<(EngineError, Code, &str)> = vec![
            (EngineError::EmptyKey, Code::InvalidArgument, "etcdserver: key is not provided"),
            (EngineError::KeyNotFound, Code::InvalidArgument, "etcdserver: key not found"),
            (EngineError::ValueProvided, Code::InvalidArgument, "etcdserver: value is provided"),
            (EngineError::LeaseProvided, Code::InvalidArgument, "etcdserver: lease is provided"),
            (EngineError::TooManyOps, Code::InvalidArgument, "etcdserver: too many operations in txn request"),
            (EngineError::DuplicateKey, Code::InvalidArgument, "etcdserver: duplicate key given in txn request"),
            (EngineError::RequestTooLarge, Code::InvalidArgument, "etcdserver: request is too large"),
            (EngineError::InvalidSortOption, Code::InvalidArgument, "etcdserver: invalid sort option"),
            (
                EngineError::Compacted { compact_revision: 3 },
                Code::OutOfRange,
                "etcdserver: mvcc: required revision has been compacted",
            ),
            (EngineError::FutureRev, Code::OutOfRange, "etcdserver: mvcc: required revision is a future revision"),
            (EngineError::LeaseNotFound, Code::NotFound, "etcdserver: requested lease not found"),
            (EngineError::LeaseExist, Code::FailedPrecondition, "etcdserver: lease already exists"),
            (EngineError::LeaseTtlTooLarge, Code::OutOfRange, "etcdserver: too large lease TTL"),
            (EngineError::NoSpace, Code::ResourceExhausted, "etcdserver: mvcc: database space exceeded"),
            (EngineError::TooManyRequests, Code::ResourceExhausted, "etcdserver: too many requests"),
            (EngineError::NoLeader, Code::Unavailable, "etcdserver: no leader"),
            (EngineError::NotLeader, Code::FailedPrecondition, "etcdserver: not leader"),
            (EngineError::Stopped, Code::Unavailable, "etcdserver: server stopped"),
            (EngineError::Timeout, Code::Unavailable, "etcdserver: request timed out"),
            (EngineError::NotCapable, Code::FailedPrecondition, "etcdserver: not capable"),
            (EngineError::MemberNotFound, Code::NotFound, "etcdserver: member not found"),
            (EngineError::LeaderChanged, Code::Unavailable, "etcdserver: leader changed"),
            (EngineError::BadLeaderTransferee, Code::FailedPrecondition, "etcdserver: bad leader transferee"),
            (EngineError::PeerUrlExists, Code::FailedPrecondition, "etcdserver: Peer URLs already exists"),
            (
                EngineError::NotEnoughStartedMembers,
                Code::FailedPrecondition,
                "etcdserver: re-configuration failed due to not enough started members",
            ),
            (EngineError::MemberNotLearner, Code::FailedPrecondition, "etcdserver: can only promote a learner member"),
            (
                EngineError::LearnerNotReady,
                Code::FailedPrecondition,
                "etcdserver: can only promote a learner member which is in sync with leader",
            ),
            (EngineError::TooManyLearners, Code::FailedPrecondition, "etcdserver: too many learner members in cluster"),
            (EngineError::MemberBadUrls, Code::InvalidArgument, "etcdserver: given member URLs are invalid"),
            (EngineError::Unhealthy, Code::Unavailable, "etcdserver: unhealthy cluster"),
            (EngineError::NotSupportedForLearner, Code::Unavailable, "etcdserver: rpc not supported for learner"),
            (EngineError::RootUserNotExist, Code::FailedPrecondition, "etcdserver: root user does not exist"),
            (EngineError::RootRoleNotExist, Code::FailedPrecondition, "etcdserver: root user does not have root role"),
            (EngineError::UserAlreadyExist, Code::FailedPrecondition, "etcdserver: user name already exists"),
            (EngineError::UserEmpty, Code::InvalidArgument, "etcdserver: user name is empty"),
            (EngineError::UserNotFound, Code::FailedPrecondition, "etcdserver: user name not found"),
            (EngineError::RoleAlreadyExist, Code::FailedPrecondition, "etcdserver: role name already exists"),
            (EngineError::RoleNotFound, Code::FailedPrecondition, "etcdserver: role name not found"),
            (EngineError::RoleEmpty, Code::InvalidArgument, "etcdserver: role name is empty"),
            (
                EngineError::AuthFailed,
                Code::InvalidArgument,
                "etcdserver: authentication failed, invalid user ID or password",
            ),
            (EngineError::PermissionDenied, Code::PermissionDenied, "etcdserver: permission denied"),
            (EngineError::RoleNotGranted, Code::FailedPrecondition, "etcdserver: role is not granted to the user"),
            (
                EngineError::PermissionNotGranted,
                Code::FailedPrecondition,
                "etcdserver: permission is not granted to the role",
            ),
            (EngineError::AuthNotEnabled, Code::FailedPrecondition, "etcdserver: authentication is not enabled"),
            (EngineError::InvalidAuthToken, Code::Unauthenticated, "etcdserver: invalid auth token"),
            (EngineError::InvalidAuthMgmt, Code::InvalidArgument, "etcdserver: invalid auth management"),
            (EngineError::AuthOldRevision, Code::InvalidArgument, "etcdserver: revision of auth store is old"),
            (
                EngineError::SnapshotCut,
                Code::Unavailable,
                "ballast: snapshot: the shards could not all be stopped at one revision; try again",
            ),
        ];
        for (err, code, msg) in cases {
            let status = Status::from(err);
            assert_eq!((status.code(), status.message()), (code, msg));
        }
    }
}
