//! etcd's KV request semantics on an [`MvccStore`]: Range options, Put flags, DeleteRange and Txn
//! (compares, nested txns, reads that see the txn's own writes), each write request creating at
//! most one revision.
//!
//! Every write checks everything that could fail before it changes anything (etcd's
//! `checkRequests`), so a failed request leaves no partial write.

// #[PerformanceCriticalPath]
use ballast_proto::etcdserverpb::{
    compare::{CompareResult, CompareTarget, TargetUnion},
    range_request::{SortOrder, SortTarget},
    request_op::Request,
    response_op::Response,
    Compare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest, RangeResponse,
    ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use ballast_proto::mvccpb::KeyValue;
use bytes::Bytes;

use crate::error::{EngineError, Result};
use crate::mvcc::{KeyRange, MvccStore, WriteTxn};
use crate::storage::KvBackend;

/// What the KV applier needs from the lease table.
pub trait LeaseView {
    /// Returns true when lease `id` exists.
    fn exists(&self, id: i64) -> bool;
    /// Records that `key` is now attached to lease `id`.
    fn attach(&mut self, id: i64, key: &Bytes);
    /// Records that `key` is no longer attached to lease `id`.
    fn detach(&mut self, id: i64, key: &[u8]);
}

fn header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader { revision, ..Default::default() })
}

/// Serves a Range outside any write: at the current revision, or at `r.revision`.
///
/// # Errors
/// `FutureRev`, `Compacted`, or a storage error.
pub fn range<B: KvBackend>(store: &MvccStore<B>, r: &RangeRequest) -> Result<RangeResponse> {
    let at = store.check_read_rev(r.revision)?;
    range_at(store, r, at, store.current_rev())
}

/// Serves `r` as of revision `at`; `header_rev` is what the response header reports.
fn range_at<B: KvBackend>(store: &MvccStore<B>, r: &RangeRequest, at: i64, header_rev: i64) -> Result<RangeResponse> {
    let kr = KeyRange::new(r.key.clone(), r.range_end.clone());
    if r.count_only {
        return Ok(RangeResponse {
            header: header(header_rev),
            kvs: vec![],
            more: false,
            count: store.index().count(&kr, at) as i64,
        });
    }
    let sort_order = SortOrder::try_from(r.sort_order).unwrap_or(SortOrder::None);
    let sort_target = SortTarget::try_from(r.sort_target).unwrap_or(SortTarget::Key);
    let filtered =
        r.min_mod_revision != 0 || r.max_mod_revision != 0 || r.min_create_revision != 0 || r.max_create_revision != 0;
    let sorted = sort_order != SortOrder::None || sort_target != SortTarget::Key;
    // Without sorting or filtering, the index order is the answer: read one extra to learn `more`.
    let fetch = if sorted || filtered || r.limit <= 0 { 0 } else { r.limit as usize + 1 };
    let (mut kvs, total) = store.range(&kr, at, fetch)?;
    if filtered {
        kvs.retain(|kv| {
            (r.max_mod_revision == 0 || kv.mod_revision <= r.max_mod_revision)
                && (r.min_mod_revision == 0 || kv.mod_revision >= r.min_mod_revision)
                && (r.max_create_revision == 0 || kv.create_revision <= r.max_create_revision)
                && (r.min_create_revision == 0 || kv.create_revision >= r.min_create_revision)
        });
    }
    if sorted {
        // etcd sorts ascending when a non-key target is named without an order.
        let order = if sort_order == SortOrder::None { SortOrder::Ascend } else { sort_order };
        sort_kvs(&mut kvs, sort_target, order);
    }
    let mut more = false;
    if r.limit > 0 && kvs.len() > r.limit as usize {
        kvs.truncate(r.limit as usize);
        more = true;
    }
    if r.keys_only {
        for kv in &mut kvs {
            kv.value = Bytes::new();
        }
    }
    Ok(RangeResponse { header: header(header_rev), kvs, more, count: total as i64 })
}

fn sort_kvs(kvs: &mut [KeyValue], target: SortTarget, order: SortOrder) {
    match target {
        SortTarget::Key => kvs.sort_by(|a, b| a.key.cmp(&b.key)),
        SortTarget::Version => kvs.sort_by_key(|kv| kv.version),
        SortTarget::Create => kvs.sort_by_key(|kv| kv.create_revision),
        SortTarget::Mod => kvs.sort_by_key(|kv| kv.mod_revision),
        SortTarget::Value => kvs.sort_by(|a, b| a.value.cmp(&b.value)),
    }
    if order == SortOrder::Descend {
        kvs.reverse();
    }
}

