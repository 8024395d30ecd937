//! The `etcdserverpb.Lease` service. Grants and revokes go through raft; keep-alives and
//! time-to-live queries are answered by the shard's leader from its lease table, as etcd does.

use std::pin::Pin;

use ballast_proto::ballastpb::raft_command::Command;
use ballast_proto::etcdserverpb::{
    lease_server::Lease, LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse,
};
use futures::{Stream, StreamExt};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::ApiContext;
use super::{unexpected, Api};
use crate::auth::checks;
use crate::error::{EngineError, Result as EngineResult};
use crate::lease::MAX_LEASE_TTL;
use crate::shard::{ShardMsg, WriteResponse};
use ballast_proto::authpb::permission::Type as PermType;

/// Serves the lease RPCs.
#[derive(Debug, Clone)]
pub struct LeaseService {
    api: Api,
}

impl LeaseService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { api }
    }
}

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(&self, req: Request<LeaseGrantRequest>) -> Result<Response<LeaseGrantResponse>, Status> {
        let mut r = req.into_inner();
        if r.ttl > MAX_LEASE_TTL {
            return Err(EngineError::LeaseTtlTooLarge.into());
        }
        if r.id == 0 {
            // The ID is chosen before proposing so every member applies the same one.
            r.id = (rand::random::<u64>() >> 1).max(1) as i64;
        }
        // Every shard keeps every lease, so a key of any shard can be attached to it.
        match self.api.write_all(Command::LeaseGrant(r)).await? {
            WriteResponse::LeaseGrant(resp) => Ok(Response::new(resp)),
            _ => Err(unexpected("lease grant")),
        }
    }

    async fn lease_revoke(&self, req: Request<LeaseRevokeRequest>) -> Result<Response<LeaseRevokeResponse>, Status> {
        if let Some(who) = self.api.caller(&req).await? {
            // etcd: revoking deletes the lease's keys, so it needs write on each of them.
            let keys = self.api.lease_keys(req.get_ref().id).await?;
            checks::lease_keys(&self.api.auth.state(), &who, &keys, PermType::Write)?;
        }
        // Each shard deletes its own keys of the lease, at its own revision; etcd deletes them
        // all at one revision (see `engine/SHARDING.md`).
        match self.api.write_all(Command::LeaseRevoke(req.into_inner())).await? {
            WriteResponse::LeaseRevoke(mut resp) => {
                resp.header = self.api.header();
                Ok(Response::new(resp))
            }
            _ => Err(unexpected("lease revoke")),
        }
    }

    type LeaseKeepAliveStream = Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send + 'static>>;

    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let mut inbound = req.into_inner();
        // Keep-alives are answered one by one; 16 answers in flight is plenty for a client that
        // sends one every TTL/3.
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let api = self.api.clone();
        tokio::spawn(async move {
            while let Ok(Some(msg)) = inbound.message().await {
                // Every shard's lessor keeps the lease's deadline; shard 0 answers. In a cluster
                // each shard's leader keeps it, reached wherever it is.
                let answer = if api.router.has_peers() {
                    let renewals = (0..api.shards.len() as u32).map(|s| api.keep_alive(s, msg.id));
                    futures::future::join_all(renewals).await.into_iter().collect::<Result<Vec<i64>, _>>()
                } else {
                    api.call_all(|r| ShardMsg::LeaseKeepAlive(msg.id, r)).await
                };
                let out = answer.map_err(Status::from).map(|ttls| LeaseKeepAliveResponse {
                    header: api.header(),
                    id: msg.id,
                    ttl: ttls[0],
                });
                let failed = out.is_err();
                if tx.send(out).await.is_err() || failed {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(|x| x))))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        if let Some(who) = self.api.caller(&req).await? {
            // etcd 3.5: the answer names the lease's keys, so it needs read on each of them.
            let keys = self.api.lease_keys(req.get_ref().id).await?;
            checks::lease_keys(&self.api.auth.state(), &who, &keys, PermType::Read)?;
        }
        Ok(Response::new(self.api.lease_time_to_live(req.into_inner()).await?))
    }

    async fn lease_leases(&self, _req: Request<LeaseLeasesRequest>) -> Result<Response<LeaseLeasesResponse>, Status> {
        let resp = self.api.call(0, ShardMsg::LeaseLeases).await?;
        Ok(Response::new(resp))
    }
}

impl ApiContext {
    /// Answers LeaseTimeToLive: shard 0 answers for the lease; the keys attached to it are on
    /// every shard (asked of each shard's leader in a cluster).
    ///
    /// # Errors
    /// A shard or transport error.
    pub async fn lease_time_to_live(&self, r: LeaseTimeToLiveRequest) -> EngineResult<LeaseTimeToLiveResponse> {
        if self.shards.len() == 1 {
            return self.time_to_live(0, r).await;
        }
        let mut answers = if self.router.has_peers() {
            let asks = (0..self.shards.len() as u32).map(|s| self.time_to_live(s, r));
            futures::future::join_all(asks).await.into_iter().collect::<EngineResult<Vec<_>>>()?.into_iter()
        } else {
            self.call_all(|tx| ShardMsg::LeaseTimeToLive(r, tx)).await?.into_iter()
        };
        let mut resp = answers.next().expect("invariant: a member has at least one shard");
        for other in answers {
            resp.keys.extend(other.keys);
        }
        resp.header = self.header();
        Ok(resp)
    }

    /// Returns the keys attached to lease `id` (none for an unknown lease).
    ///
    /// # Errors
    /// A shard or transport error.
    pub async fn lease_keys(&self, id: i64) -> EngineResult<Vec<bytes::Bytes>> {
        let r = LeaseTimeToLiveRequest { id, keys: true };
        Ok(self.lease_time_to_live(r).await?.keys)
    }
}
