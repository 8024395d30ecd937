//! The `etcdserverpb.KV` service.

// #[PerformanceCriticalPath]
use ballast_proto::ballastpb::raft_command::Command;
use ballast_proto::etcdserverpb::{
    kv_server::Kv, CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, ResponseHeader, TxnRequest, TxnResponse,
};
use tonic::{Request, Response, Status};

use super::{route, unexpected, Api};
use crate::apply::{check, range_merge};
use crate::error::{EngineError, Result};
use crate::shard::{ShardMsg, WriteResponse};
use crate::shard_map::Shards;

/// Serves Range, Put, DeleteRange, Txn and Compact.
#[derive(Debug, Clone)]
pub struct KvService {
    api: Api,
}

impl KvService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { api }
    }

    /// Serves a Range over keys of several shards: every shard reads at one revision `R`, and
    /// the answers merge into what one store would answer (`engine/SHARDING.md` says why `R`,
    /// the counter's value when the request starts, needs no wait).
    async fn range_across(&self, r: RangeRequest) -> Result<RangeResponse> {
        let at = if r.revision > 0 { r.revision } else { self.api.revs.last() };
        let ask = range_merge::shard_request(&r, at);
        let parts = self.api.call_all(|tx| ShardMsg::Range(ask.clone(), tx)).await?;
        let mut resp = range_merge::merge_ranges(&r, parts);
        // etcd reports its current revision; a read at the current revision reports the
        // revision it read at, since clients list at the header revision and watch after it.
        let revision = if r.revision > 0 { self.api.revs.last() } else { at };
        resp.header = self.api.header().map(|h| ResponseHeader { revision, ..h });
        Ok(resp)
    }
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(&self, req: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        let r = req.into_inner();
        if !r.serializable && self.api.is_learner() {
            return Err(EngineError::NotSupportedForLearner.into());
        }
        check::check_range(&r)?;
        let resp = match self.api.map.shards_of(&r.key, &r.range_end) {
            Shards::One(s) => self.api.call(s, |tx| ShardMsg::Range(r, tx)).await?,
            Shards::All => self.range_across(r).await?,
        };
        Ok(Response::new(resp))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let r = req.into_inner();
        check::check_put(&r)?;
        self.api.check_size(&r)?;
        let s = self.api.map.shard_of(&r.key);
        match self.api.write(s, Command::Put(r)).await? {
            WriteResponse::Put(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("put")),
        }
    }

    async fn delete_range(&self, req: Request<DeleteRangeRequest>) -> Result<Response<DeleteRangeResponse>, Status> {
        let r = req.into_inner();
        check::check_delete(&r)?;
        self.api.check_size(&r)?;
        let s = route::one_shard(&self.api.map, "a delete range", &r.key, &r.range_end)?;
        match self.api.write(s, Command::DeleteRange(r)).await? {
            WriteResponse::DeleteRange(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("delete range")),
        }
    }

    async fn txn(&self, req: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let r = req.into_inner();
        check::check_txn(&r, self.api.max_txn_ops)?;
        let s = route::txn_shard(&self.api.map, &r)?;
        if !check::txn_may_write(&r) {
            // A txn that cannot write needs no consensus: it is served like a Range.
            let resp = self.api.call(s, |tx| ShardMsg::ReadTxn(r, tx)).await?;
            return Ok(Response::new(resp));
        }
        self.api.check_size(&r)?;
        match self.api.write(s, Command::Txn(r)).await? {
            WriteResponse::Txn(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("txn")),
        }
    }

    async fn compact(&self, req: Request<CompactionRequest>) -> Result<Response<CompactionResponse>, Status> {
        // Compaction is applied synchronously, so `physical` needs no extra wait. Every shard
        // compacts its own history at the same revision.
        match self.api.write_all(Command::Compaction(req.into_inner())).await? {
            WriteResponse::Compaction(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("compact")),
        }
    }
}
