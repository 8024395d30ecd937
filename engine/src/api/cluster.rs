//! The `etcdserverpb.Cluster` service. Membership changes are not built yet (a member runs
//! alone); they answer etcd's "not capable" rather than pretending to succeed.

use ballast_proto::etcdserverpb::{
    cluster_server::Cluster, Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse, MemberUpdateRequest,
    MemberUpdateResponse, ResponseHeader,
};
use tonic::{Request, Response, Status};

use super::Api;
use crate::error::EngineError;

/// Serves the membership RPCs.
#[derive(Debug, Clone)]
pub struct ClusterService {
    api: Api,
}

impl ClusterService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { api }
    }

    /// etcd 3.4 leaves the revision of membership answers at 0.
    fn header(&self) -> Option<ResponseHeader> {
        self.api.header().map(|h| ResponseHeader { revision: 0, ..h })
    }

    fn members(&self) -> Vec<Member> {
        let m = &self.api.member;
        vec![Member {
            id: m.id,
            name: m.name.clone(),
            peer_ur_ls: m.peer_urls.clone(),
            client_ur_ls: m.client_urls.clone(),
            is_learner: false,
        }]
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(&self, _req: Request<MemberAddRequest>) -> Result<Response<MemberAddResponse>, Status> {
        Err(EngineError::NotCapable.into())
    }

    async fn member_remove(
        &self,
        _req: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        Err(EngineError::NotCapable.into())
    }

    async fn member_update(
        &self,
        _req: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        Err(EngineError::NotCapable.into())
    }

    async fn member_list(&self, _req: Request<MemberListRequest>) -> Result<Response<MemberListResponse>, Status> {
        Ok(Response::new(MemberListResponse { header: self.header(), members: self.members() }))
    }

    async fn member_promote(
        &self,
        _req: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        Err(EngineError::NotCapable.into())
    }
}