/// Applies a Put as its own write transaction.
///
/// # Errors
/// `LeaseNotFound`, `KeyNotFound` (ignore flags on a missing key), or a storage error.
pub fn apply_put<B: KvBackend>(
    store: &mut MvccStore<B>,
    leases: &mut dyn LeaseView,
    r: &PutRequest,
) -> Result<PutResponse> {
    check_put_state(store, &*leases, r, store.current_rev())?;
    let mut txn = store.begin();
    let resp = put_in(store, leases, &mut txn, r)?;
    store.end(txn);
    Ok(resp)
}

/// Applies a DeleteRange as its own write transaction.
///
/// # Errors
/// A storage error.
pub fn apply_delete<B: KvBackend>(
    store: &mut MvccStore<B>,
    leases: &mut dyn LeaseView,
    r: &DeleteRangeRequest,
) -> Result<DeleteRangeResponse> {
    let mut txn = store.begin();
    let resp = delete_in(store, leases, &mut txn, r)?;
    store.end(txn);
    Ok(resp)
}

/// Applies a Txn: compares against the state before the txn, then one branch's ops in order.
///
/// # Errors
/// `LeaseNotFound`, `KeyNotFound`, `FutureRev`, `Compacted` (found before anything is written),
/// or a storage error.
pub fn apply_txn<B: KvBackend>(
    store: &mut MvccStore<B>,
    leases: &mut dyn LeaseView,
    r: &TxnRequest,
) -> Result<TxnResponse> {
    let before = store.current_rev();
    // Every nested txn's branch is decided up front against the pre-txn state, as etcd does.
    let mut path = Vec::new();
    compare_path(store, r, before, &mut path)?;
    let mut cursor = 0;
    check_branch(store, &*leases, r, &path, &mut cursor, before)?;
    let mut txn = store.begin();
    let mut cursor = 0;
    let mut resp = txn_in(store, leases, &mut txn, r, &path, &mut cursor)?;
    let rev = store.end(txn);
    resp.header = header(rev);
    Ok(resp)
}

/// Appends the outcome of `r`'s compares, then of every nested txn in the taken branch, in
/// execution order.
fn compare_path<B: KvBackend>(store: &MvccStore<B>, r: &TxnRequest, at: i64, path: &mut Vec<bool>) -> Result<()> {
    let mut ok = true;
    for c in &r.compare {
        if !compare_holds(store, c, at)? {
            ok = false;
            break;
        }
    }
    path.push(ok);
    for op in if ok { &r.success } else { &r.failure } {
        if let Some(Request::RequestTxn(t)) = &op.request {
            compare_path(store, t, at, path)?;
        }
    }
    Ok(())
}

fn compare_holds<B: KvBackend>(store: &MvccStore<B>, c: &Compare, at: i64) -> Result<bool> {
    let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
    let kr = KeyRange::new(c.key.clone(), c.range_end.clone());
    let needs_value = matches!(target, CompareTarget::Value | CompareTarget::Lease);
    let mut kvs: Vec<KeyValue> = Vec::new();
    if needs_value {
        kvs = store.range(&kr, at, 0)?.0;
    } else {
        // Revisions and versions live in the index: no value read for kube's MOD compares.
        store.index().visit(&kr, at, |key, f| {
            kvs.push(KeyValue {
                key: key.clone(),
                create_revision: f.created.main,
                mod_revision: f.modified.main,
                version: f.version,
                ..Default::default()
            });
            true
        });
    }
    if kvs.is_empty() {
        // A missing key compares as all zeroes, except that a value compare always fails.
        return Ok(target != CompareTarget::Value && compare_kv(c, target, &KeyValue::default()));
    }
    Ok(kvs.iter().all(|kv| compare_kv(c, target, kv)))
}

fn compare_kv(c: &Compare, target: CompareTarget, kv: &KeyValue) -> bool {
    use std::cmp::Ordering;
    let ord: Ordering = match (target, &c.target_union) {
        (CompareTarget::Value, Some(TargetUnion::Value(v))) => kv.value.as_ref().cmp(v.as_ref()),
        (CompareTarget::Value, _) => kv.value.as_ref().cmp(&[][..]),
        (CompareTarget::Create, u) => kv.create_revision.cmp(&match u {
            Some(TargetUnion::CreateRevision(v)) => *v,
            _ => 0,
        }),
        (CompareTarget::Mod, u) => kv.mod_revision.cmp(&match u {
            Some(TargetUnion::ModRevision(v)) => *v,
            _ => 0,
        }),
        (CompareTarget::Version, u) => kv.version.cmp(&match u {
            Some(TargetUnion::Version(v)) => *v,
            _ => 0,
        }),
        (CompareTarget::Lease, u) => kv.lease.cmp(&match u {
            Some(TargetUnion::Lease(v)) => *v,
            _ => 0,
        }),
    };
    match CompareResult::try_from(c.result).unwrap_or(CompareResult::Equal) {
        CompareResult::Equal => ord.is_eq(),
        CompareResult::NotEqual => ord.is_ne(),
        CompareResult::Greater => ord.is_gt(),
        CompareResult::Less => ord.is_lt(),
    }
}

