//! The `etcdserverpb.KV` service.

// #[PerformanceCriticalPath]
use ballast_proto::ballastpb::raft_command::Command;
use ballast_proto::etcdserverpb::{
    kv_server::Kv, CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use tonic::{Request, Response, Status};

use super::{route, unexpected, Api};
use crate::apply::check;
use crate::auth::checks;
use crate::error::EngineError;
use crate::shard::WriteResponse;

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
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(&self, req: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        self.api.permit(&req, |s, who| checks::range(s, who, req.get_ref())).await?;
        let r = req.into_inner();
        if !r.serializable && self.api.is_learner() {
            return Err(EngineError::NotSupportedForLearner.into());
        }
        check::check_range(&r)?;
        Ok(Response::new(self.api.range(r).await?))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        if let Some(who) = self.api.caller(&req).await? {
            let state = self.api.auth.state();
            checks::put(&state, &who, req.get_ref())?;
            if req.get_ref().lease != 0 {
                // etcd checks write on the keys the lease holds already.
                let keys = self.api.lease_keys(req.get_ref().lease).await?;
                checks::lease_keys(&state, &who, &keys, ballast_proto::authpb::permission::Type::Write)?;
            }
        }
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
        self.api.permit(&req, |s, who| checks::delete(s, who, req.get_ref())).await?;
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
        self.api.permit(&req, |s, who| checks::txn(s, who, req.get_ref())).await?;
        let r = req.into_inner();
        check::check_txn(&r, self.api.max_txn_ops)?;
        let s = route::txn_shard(&self.api.map, &r)?;
        if !check::txn_may_write(&r) {
            // A txn that cannot write needs no consensus: it is served like a Range.
            let resp = self.api.read_txn(s, r).await?;
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
        let req = req.into_inner();
        if self.api.spread_group().is_some() && self.api.shards_replicated() {
            // Spread leaders: a shard's leader may not hold other shards' revisions, so the
            // revision is checked against the cluster's and sent once every shard committed it.
            let at = self.api.cluster_revision(false).await?.grant.start - 1;
            if req.revision > at {
                return Err(crate::error::EngineError::FutureRev.into());
            }
            self.api.wait_resolved(req.revision).await?;
        }
        match self.api.write_all(Command::Compaction(req)).await? {
            WriteResponse::Compaction(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("compact")),
        }
    }
}
