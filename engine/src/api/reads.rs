//! Where a Range or a read-only Txn is answered, and at which revision.
//!
//! On a member alone, on a cluster of one shard, and on the member that leads every shard of a
//! cluster of several (the evaluator, `shard::colocate`), reads are answered here: a key's shard
//! answers a single-shard read (a ReadIndex first when it has followers), and a Range over keys
//! of several shards reads every shard at one revision `R` and merges (`engine/SHARDING.md`
//! says why `R`, the counter's value when the request starts, needs no wait).
//!
//! A member of a cluster of several shards that does not evaluate applies each shard's log on
//! its own schedule, so its revision counter can stand above a revision another of its shards
//! has not applied yet. There:
//! * a **linearizable** read is sent to the evaluator (over the peer port, as a write is), which
//!   orders every write and so knows a revision that holds every acknowledged one;
//! * a **serializable** read is answered locally at the member's resolved revision
//!   (`cluster::resolved`), up to which every shard here holds every write: a consistent, if
//!   slightly older, view, as etcd's serializable reads on a follower are.

// #[PerformanceCriticalPath]
use ballast_proto::ballastpb::{forward_request, forward_response};
use ballast_proto::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader, TxnRequest, TxnResponse};

use super::{unexpected, ApiContext};
use crate::apply::range_merge;
use crate::error::{EngineError, Result};
use crate::shard::ShardMsg;
use crate::shard_map::Shards;

impl ApiContext {
    /// Answers a Range as this member should (see the module doc).
    ///
    /// # Errors
    /// The shard's answer, or a shard or transport error.
    pub async fn range(&self, r: RangeRequest) -> Result<RangeResponse> {
        if self.evaluates() {
            return self.range_here(r).await;
        }
        if !r.serializable && self.spread_group().is_some() {
            // Spread leaders: the allocator's revision is at least every acknowledged write's;
            // once this member holds it, the serializable answer below reads at or above it.
            let at = self.cluster_revision(false).await?.grant.start - 1;
            self.wait_resolved(at).await?;
        } else if !r.serializable {
            let deadline = tokio::time::Instant::now() + self.request_timeout;
            return match self.on_leader(0, deadline, forward_request::Request::Range(r)).await? {
                forward_response::Response::Range(resp) => Ok(resp),
                _ => Err(EngineError::Remote(unexpected("a forwarded range"))),
            };
        }
        if let Shards::One(s) = self.map.shards_of(&r.key, &r.range_end) {
            // One shard's latest state is a consistent view of its keys, at the revision up to
            // which it holds all of its own: its own last revision, or the resolved one when
            // that is higher (then it has none in between). The member's own writes, applied
            // here before they were answered, are in it.
            let holds = |api: &Self| api.shard(s).own_rev().max(api.cross_shard_last());
            let at = self.wait_until(r.revision, holds).await?;
            let mut resp = self.call(s, |tx| ShardMsg::Range(r, tx)).await?;
            if let Some(h) = resp.header.as_mut() {
                h.revision = at;
            }
            return Ok(resp);
        }
        let resolved = self.wait_until(r.revision, Self::cross_shard_last).await?;
        let at = if r.revision > 0 { r.revision } else { resolved };
        let mut resp = self.range_across(r, at).await?;
        if let Some(h) = resp.header.as_mut() {
            // As etcd: a read at an older revision reports the current one, a read "now" the
            // revision it read at (clients list at it and watch after it).
            h.revision = resolved;
        }
        Ok(resp)
    }

    /// Answers a Txn that cannot write: here when this member evaluates, else on the evaluator
    /// (a Txn's reads are linearizable in etcd).
    ///
    /// # Errors
    /// The shard's answer, or a shard or transport error.
    pub async fn read_txn(&self, s: u32, r: TxnRequest) -> Result<TxnResponse> {
        if self.evaluates() {
            return self.call(s, |tx| ShardMsg::ReadTxn(r, tx)).await;
        }
        if self.spread_group().is_some() {
            // As a linearizable Range (above): at or above the allocator's revision, reported
            // as the revision up to which this shard holds all of its own.
            let at = self.cluster_revision(false).await?.grant.start - 1;
            self.wait_resolved(at).await?;
            let holds = self.shard(s).own_rev().max(self.cross_shard_last());
            let mut resp = self.call(s, |tx| ShardMsg::ReadTxn(r, tx)).await?;
            if let Some(h) = resp.header.as_mut() {
                h.revision = holds;
            }
            return Ok(resp);
        }
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        match self.on_leader(0, deadline, forward_request::Request::ReadTxn(r)).await? {
            forward_response::Response::Txn(resp) => Ok(resp),
            _ => Err(EngineError::Remote(unexpected("a forwarded txn"))),
        }
    }

    /// Answers a Range from this member's shards as they are (no forwarding).
    ///
    /// # Errors
    /// The shard's answer.
    pub(crate) async fn range_here(&self, r: RangeRequest) -> Result<RangeResponse> {
        match self.map.shards_of(&r.key, &r.range_end) {
            Shards::One(s) => self.call(s, |tx| ShardMsg::Range(r, tx)).await,
            Shards::All => {
                let at = if r.revision > 0 { r.revision } else { self.revs.last() };
                let explicit = r.revision > 0;
                let mut resp = self.range_across(r, at).await?;
                // etcd reports its current revision; a read at the current revision reports the
                // revision it read at, since clients list at the header revision and watch after it.
                let revision = if explicit { self.revs.last() } else { at };
                if let Some(h) = resp.header.as_mut() {
                    h.revision = revision;
                }
                Ok(resp)
            }
        }
    }

    /// Reads every shard at revision `at` and merges their answers (a range over keys of
    /// several shards).
    async fn range_across(&self, r: RangeRequest, at: i64) -> Result<RangeResponse> {
        let ask = range_merge::shard_request(&r, at);
        let parts = self.call_all(|tx| ShardMsg::Range(ask.clone(), tx)).await?;
        let mut resp = range_merge::merge_ranges(&r, parts);
        resp.header = self.header().map(|h| ResponseHeader { revision: at, ..h });
        Ok(resp)
    }

    /// Waits until `holds` (a revision up to which this member holds what the read needs)
    /// reaches `rev` (a read at an explicit revision it may not hold yet), up to the request
    /// timeout; returns that revision.
    async fn wait_until(&self, rev: i64, holds: impl Fn(&Self) -> i64) -> Result<i64> {
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        loop {
            let resolved = holds(self);
            if resolved >= rev || rev > self.revs.last() {
                // A revision beyond anything applied here is refused by the shard as etcd
                // refuses a future revision.
                return Ok(resolved);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EngineError::Timeout);
            }
            tokio::time::sleep(self.leader_poll).await;
        }
    }
}
