//! The `etcdserverpb.Cluster` service. MemberList shows the cluster's members, with the names
//! and client URLs the others announced over the peer port (a member that has not yet is shown
//! as etcd shows an unstarted one: no name, no client URLs). MemberAdd, MemberRemove,
//! MemberUpdate and MemberPromote are raft conf changes of shard 0's group, carrying the
//! member's record, made by its leader ([`change_membership`]) with etcd's checks and errors;
//! a member asked that does not lead sends the change on. With auth enabled the changes need
//! the root role, as etcd's do. A member running several shards
//! answers "not capable" (clusters run one shard).

use ballast_proto::ballastpb::{forward_request, MemberRecord};
use ballast_proto::etcdserverpb::{
    cluster_server::Cluster, Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse, MemberUpdateRequest,
    MemberUpdateResponse, ResponseHeader,
};
use tonic::{Request, Response, Status};

use super::{Api, ApiContext};
use crate::cluster::{member_context, members, Member as ClusterMember};
use crate::error::{EngineError, Result as EngineResult};
use crate::shard::ShardMsg;

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

    /// The members in ID order, as etcd lists them.
    fn members(&self) -> Vec<Member> {
        let me = &self.api.member;
        let attributes = self.api.peer_attributes.read();
        let mut members: Vec<Member> = self
            .api
            .membership
            .read()
            .members
            .iter()
            .map(|m| {
                let (name, client_ur_ls) = if m.id == me.id {
                    (me.name.clone(), me.client_urls.clone())
                } else {
                    attributes.get(&m.id).cloned().unwrap_or_default()
                };
                Member { id: m.id, name, peer_ur_ls: m.peer_urls.clone(), client_ur_ls, is_learner: m.is_learner }
            })
            .collect();
        members.sort_by_key(|m| m.id);
        members
    }
}

fn to_member(r: MemberRecord) -> Member {
    Member { id: r.id, name: r.name, peer_ur_ls: r.peer_urls, client_ur_ls: vec![], is_learner: r.is_learner }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(&self, req: Request<MemberAddRequest>) -> Result<Response<MemberAddResponse>, Status> {
        self.api.permit_admin(&req).await?;
        let added = self.api.member_change(forward_request::Request::MemberAdd(req.into_inner())).await?;
        Ok(Response::new(MemberAddResponse {
            header: self.header(),
            member: Some(to_member(added)),
            members: self.members(),
        }))
    }

    async fn member_remove(&self, req: Request<MemberRemoveRequest>) -> Result<Response<MemberRemoveResponse>, Status> {
        self.api.permit_admin(&req).await?;
        self.api.member_change(forward_request::Request::MemberRemove(req.into_inner())).await?;
        Ok(Response::new(MemberRemoveResponse { header: self.header(), members: self.members() }))
    }

    async fn member_update(&self, req: Request<MemberUpdateRequest>) -> Result<Response<MemberUpdateResponse>, Status> {
        self.api.permit_admin(&req).await?;
        self.api.member_change(forward_request::Request::MemberUpdate(req.into_inner())).await?;
        Ok(Response::new(MemberUpdateResponse { header: self.header(), members: self.members() }))
    }

    async fn member_list(&self, _req: Request<MemberListRequest>) -> Result<Response<MemberListResponse>, Status> {
        Ok(Response::new(MemberListResponse { header: self.header(), members: self.members() }))
    }

    async fn member_promote(
        &self,
        req: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        self.api.permit_admin(&req).await?;
        self.api.member_change(forward_request::Request::MemberPromote(req.into_inner())).await?;
        Ok(Response::new(MemberPromoteResponse { header: self.header(), members: self.members() }))
    }
}

/// Most learners a cluster may have: etcd's default (`--experimental-max-learners` 1).
const MAX_LEARNERS: usize = 1;

/// A learner may be promoted once its log holds this share of the leader's: etcd's 90%.
const LEARNER_READY_PERCENT: u64 = 90;

