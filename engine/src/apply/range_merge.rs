//! One Range answered by several shards: what to ask each shard ([`shard_request`]) and how to
//! merge their answers ([`merge_ranges`]) into what one store holding every key would answer.
//!
//! Each shard answers with [`super::kv::range`] over its own keys at the same revision `R`, so
//! the union of their key sets is one snapshot (SHARDING.md, "cross-shard Range"). The merge
//! relies on what that single-store code does:
//!
//! * kvs come in one total order: key order without sorting; with a sort, the sort target then
//!   the key (the store's sort is stable over key order) for ascending, and exactly the reverse
//!   of that for descending (it reverses the ascending result, ties included). A shard's top
//!   `limit` under that order holds every one of its keys in the merged top `limit`, so shards
//!   are asked for the same `limit` and the merge re-sorts and cuts.
//! * `more` is "the filtered matches exceed `limit`": true if any shard's did (that shard alone
//!   has more than `limit`), else decided by the merged length.
//! * `count` is every live key of the range at `R`, ignoring the revision filters and `limit`:
//!   shards hold disjoint keys, so it is the sum.
//! * `count_only` answers carry only `count`.
//!
//! Worked example, `limit = 2`, sort by mod revision descending, two shards:
//!
//! ```text
//! shard 0: [c@9, a@5]  more=true   count=3     (its third key, b@2, was cut)
//! shard 1: [d@7]       more=false  count=1
//! merged:  [c@9, d@7]  more=true   count=4     (a@5 cut by the limit)
//! ```
//!
//! Pure: no I/O, no store access. The caller routes, chooses `R`, and fails the whole request
//! when any shard fails; a partial merge is never a valid answer.

// #[PerformanceCriticalPath]
use std::cmp::Ordering;

use ballast_proto::etcdserverpb::{
    range_request::{SortOrder, SortTarget},
    RangeRequest, RangeResponse,
};
use ballast_proto::mvccpb::KeyValue;
use bytes::Bytes;

/// Returns the request to send every shard involved in `req`, read at revision `at`.
///
/// It differs from `req` in two ways: `revision` is `at` (every shard must answer at the same
/// revision), and a `keys_only` request sorted by value asks for values, since the merge cannot
/// order kvs whose values were dropped; [`merge_ranges`] drops them afterwards.
pub fn shard_request(req: &RangeRequest, at: i64) -> RangeRequest {
    let mut shard = req.clone();
    shard.revision = at;
    if req.keys_only && Order::of(req).target() == Some(SortTarget::Value) {
        shard.keys_only = false;
    }
    shard
}

/// Merges the answers of every shard involved in `req`, each shard having answered
/// [`shard_request`]`(req, R)` for the same `R` over its own keys (key sets are disjoint), into
/// what one store holding all those keys answers for `req` at `R`: same kvs in the same order,
/// same `more`, same `count`.
///
/// The header is the first part's, unchanged: the caller sets the revision it reports. With no
/// parts the answer is empty and has no header.
pub fn merge_ranges(req: &RangeRequest, parts: Vec<RangeResponse>) -> RangeResponse {
    let mut parts = parts.into_iter();
    let Some(mut merged) = parts.next() else {
        return RangeResponse::default();
    };
    for part in parts {
        merged.count += part.count;
        merged.more |= part.more;
        merged.kvs.extend(part.kvs);
    }
    if req.count_only {
        merged.kvs.clear();
        merged.more = false;
        return merged;
    }
    // Each part is already in `order`: the stable sort finds those runs and merges them, so this
    // costs about n log(parts), not n log n.
    let order = Order::of(req);
    merged.kvs.sort_by(|a, b| order.compare(a, b));
    if req.limit > 0 && merged.kvs.len() > req.limit as usize {
        merged.kvs.truncate(req.limit as usize);
        merged.more = true;
    }
    if req.keys_only {
        for kv in &mut merged.kvs {
            kv.value = Bytes::new();
        }
    }
    merged
}

/// The order single-store kvs come in, decoded from a request as `kv::range` decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// No sort: index (key) order.
    Keys,
    /// By the target, ties by key.
    Ascend(SortTarget),
    /// The exact reverse of [`Order::Ascend`], ties included.
    Descend(SortTarget),
}

impl Order {
    fn of(req: &RangeRequest) -> Self {
        // Unknown enum values fall back as the single-store code falls back.
        let order = SortOrder::try_from(req.sort_order).unwrap_or(SortOrder::None);
        let target = SortTarget::try_from(req.sort_target).unwrap_or(SortTarget::Key);
        match (order, target) {
            (SortOrder::None, SortTarget::Key) => Self::Keys,
            // etcd sorts ascending when a non-key target is named without an order.
            (SortOrder::None | SortOrder::Ascend, t) => Self::Ascend(t),
            (SortOrder::Descend, t) => Self::Descend(t),
        }
    }

    fn target(self) -> Option<SortTarget> {
        match self {
            Self::Keys => None,
            Self::Ascend(t) | Self::Descend(t) => Some(t),
        }
    }

    fn compare(self, a: &KeyValue, b: &KeyValue) -> Ordering {
        let ascending = |t: SortTarget| {
            let by_target = match t {
                SortTarget::Key => Ordering::Equal,
                SortTarget::Version => a.version.cmp(&b.version),
                SortTarget::Create => a.create_revision.cmp(&b.create_revision),
                SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
                SortTarget::Value => a.value.cmp(&b.value),
            };
            by_target.then_with(|| a.key.cmp(&b.key))
        };
        match self {
            Self::Keys => a.key.cmp(&b.key),
            Self::Ascend(t) => ascending(t),
            Self::Descend(t) => ascending(t).reverse(),
        }
    }
}

#[cfg(test)]
mod tests;
