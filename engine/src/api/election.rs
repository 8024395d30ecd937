//! `v3electionpb.Election`, as etcd serves it. A campaigner's key is `<name>/<lease in hex>`
//! holding its value; the leader is the key under `<name>/` with the lowest create revision.
//! `Campaign` makes the key (or finds it, proclaiming the new value if it differs) and answers
//! once every older key is deleted; `Proclaim` rewrites the leader's value guarded on the key's
//! create revision; `Resign` deletes it with the same guard; `Leader` reads the oldest key;
//! `Observe` streams the leader's key and each new value, then the next leader's.

use std::pin::Pin;

use ballast_proto::etcdserverpb::{request_op::Request as Op, DeleteRangeRequest, PutRequest, RequestOp, TxnRequest};
use ballast_proto::mvccpb::event::EventType;
use ballast_proto::v3electionpb::{
    election_server::Election, CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse,
    ProclaimRequest, ProclaimResponse, ResignRequest, ResignResponse,
};
use bytes::Bytes;
use futures::Stream;
use tonic::{Request, Response, Status};

use super::concurrency::{as_client_error, create_revision_is, prefix_end, range_of, Client};
use super::Api;

/// Serves Election.
#[derive(Debug, Clone)]
pub struct ElectionService {
    client: Client,
}

impl ElectionService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { client: Client::new(api) }
    }

    /// Rewrites the leader's value if `leader` still holds the election.
    async fn proclaim_as(&self, leader: &LeaderKey, value: &[u8]) -> Result<ProclaimResponse, Status> {
        let key = leader.key.clone();
        let put = RequestOp {
            request: Some(Op::RequestPut(PutRequest {
                key: key.clone(),
                value: Bytes::copy_from_slice(value),
                ignore_lease: true,
                ..Default::default()
            })),
        };
        let t = TxnRequest { compare: vec![create_revision_is(&key, leader.rev)], success: vec![put], failure: vec![] };
        let r = self.client.txn(t).await?;
        if !r.succeeded {
            return Err(not_leader());
        }
        Ok(ProclaimResponse { header: r.header })
    }
}

/// etcd's answers: its client library's errors, which its server returns as they are (code
/// Unknown).
fn not_leader() -> Status {
    Status::unknown("election: not leader")
}

fn no_leader() -> Status {
    Status::unknown("election: no leader")
}

fn missing_leader() -> Status {
    Status::unknown("\"leader\" field must be provided")
}

fn prefix(name: &[u8]) -> Vec<u8> {
    let mut p = name.to_vec();
    p.push(b'/');
    p
}

type ObserveStream = Pin<Box<dyn Stream<Item = Result<LeaderResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Election for ElectionService {
    async fn campaign(&self, req: Request<CampaignRequest>) -> Result<Response<CampaignResponse>, Status> {
        self.campaign_as_etcd(req).await.map_err(as_client_error)
    }

    async fn proclaim(&self, req: Request<ProclaimRequest>) -> Result<Response<ProclaimResponse>, Status> {
        self.proclaim_as_etcd(req).await.map_err(as_client_error)
    }

    async fn leader(&self, req: Request<LeaderRequest>) -> Result<Response<LeaderResponse>, Status> {
        self.leader_as_etcd(req).await.map_err(as_client_error)
    }

    type ObserveStream = ObserveStream;

    async fn observe(&self, req: Request<LeaderRequest>) -> Result<Response<ObserveStream>, Status> {
        self.observe_as_etcd(req).await.map_err(as_client_error)
    }

    async fn resign(&self, req: Request<ResignRequest>) -> Result<Response<ResignResponse>, Status> {
        self.resign_as_etcd(req).await.map_err(as_client_error)
    }
}

/// The methods' bodies; their errors go out through `as_client_error`.
impl ElectionService {
    async fn campaign_as_etcd(&self, req: Request<CampaignRequest>) -> Result<Response<CampaignResponse>, Status> {
        self.client.api.permit(&req, |s, who| super::auth::check_name(s, who, &req.get_ref().name, true)).await?;
        let req = req.into_inner();
        let lease = self.client.session(req.lease).await?;
        let prefix = prefix(&req.name);
        let key = Bytes::from([prefix.as_slice(), format!("{lease:x}").as_bytes()].concat());
        let resp = self.client.create_guarded(&key, &req.value, lease, None).await?;
        let mut rev = resp.header.as_ref().map_or(0, |h| h.revision);
        if !resp.succeeded {
            let existing = resp.responses.first().and_then(range_of).and_then(|r| r.kvs.first());
            if let Some(kv) = existing {
                rev = kv.create_revision;
                if kv.value != req.value {
                    let me = LeaderKey { name: req.name.clone(), key: key.clone(), rev, lease };
                    if let Err(e) = self.proclaim_as(&me, &req.value).await {
                        let _ = self.resign_as_etcd(super::auth::internal(ResignRequest { leader: Some(me) })).await;
                        return Err(e);
                    }
                }
            }
        }
        self.client.wait_deletes(&prefix, rev - 1).await?;
        Ok(Response::new(CampaignResponse {
            header: resp.header,
            leader: Some(LeaderKey { name: req.name, key, rev, lease }),
        }))
    }