/// Makes a membership change on this member, which leads shard 0: checks it as etcd does,
/// proposes the conf change and waits until it is applied. Answers the member's record.
///
/// # Errors
/// etcd's membership errors; `NotLeader` when this member no longer leads.
pub(crate) async fn change_membership(
    api: &ApiContext,
    request: forward_request::Request,
) -> EngineResult<MemberRecord> {
    use ballast_raft::{ConfChange, ConfChangeType};
    let membership = api.membership.read().clone();
    let group = api.call(0, ShardMsg::Progress).await?;
    let (progress, leader_last) = (group.members, group.last_index);
    let active = |raft_id: u64| progress.iter().any(|(id, _, active)| *id == raft_id && *active);
    let started_voters = membership.members.iter().filter(|m| !m.is_learner && active(m.raft_id)).count();
    let voters = membership.voters().len();
    let url_taken = |urls: &[String], except: u64| {
        membership.members.iter().any(|m| m.id != except && m.peer_urls.iter().any(|u| urls.contains(u)))
    };
    let (change_type, member) = match request {
        forward_request::Request::MemberAdd(r) => {
            if r.peer_ur_ls.is_empty()
                || r.peer_ur_ls.iter().any(|u| !u.starts_with("http://") && !u.starts_with("https://"))
            {
                return Err(EngineError::MemberBadUrls);
            }
            if url_taken(&r.peer_ur_ls, 0) {
                return Err(EngineError::PeerUrlExists);
            }
            if membership.members.iter().any(|m| !m.is_learner && !active(m.raft_id)) {
                // etcd's health check: every voting member must be connected.
                return Err(EngineError::Unhealthy);
            }
            if r.is_learner {
                if membership.learners().len() >= MAX_LEARNERS {
                    return Err(EngineError::TooManyLearners);
                }
            } else {
                // etcd's strict reconfiguration check; growing a one-member cluster is allowed.
                let (nmembers, nstarted) = (voters + 1, started_voters);
                if !(nstarted == 1 && nmembers == 2) && nstarted < nmembers / 2 + 1 {
                    return Err(EngineError::NotEnoughStartedMembers);
                }
            }
            let now = crate::clock::unix_seconds();
            let id = members::added_member_id(&r.peer_ur_ls, &api.cluster_token, Some(now));
            let m = ClusterMember {
                id,
                name: String::new(),
                peer_urls: r.peer_ur_ls,
                is_learner: r.is_learner,
                raft_id: id,
            };
            (if r.is_learner { ConfChangeType::AddLearnerNode } else { ConfChangeType::AddNode }, m)
        }
        forward_request::Request::MemberRemove(r) => {
            let m = membership.get(r.id).cloned().ok_or(EngineError::MemberNotFound)?;
            if !m.is_learner {
                let nstarted = started_voters - usize::from(active(m.raft_id));
                if nstarted < (voters - 1) / 2 + 1 {
                    // etcd tells a removal that leaves too few connected voters apart.
                    return Err(if active(m.raft_id) {
                        EngineError::Unhealthy
                    } else {
                        EngineError::NotEnoughStartedMembers
                    });
                }
            }
            (ConfChangeType::RemoveNode, m)
        }
        forward_request::Request::MemberPromote(r) => {
            let mut m = membership.get(r.id).cloned().ok_or(EngineError::MemberNotFound)?;
            if !m.is_learner {
                return Err(EngineError::MemberNotLearner);
            }
            let matched = progress.iter().find(|(id, _, _)| *id == m.raft_id).map_or(0, |(_, mt, _)| *mt);
            if matched * 100 < leader_last * LEARNER_READY_PERCENT {
                return Err(EngineError::LearnerNotReady);
            }
            let (nmembers, nstarted) = (voters + 1, started_voters + usize::from(active(m.raft_id)));
            if nstarted < nmembers / 2 + 1 {
                return Err(EngineError::NotEnoughStartedMembers);
            }
            m.is_learner = false;
            (ConfChangeType::AddNode, m)
        }
        forward_request::Request::MemberUpdate(r) => {
            let mut m = membership.get(r.id).cloned().ok_or(EngineError::MemberNotFound)?;
            if url_taken(&r.peer_ur_ls, r.id) {
                return Err(EngineError::PeerUrlExists);
            }
            m.peer_urls = r.peer_ur_ls;
            (if m.is_learner { ConfChangeType::AddLearnerNode } else { ConfChangeType::AddNode }, m)
        }
        _ => return Err(EngineError::NotCapable),
    };
    let cc = ConfChange {
        change_type: change_type as i32,
        node_id: member.raft_id,
        context: member_context(&member),
        ..Default::default()
    };
    api.call(0, |tx| ShardMsg::ConfChange(cc, tx)).await?;
    // The other shards follow shard 0's members (`shard::colocate`); the change is answered
    // once every shard has it, as etcd answers once its one group has it. A member that removed
    // itself stops now; the next member to lead the shards removes it from the rest.
    let removes_me = change_type == ConfChangeType::RemoveNode && member.id == api.member.id;
    if let Some(colo) = api.colocation.as_ref().filter(|_| !removes_me) {
        let deadline = tokio::time::Instant::now() + api.request_timeout;
        while !colo.converged() {
            if tokio::time::Instant::now() >= deadline {
                return Err(EngineError::Timeout);
            }
            tokio::time::sleep(api.leader_poll).await;
        }
    }
    Ok(MemberRecord {
        id: member.id,
        name: member.name,
        peer_urls: member.peer_urls,
        is_learner: member.is_learner,
        raft_id: member.raft_id,
    })
}
