//! Serving what another member forwards here (or this member's own request, when it leads the
//! shard): the peer service's `Forward` calls and the forwarding stream end here.

use ballast_proto::ballastpb::{forward_request, forward_response};

use super::context::{unexpected, ApiContext};
use super::{cluster, route};
use crate::error::{EngineError, Result};
use crate::shard::{ShardMsg, WriteResponse};

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
                    true => ShardMsg::ForwardedWrite(cmd, tx),
                    false => ShardMsg::Write(cmd, tx),
                };
                match self.call(s, msg).await? {
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
