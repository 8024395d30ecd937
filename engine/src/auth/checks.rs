//! What each KV request needs of its caller, as etcd's auth applier checks it: Range read on its
//! range; Put write on its key, and read on it with `prev_kv`; DeleteRange write on its range,
//! and read with `prev_kv`; Txn read on every compare's range and the needs of every op of both
//! branches, nested txns included.

// #[PerformanceCriticalPath]
use ballast_proto::authpb::permission::Type as PermType;
use ballast_proto::etcdserverpb::{
    request_op::Request as Op, DeleteRangeRequest, PutRequest, RangeRequest, TxnRequest,
};

use super::{AuthInfo, AuthState};
use crate::error::Result;

/// Checks a Range.
///
/// # Errors
/// `PermissionDenied`, `UserEmpty`, `AuthOldRevision`.
pub fn range(state: &AuthState, who: &AuthInfo, r: &RangeRequest) -> Result<()> {
    state.check_range(&who.user, who.revision, &r.key, &r.range_end, PermType::Read)
}

/// Checks a Put (not the keys of its lease; see `lease_keys`).
///
/// # Errors
/// As [`range`].
pub fn put(state: &AuthState, who: &AuthInfo, r: &PutRequest) -> Result<()> {
    state.check_range(&who.user, who.revision, &r.key, &[], PermType::Write)?;
    if r.prev_kv {
        state.check_range(&who.user, who.revision, &r.key, &[], PermType::Read)?;
    }
    Ok(())
}

/// Checks a DeleteRange.
///
/// # Errors
/// As [`range`].
pub fn delete(state: &AuthState, who: &AuthInfo, r: &DeleteRangeRequest) -> Result<()> {
    state.check_range(&who.user, who.revision, &r.key, &r.range_end, PermType::Write)?;
    if r.prev_kv {
        state.check_range(&who.user, who.revision, &r.key, &r.range_end, PermType::Read)?;
    }
    Ok(())
}

/// Checks a Txn: its compares, then the ops of both branches.
///
/// # Errors
/// As [`range`].
pub fn txn(state: &AuthState, who: &AuthInfo, r: &TxnRequest) -> Result<()> {
    for c in &r.compare {
        state.check_range(&who.user, who.revision, &c.key, &c.range_end, PermType::Read)?;
    }
    for op in r.success.iter().chain(&r.failure) {
        match &op.request {
            Some(Op::RequestRange(q)) => range(state, who, q)?,
            // In a txn etcd checks only write for a put, whatever its prev_kv.
            Some(Op::RequestPut(p)) => state.check_range(&who.user, who.revision, &p.key, &[], PermType::Write)?,
            Some(Op::RequestDeleteRange(d)) => delete(state, who, d)?,
            Some(Op::RequestTxn(t)) => txn(state, who, t)?,
            None => {}
        }
    }
    Ok(())
}

/// Checks `wanted` on every key attached to a lease (a Put onto it and LeaseRevoke need write,
/// LeaseTimeToLive read).
///
/// # Errors
/// As [`range`].
pub fn lease_keys(state: &AuthState, who: &AuthInfo, keys: &[impl AsRef<[u8]>], wanted: PermType) -> Result<()> {
    for k in keys {
        state.check_range(&who.user, who.revision, k.as_ref(), &[], wanted)?;
    }
    Ok(())
}
