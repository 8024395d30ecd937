//! The `etcdserverpb.KV` service.

// #[PerformanceCriticalPath]
use ballast_proto::ballastpb::raft_command::Command;
use ballast_proto::etcdserverpb::{
    kv_server::Kv, CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use tonic::{Request, Response, Status};

use super::{unexpected, Api};
use crate::apply::check;
use crate::shard::{ShardMsg, WriteResponse};

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
        let r = req.into_inner();
        check::check_range(&r)?;
        let resp = self.api.shard.call(self.api.request_timeout, |tx| ShardMsg::Range(r, tx)).await?;
        Ok(Response::new(resp))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let r = req.into_inner();
        check::check_put(&r)?;
        self.api.check_size(&r)?;
        match self.api.write(Command::Put(r)).await? {
            WriteResponse::Put(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("put")),
        }
    }

    async fn delete_range(&self, req: Request<DeleteRangeRequest>) -> Result<Response<DeleteRangeResponse>, Status> {
        let r = req.into_inner();
        check::check_delete(&r)?;
        self.api.check_size(&r)?;
        match self.api.write(Command::DeleteRange(r)).await? {
            WriteResponse::DeleteRange(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("delete range")),
        }
    }

    async fn txn(&self, req: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let r = req.into_inner();
        check::check_txn(&r, self.api.max_txn_ops)?;
        if !check::txn_may_write(&r) {
            // A txn that cannot write needs no consensus: it is served like a Range.
            let resp = self.api.shard.call(self.api.request_timeout, |tx| ShardMsg::ReadTxn(r, tx)).await?;
            return Ok(Response::new(resp));
        }
        self.api.check_size(&r)?;
        match self.api.write(Command::Txn(r)).await? {
            WriteResponse::Txn(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("txn")),
        }
    }

    async fn compact(&self, req: Request<CompactionRequest>) -> Result<Response<CompactionResponse>, Status> {
        // Compaction is applied synchronously, so `physical` needs no extra wait.
        match self.api.write(Command::Compaction(req.into_inner())).await? {
            WriteResponse::Compaction(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("compact")),
        }
    }
}
