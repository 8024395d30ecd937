//! Request validation done before a request is proposed, as etcd's gRPC layer does it: empty
//! keys, flag combinations, sort options, txn size and duplicate keys. A request that fails here
//! never reaches raft, so it can never leave a partial write.

use std::collections::HashSet;

use ballast_proto::etcdserverpb::{
    range_request, request_op, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use bytes::Bytes;

use crate::error::{EngineError, Result};
use crate::mvcc::KeyRange;

/// Checks a Range request.
///
/// # Errors
/// `EmptyKey`, `InvalidSortOption`.
pub fn check_range(r: &RangeRequest) -> Result<()> {
    if r.key.is_empty() {
        return Err(EngineError::EmptyKey);
    }
    if range_request::SortOrder::try_from(r.sort_order).is_err()
        || range_request::SortTarget::try_from(r.sort_target).is_err()
    {
        return Err(EngineError::InvalidSortOption);
    }
    Ok(())
}

/// Checks a Put request.
///
/// # Errors
/// `EmptyKey`, `ValueProvided`, `LeaseProvided`.
pub fn check_put(r: &PutRequest) -> Result<()> {
    if r.key.is_empty() {
        return Err(EngineError::EmptyKey);
    }
    if r.ignore_value && !r.value.is_empty() {
        return Err(EngineError::ValueProvided);
    }
    if r.ignore_lease && r.lease != 0 {
        return Err(EngineError::LeaseProvided);
    }
    Ok(())
}

/// Checks a DeleteRange request.
///
/// # Errors
/// `EmptyKey`.
pub fn check_delete(r: &DeleteRangeRequest) -> Result<()> {
    if r.key.is_empty() {
        return Err(EngineError::EmptyKey);
    }
    Ok(())
}

/// Checks a Txn request, its nested ops and its write sets.
///
/// # Errors
/// `TooManyOps`, `EmptyKey`, `DuplicateKey` and the per-op errors.
pub fn check_txn(r: &TxnRequest, max_txn_ops: usize) -> Result<()> {
    check_txn_ops(r, max_txn_ops)?;
    check_intervals(&r.success)?;
    check_intervals(&r.failure)?;
    Ok(())
}

/// A nested txn may use only what its parent leaves of the limit: `max_txn_ops` less the
/// parent's largest of compares, success ops and failure ops (as etcd counts them).
fn check_txn_ops(r: &TxnRequest, max_txn_ops: usize) -> Result<()> {
    let ops = r.compare.len().max(r.success.len()).max(r.failure.len());
    if ops > max_txn_ops {
        return Err(EngineError::TooManyOps);
    }
    if r.compare.iter().any(|c| c.key.is_empty()) {
        return Err(EngineError::EmptyKey);
    }
    for op in r.success.iter().chain(&r.failure) {
        match &op.request {
            Some(request_op::Request::RequestRange(q)) => check_range(q)?,
            Some(request_op::Request::RequestPut(q)) => check_put(q)?,
            Some(request_op::Request::RequestDeleteRange(q)) => check_delete(q)?,
            Some(request_op::Request::RequestTxn(q)) => check_txn_ops(q, max_txn_ops - ops)?,
            // An empty op is refused as etcd refuses it, with its "key not found".
            None => return Err(EngineError::KeyNotFound),
        }
    }
    Ok(())
}

/// Puts and deletes of one branch (with its nested txns) must not touch the same key; the two
/// branches of a nested txn exclude each other, so they may.
fn check_intervals(ops: &[RequestOp]) -> Result<(HashSet<Bytes>, Vec<KeyRange>)> {
    let mut dels: Vec<KeyRange> = ops
        .iter()
        .filter_map(|op| match &op.request {
            Some(request_op::Request::RequestDeleteRange(d)) => Some(KeyRange::new(d.key.clone(), d.range_end.clone())),
            _ => None,
        })
        .collect();
    let hits = |dels: &[KeyRange], k: &Bytes| dels.iter().any(|d| d.contains(k));
    let mut puts: HashSet<Bytes> = HashSet::new();
    for op in ops {
        let Some(request_op::Request::RequestTxn(t)) = &op.request else { continue };
        let (puts_then, dels_then) = check_intervals(&t.success)?;
        let (puts_else, dels_else) = check_intervals(&t.failure)?;
        for k in &puts_then {
            if puts.contains(k) || hits(&dels, k) {
                return Err(EngineError::DuplicateKey);
            }
            puts.insert(k.clone());
        }
        for k in &puts_else {
            if (puts.contains(k) && !puts_then.contains(k)) || hits(&dels, k) {
                return Err(EngineError::DuplicateKey);
            }
            puts.insert(k.clone());
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let Some(request_op::Request::RequestPut(p)) = &op.request else { continue };
        if puts.contains(&p.key) || hits(&dels, &p.key) {
            return Err(EngineError::DuplicateKey);
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
}

/// Returns true when the txn (either branch, nested included) may write.
pub fn txn_may_write(r: &TxnRequest) -> bool {
    r.success.iter().chain(&r.failure).any(|op| match &op.request {
        Some(request_op::Request::RequestPut(_) | request_op::Request::RequestDeleteRange(_)) => true,
        Some(request_op::Request::RequestTxn(t)) => txn_may_write(t),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_proto::etcdserverpb::request_op::Request;

    fn put(k: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: Bytes::copy_from_slice(k.as_bytes()),
                ..Default::default()
            })),
        }
    }
    fn del(k: &str, end: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
                key: Bytes::copy_from_slice(k.as_bytes()),
                range_end: Bytes::copy_from_slice(end.as_bytes()),
                ..Default::default()
            })),
        }
    }
    fn txn(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> TxnRequest {
        TxnRequest { compare: vec![], success, failure }
    }

    #[test]
    fn duplicate_keys() {
        assert!(matches!(check_txn(&txn(vec![put("a"), put("a")], vec![]), 128), Err(EngineError::DuplicateKey)));
        assert!(matches!(check_txn(&txn(vec![put("b"), del("a", "c")], vec![]), 128), Err(EngineError::DuplicateKey)));
        assert!(check_txn(&txn(vec![put("a")], vec![put("a")]), 128).is_ok(), "branches exclude each other");
        assert!(check_txn(&txn(vec![del("a", "c"), del("b", "")], vec![]), 128).is_ok(), "deletes may overlap");
        let nested = RequestOp { request: Some(Request::RequestTxn(txn(vec![put("a")], vec![put("a")]))) };
        assert!(check_txn(&txn(vec![nested.clone()], vec![]), 128).is_ok());
        assert!(matches!(check_txn(&txn(vec![nested, put("a")], vec![]), 128), Err(EngineError::DuplicateKey)));
    }

    #[test]
    fn sizes_and_keys() {
        let many: Vec<RequestOp> = (0..129).map(|i| put(&format!("k{i}"))).collect();
        assert!(matches!(check_txn(&txn(many, vec![]), 128), Err(EngineError::TooManyOps)));
        assert!(matches!(check_txn(&txn(vec![put("")], vec![]), 128), Err(EngineError::EmptyKey)));
        let empty_op = RequestOp { request: None };
        assert!(matches!(check_txn(&txn(vec![], vec![empty_op]), 128), Err(EngineError::KeyNotFound)));
        let bad_sort = RangeRequest { key: Bytes::from_static(b"a"), sort_order: 9, ..Default::default() };
        assert!(matches!(check_range(&bad_sort), Err(EngineError::InvalidSortOption)));
        let both = PutRequest {
            key: Bytes::from_static(b"a"),
            value: Bytes::from_static(b"v"),
            ignore_value: true,
            ..Default::default()
        };
        assert!(matches!(check_put(&both), Err(EngineError::ValueProvided)));
    }
}
