//! Serving what another member forwards here (or this member's own request, when it leads the
//! shard): the peer service's `Forward` calls end here, and [`PeerAnswerSink`] puts the answers
//! of writes sent on over the raft connection (`cluster::forwarding`) in their wire form.

use std::sync::Arc;

use ballast_proto::ballastpb::{forward_request, forward_response, ForwardAnswer, ForwardResponse};

use super::context::{unexpected, ApiContext};
use super::{cluster, route, status};
use crate::cluster::transport::PeerRouter;
use crate::error::{EngineError, Result};
use crate::shard::{PeerAnswers, ShardMsg, WriteReply, WriteResponse};

/// A shard's way to answer writes other members sent on to it: encoded as etcd answers them
/// (an error as etcd's gRPC code and text) and sent on the raft connection to the member.
#[derive(Debug)]
pub struct PeerAnswerSink {
    router: Arc<PeerRouter>,
}

impl PeerAnswerSink {
    /// Returns the sink sending over `router`.
    pub fn new(router: Arc<PeerRouter>) -> Arc<Self> {
        Arc::new(Self { router })
    }
}

impl PeerAnswers for PeerAnswerSink {
    fn send(&self, to: u64, answers: Vec<(u64, Result<WriteResponse>)>, applied: u64) {
        send_answers(&self.router, to, answers, applied);
    }
}

/// Sends member `to` the answers of the writes it sent on (numbered), with the raft index
/// applied here when they were answered.
pub(super) fn send_answers(router: &PeerRouter, to: u64, answers: Vec<(u64, Result<WriteResponse>)>, applied: u64) {
    let answers = answers
        .into_iter()
        .map(|(id, result)| match result {
            Ok(r) => ForwardAnswer {
                id,
                response: Some(ForwardResponse { applied_index: applied, response: Some(wire_answer(r)) }),
                ..Default::default()
            },
            Err(e) => {
                let (code, message) = status::code_and_message(&e);
                ForwardAnswer { id, response: None, code: code as i32, message }
            }
        })
        .collect();
    router.send_answers(to, answers);
}

/// A write's answer as a forwarded answer carries it.
fn wire_answer(r: WriteResponse) -> forward_response::Response {
    use forward_response::Response as R;
    match r {
        WriteResponse::Put(r) => R::Put(r),
        WriteResponse::DeleteRange(r) => R::DeleteRange(r),
        WriteResponse::Txn(r) => R::Txn(r),
        WriteResponse::Compaction(r) => R::Compaction(r),
        WriteResponse::LeaseGrant(r) => R::LeaseGrant(r),
        WriteResponse::LeaseRevoke(r) => R::LeaseRevoke(r),
        WriteResponse::Alarm(r) => R::Alarm(r),
        WriteResponse::Auth(r) => R::Auth(r),
    }
}

impl ApiContext {
    /// Serves a request sent on by another member (`from_peer`) or this member's own, when it
    /// leads: answers it and the raft index applied when it was answered.
    ///
    /// # Errors
    /// The shard's answer.
    pub async fn serve_forwarded(
        &self,
        s: u32,
        request: forward_request::Request,
        from_peer: bool,
    ) -> Result<(forward_response::Response, u64)> {
        use forward_response::Response as R;
        let answer = match request {
            forward_request::Request::Write(cmd) => {
                let Some(cmd) = cmd.command else { return Err(EngineError::Remote(unexpected("an empty write"))) };
                let msg = |tx| match from_peer {
                    true => ShardMsg::ForwardedWrite(cmd, WriteReply::Local(tx)),
                    false => ShardMsg::Write(cmd, tx),
                };
                wire_answer(self.call(s, msg).await?)
            }
            forward_request::Request::LeaseKeepAlive(id) => {
                R::LeaseKeepAliveTtl(self.call(s, |tx| ShardMsg::LeaseKeepAlive(id, tx)).await?)
            }
            forward_request::Request::LeaseTimeToLive(r) => {
                R::LeaseTimeToLive(self.call(s, |tx| ShardMsg::LeaseTimeToLive(r, tx)).await?)
            }
            // Reads come here only on a cluster of several shards: the member that leads them
            // all answers; another sends the asker on (it retries until one does).
            forward_request::Request::Range(r) if self.evaluates() => R::Range(self.range_here(r).await?),
            forward_request::Request::ReadTxn(r) if self.evaluates() => {
                let s = route::txn_shard(&self.map, &r)?;
                R::Txn(self.call(s, |tx| ShardMsg::ReadTxn(r, tx)).await?)
            }
            forward_request::Request::Range(_) | forward_request::Request::ReadTxn(_) => {
                return Err(EngineError::NotLeader)
            }
            other => R::Member(cluster::change_membership(self, other).await?),
        };
        Ok((answer, self.shard(s).applied()))
    }
}