    async fn proclaim_as_etcd(&self, req: Request<ProclaimRequest>) -> Result<Response<ProclaimResponse>, Status> {
        let name = req.get_ref().leader.as_ref().map(|l| l.name.clone()).unwrap_or_default();
        self.client.api.permit(&req, |s, who| super::auth::check_name(s, who, &name, true)).await?;
        let req = req.into_inner();
        let leader = req.leader.ok_or_else(missing_leader)?;
        Ok(Response::new(self.proclaim_as(&leader, &req.value).await?))
    }

    async fn leader_as_etcd(&self, req: Request<LeaderRequest>) -> Result<Response<LeaderResponse>, Status> {
        self.client.api.permit(&req, |s, who| super::auth::check_name(s, who, &req.get_ref().name, false)).await?;
        let r = self.client.first_created(&prefix(&req.get_ref().name)).await?;
        let kv = r.kvs.into_iter().next().ok_or_else(no_leader)?;
        Ok(Response::new(LeaderResponse { header: r.header, kv: Some(kv) }))
    }

    async fn observe_as_etcd(&self, req: Request<LeaderRequest>) -> Result<Response<ObserveStream>, Status> {
        self.client.api.permit(&req, |s, who| super::auth::check_name(s, who, &req.get_ref().name, false)).await?;
        let client = self.client.clone();
        let prefix = prefix(&req.into_inner().name);
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            let _ = observe(client, prefix, tx).await;
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn resign_as_etcd(&self, req: Request<ResignRequest>) -> Result<Response<ResignResponse>, Status> {
        let name = req.get_ref().leader.as_ref().map(|l| l.name.clone()).unwrap_or_default();
        self.client.api.permit(&req, |s, who| super::auth::check_name(s, who, &name, true)).await?;
        let leader = req.into_inner().leader.ok_or_else(missing_leader)?;
        let key = leader.key.clone();
        let delete = RequestOp {
            request: Some(Op::RequestDeleteRange(DeleteRangeRequest { key: key.clone(), ..Default::default() })),
        };
        let t =
            TxnRequest { compare: vec![create_revision_is(&key, leader.rev)], success: vec![delete], failure: vec![] };
        let r = self.client.txn(t).await?;
        Ok(Response::new(ResignResponse { header: r.header }))
    }
}

type Sink = tokio::sync::mpsc::Sender<Result<LeaderResponse, Status>>;

/// Streams the election's leaders to `tx` until the client goes away: the current leader's key
/// (or, with none, the first one made), each new value it proclaims, and after its deletion
/// the next leader's.
async fn observe(client: Client, prefix: Vec<u8>, tx: Sink) -> Result<(), ()> {
    loop {
        let r = client.first_created(&prefix).await.map_err(|_| ())?;
        let (mut header, kv) = match r.kvs.into_iter().next() {
            Some(kv) => (r.header.unwrap_or_default(), kv),
            None => {
                let from = r.header.as_ref().map_or(0, |h| h.revision);
                let mut w = client.watch(&prefix, prefix_end(&prefix), from).await.map_err(|_| ())?;
                loop {
                    let resp = tokio::select! {
                        r = w.next() => r.ok_or(())?,
                        () = tx.closed() => return Ok(()),
                    };
                    let put = resp.events.into_iter().find(|e| e.r#type == EventType::Put as i32);
                    if let Some(kv) = put.and_then(|e| e.kv) {
                        let mut h = resp.header.unwrap_or_default();
                        h.revision = kv.mod_revision;
                        break (h, kv);
                    }
                }
            }
        };
        tx.send(Ok(LeaderResponse { header: Some(header), kv: Some(kv.clone()) })).await.map_err(|_| ())?;
        let mut w = client.watch(&kv.key, Bytes::new(), header.revision + 1).await.map_err(|_| ())?;
        'leader: loop {
            let resp = tokio::select! {
                r = w.next() => r.ok_or(())?,
                () = tx.closed() => return Ok(()),
            };
            header = resp.header.unwrap_or_default();
            for e in resp.events {
                if e.r#type == EventType::Delete as i32 {
                    break 'leader;
                }
                tx.send(Ok(LeaderResponse { header: Some(header), kv: e.kv })).await.map_err(|_| ())?;
            }
        }
    }
}
