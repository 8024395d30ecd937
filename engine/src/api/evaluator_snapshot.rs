//! A snapshot of every shard taken by the member that evaluates (leads every shard), streamed
//! to this one: what `Maintenance.Snapshot` answers on a member whose shards are replicated.

use super::context::{from_peer_status, ApiContext};
use super::maintenance;
use crate::error::{EngineError, Result};

impl ApiContext {
    /// Streams a snapshot taken by the member that leads every shard (see `maintenance`).
    ///
    /// # Errors
    /// No such member is known, or it refused.
    pub async fn snapshot_from_evaluator(&self) -> Result<maintenance::SnapshotChunks> {
        use futures::StreamExt as _;
        let leader = self.first().leader();
        let Some(mut client) = (leader != 0).then(|| self.router.client(leader)).flatten() else {
            return Err(EngineError::NoLeader);
        };
        let req = ballast_proto::ballastpb::HelloRequest { cluster_id: self.member.cluster_id, from: self.member.id };
        let stream = client.snapshot(req).await.map_err(from_peer_status)?.into_inner();
        Ok(Box::pin(stream.map(|chunk| chunk)))
    }
}
