//! `v3lockpb.Lock`, as etcd serves it: `Lock` makes the key `<name>/<lease in hex>` on the
//! caller's lease (guarded on not existing), and answers once every key under `<name>/` created
//! before it is deleted, so owners follow in create-revision order; `Unlock` deletes the key.
//! A caller whose wait is cut short (deadline, cancel) has its key deleted, as etcd does.
//! Errors are etcd's client library's, code Unknown (see `concurrency::as_client_error`).

use ballast_proto::authpb::permission::Type as PermType;
use ballast_proto::etcdserverpb::{kv_server::Kv, DeleteRangeRequest};
use ballast_proto::v3lockpb::{lock_server::Lock, LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use bytes::Bytes;
use tonic::{Request, Response, Status};

use super::concurrency::{as_client_error, range_of, Client};
use super::Api;

/// Serves Lock.
#[derive(Debug, Clone)]
pub struct LockService {
    client: Client,
}

impl LockService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { client: Client::new(api) }
    }
}

/// Deletes `key` unless disarmed: the key of a wait that did not finish.
struct DeleteOnDrop {
    api: Option<Api>,
    key: Bytes,
}

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        if let Some(api) = self.api.take() {
            let key = self.key.clone();
            tokio::spawn(async move {
                let kv = super::kv::KvService::new(api);
                let _ = kv.delete_range(super::auth::internal(DeleteRangeRequest { key, ..Default::default() })).await;
            });
        }
    }
}

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        self.lock_as_etcd(req).await.map_err(as_client_error)
    }

    async fn unlock(&self, req: Request<UnlockRequest>) -> Result<Response<UnlockResponse>, Status> {
        self.unlock_as_etcd(req).await.map_err(as_client_error)
    }
}

impl LockService {
    async fn lock_as_etcd(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let api = &self.client.api;
        api.permit(&req, |s, who| super::auth::check_name(s, who, &req.get_ref().name, true)).await?;
        let req = req.into_inner();
        let lease = self.client.session(req.lease).await?;
        let mut prefix = req.name.to_vec();
        prefix.push(b'/');
        let key = Bytes::from([prefix.as_slice(), format!("{lease:x}").as_bytes()].concat());
        let resp = self.client.create_guarded(&key, b"", lease, Some(&prefix)).await?;
        let mut my_rev = resp.header.as_ref().map_or(0, |h| h.revision);
        // Answers: [put, oldest] when the key was made, [key, oldest] when it existed.
        let range = |i: usize| resp.responses.get(i).and_then(range_of).and_then(|r| r.kvs.first());
        if !resp.succeeded {
            my_rev = range(0).map_or(my_rev, |kv| kv.create_revision);
        }
        let owner = range(1).map(|kv| kv.create_revision);
        if owner.is_none() || owner == Some(my_rev) {
            return Ok(Response::new(LockResponse { header: resp.header, key }));
        }
        let mut guard = DeleteOnDrop { api: Some(self.client.api.clone()), key: key.clone() };
        let header = self.client.wait_deletes(&prefix, my_rev - 1).await?;
        guard.api = None;
        Ok(Response::new(LockResponse { header: Some(header), key }))
    }

    async fn unlock_as_etcd(&self, req: Request<UnlockRequest>) -> Result<Response<UnlockResponse>, Status> {
        let api = &self.client.api;
        api.permit(&req, |s, who| crate::auth::checks::lease_keys(s, who, &[&req.get_ref().key], PermType::Write))
            .await?;
        let kv = super::kv::KvService::new(self.client.api.clone());
        let key = req.into_inner().key;
        let r = kv
            .delete_range(super::auth::internal(DeleteRangeRequest { key, ..Default::default() }))
            .await?
            .into_inner();
        Ok(Response::new(UnlockResponse { header: r.header }))
    }
}
