//! Which shard serves a request: the shard map applied to every key a request names.
//!
//! A Range or a watch may span shards (they are merged); a write must stay inside one shard,
//! since Ballast does not write atomically across shards. The refusal names the shards, so an
//! operator can see which keys were combined.

use ballast_proto::etcdserverpb::{request_op::Request, TxnRequest};

use crate::error::{EngineError, Result};
use crate::shard_map::{ShardMap, Shards};

/// Returns the one shard of the range `[key, range_end)` (etcd's conventions), or `CrossShard`
/// naming `what` when the range can hold keys of several shards.
///
/// # Errors
/// `CrossShard`.
pub fn one_shard(map: &ShardMap, what: &'static str, key: &[u8], range_end: &[u8]) -> Result<u32> {
    match map.shards_of(key, range_end) {
        Shards::One(s) => Ok(s),
        Shards::All => Err(cross_shard(map, what, None)),
    }
}

/// Returns the one shard every compare and op of `r` (nested txns included) falls in.
///
/// # Errors
/// `CrossShard`, naming the shards when each key range has one.
pub fn txn_shard(map: &ShardMap, r: &TxnRequest) -> Result<u32> {
    if map.shard_count() == 1 {
        return Ok(0); // every update of a one-shard member: no walk, no allocation
    }
    let mut found = Vec::new();
    if !visit_txn(map, r, &mut found) {
        return Err(cross_shard(map, "a txn", None));
    }
    found.sort_unstable();
    found.dedup();
    match found.as_slice() {
        [] => Ok(0), // a txn naming no key reads nothing shard-specific
        [s] => Ok(*s),
        many => Err(cross_shard(map, "a txn", Some(many))),
    }
}

/// Pushes the shard of each key range of `r` onto `found`; false when one can span shards.
fn visit_txn(map: &ShardMap, r: &TxnRequest, found: &mut Vec<u32>) -> bool {
    fn add(map: &ShardMap, found: &mut Vec<u32>, key: &[u8], end: &[u8]) -> bool {
        match map.shards_of(key, end) {
            Shards::One(s) => {
                found.push(s);
                true
            }
            Shards::All => false,
        }
    }
    for c in &r.compare {
        if !add(map, found, &c.key, &c.range_end) {
            return false;
        }
    }
    for op in r.success.iter().chain(&r.failure) {
        let ok = match &op.request {
            Some(Request::RequestRange(q)) => add(map, found, &q.key, &q.range_end),
            Some(Request::RequestPut(p)) => add(map, found, &p.key, &[]),
            Some(Request::RequestDeleteRange(d)) => add(map, found, &d.key, &d.range_end),
            Some(Request::RequestTxn(t)) => visit_txn(map, t, found),
            None => true,
        };
        if !ok {
            return false;
        }
    }
    true
}

fn cross_shard(map: &ShardMap, what: &'static str, shards: Option<&[u32]>) -> EngineError {
    let count = map.shard_count();
    let shards = match shards {
        Some(list) => list.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        None => format!("0-{}", count - 1),
    };
    EngineError::CrossShard { what, shards, count }
}

#[cfg(test)]
mod tests {
    use ballast_proto::etcdserverpb::{Compare, PutRequest, RangeRequest, RequestOp};

    use super::*;
    use crate::api::status::code_and_message;

    fn put(key: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: key.as_bytes().to_vec().into(),
                ..Default::default()
            })),
        }
    }

    fn compare(key: &str) -> Compare {
        Compare { key: key.as_bytes().to_vec().into(), ..Default::default() }
    }

    #[test]
    fn kube_update_txn_stays_on_its_key_shard() {
        let map = ShardMap::new(8).expect("valid");
        let key = "/registry/pods/ns1/web-0";
        let r = TxnRequest {
            compare: vec![compare(key)],
            success: vec![put(key)],
            failure: vec![RequestOp {
                request: Some(Request::RequestRange(RangeRequest {
                    key: key.as_bytes().to_vec().into(),
                    ..Default::default()
                })),
            }],
        };
        assert_eq!(txn_shard(&map, &r).expect("one shard"), map.shard_of(key.as_bytes()));
    }

    #[test]
    fn txn_over_two_shards_is_refused_naming_them() {
        let map = ShardMap::new(8).expect("valid");
        // Find two namespaces on different shards.
        let a = "/registry/pods/ns0/x";
        let b = (1..100)
            .map(|i| format!("/registry/pods/ns{i}/x"))
            .find(|k| map.shard_of(k.as_bytes()) != map.shard_of(a.as_bytes()))
            .expect("8 shards split 100 namespaces");
        let r = TxnRequest { compare: vec![compare(a)], success: vec![put(&b)], ..Default::default() };
        let err = txn_shard(&map, &r).expect_err("cross-shard");
        let (code, msg) = code_and_message(&err);
        assert_eq!(code, tonic::Code::FailedPrecondition);
        let (sa, sb) = (map.shard_of(a.as_bytes()), map.shard_of(b.as_bytes()));
        let listed = format!("{}, {}", sa.min(sb), sa.max(sb));
        assert!(msg.contains(&listed) && msg.contains("8 shards"), "{msg}");
    }

    #[test]
    fn a_prefix_across_namespaces_is_one_shard_only_with_one_shard() {
        let one = ShardMap::new(1).expect("valid");
        let eight = ShardMap::new(8).expect("valid");
        assert_eq!(one_shard(&one, "a delete range", b"/registry/pods/", b"/registry/pods0").expect("one shard"), 0);
        let err = one_shard(&eight, "a delete range", b"/registry/pods/", b"/registry/pods0").expect_err("spans");
        assert!(err.to_string().contains("shards 0-7"), "{err}");
    }
}