/// Checks, against the pre-txn state, every op of the branches `path` takes: leases exist, keys
/// needed by ignore flags exist, range revisions are readable.
fn check_branch<B: KvBackend>(
    store: &MvccStore<B>,
    leases: &dyn LeaseView,
    r: &TxnRequest,
    path: &[bool],
    cursor: &mut usize,
    at: i64,
) -> Result<()> {
    let ok = path[*cursor];
    *cursor += 1;
    for op in if ok { &r.success } else { &r.failure } {
        match &op.request {
            Some(Request::RequestPut(p)) => check_put_state(store, leases, p, at)?,
            Some(Request::RequestRange(q)) if q.revision > 0 => {
                store.check_read_rev(q.revision)?;
            }
            Some(Request::RequestTxn(t)) => check_branch(store, leases, t, path, cursor, at)?,
            _ => {}
        }
    }
    Ok(())
}

fn check_put_state<B: KvBackend>(store: &MvccStore<B>, leases: &dyn LeaseView, p: &PutRequest, at: i64) -> Result<()> {
    if (p.ignore_value || p.ignore_lease) && store.index().get(&p.key, at).is_none() {
        return Err(EngineError::KeyNotFound);
    }
    if p.lease != 0 && !leases.exists(p.lease) {
        return Err(EngineError::LeaseNotFound);
    }
    Ok(())
}

fn txn_in<B: KvBackend>(
    store: &mut MvccStore<B>,
    leases: &mut dyn LeaseView,
    txn: &mut WriteTxn,
    r: &TxnRequest,
    path: &[bool],
    cursor: &mut usize,
) -> Result<TxnResponse> {
    let ok = path[*cursor];
    *cursor += 1;
    let mut responses = Vec::new();
    for op in if ok { &r.success } else { &r.failure } {
        let response = match &op.request {
            Some(Request::RequestRange(q)) => {
                let at = if q.revision > 0 { q.revision } else { store.read_rev(txn) };
                Response::ResponseRange(range_at(store, q, at, store.read_rev(txn))?)
            }
            Some(Request::RequestPut(p)) => Response::ResponsePut(put_in(store, leases, txn, p)?),
            Some(Request::RequestDeleteRange(d)) => Response::ResponseDeleteRange(delete_in(store, leases, txn, d)?),
            Some(Request::RequestTxn(t)) => {
                let mut sub = txn_in(store, leases, txn, t, path, cursor)?;
                sub.header = header(store.read_rev(txn));
                Response::ResponseTxn(sub)
            }
            None => continue,
        };
        responses.push(ResponseOp { response: Some(response) });
    }
    Ok(TxnResponse { header: None, succeeded: ok, responses })
}

fn put_in<B: KvBackend>(
    store: &mut MvccStore<B>,
    leases: &mut dyn LeaseView,
    txn: &mut WriteTxn,
    p: &PutRequest,
) -> Result<PutResponse> {
    let prev = store.put_with(txn, p.key.clone(), |current| match (current, p.ignore_value, p.ignore_lease) {
        (None, true, _) | (None, _, true) => Err(EngineError::KeyNotFound),
        (Some(c), iv, il) => {
            Ok((if iv { c.value.clone() } else { p.value.clone() }, if il { c.lease } else { p.lease }))
        }
        (None, false, false) => Ok((p.value.clone(), p.lease)),
    })?;
    let lease = prev.as_ref().filter(|_| p.ignore_lease).map_or(p.lease, |c| c.lease);
    if let Some(old) = prev.as_ref().map(|kv| kv.lease).filter(|&l| l != 0 && l != lease) {
        leases.detach(old, &p.key);
    }
    if lease != 0 {
        leases.attach(lease, &p.key);
    }
    Ok(PutResponse { header: header(store.write_rev(txn)), prev_kv: if p.prev_kv { prev } else { None } })
}

fn delete_in<B: KvBackend>(
    store: &mut MvccStore<B>,
    leases: &mut dyn LeaseView,
    txn: &mut WriteTxn,
    d: &DeleteRangeRequest,
) -> Result<DeleteRangeResponse> {
    let kr = KeyRange::new(d.key.clone(), d.range_end.clone());
    let prevs = store.delete_range(txn, &kr)?;
    for kv in prevs.iter().filter(|kv| kv.lease != 0) {
        leases.detach(kv.lease, &kv.key);
    }
    let rev = if txn.changed() { store.write_rev(txn) } else { store.current_rev() };
    Ok(DeleteRangeResponse {
        header: header(rev),
        deleted: prevs.len() as i64,
        prev_kvs: if d.prev_kv { prevs } else { vec![] },
    })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // these tests measure real threads and deadlines
mod tests;
