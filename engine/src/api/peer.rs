//! The `ballastpb.Peer` service on the peer port: what other members of the cluster send this
//! one (see `proto/peer.proto` and `crate::cluster`).
//!
//! * Raft message batches do not come through gRPC but on raft connections of the same port
//!   (`super::peer_raft`); each batch's messages go to their shards' mailboxes as one message
//!   per shard (`try_send`: a full mailbox drops them, raft resends). The same batches carry
//!   writes sent on to shards this member leads, each handed to its shard, which sends the
//!   answer back on this member's raft connection once the write is applied, and the answers
//!   to writes this member sent on, handed to their writers (`cluster::forwarding`).
//! * `Hello`: who this member is (name, client URLs) for the caller's MemberList.
//! * `Forward`: a lease call, membership change or (on a cluster of several shards) a
//!   linearizable read for a shard this member leads, from a member that does not; answered
//!   with etcd's status on failure, which the caller passes to its client.
//! * `Members`: the membership, for a member joining the cluster.
//! * `Reserve`, `Release`, `Report`: the revision allocator's side of a cluster whose shard
//!   leaders are spread (`cluster::allocation`); `Revisions` carries the same for all shards of
//!   one member on one stream (`cluster::revision_link` is the sending side), and takes the
//!   allocator's resolved facts back to it.
//!
//! Every call carries the caller's cluster ID; a caller of another cluster is refused with
//! FailedPrecondition "cluster ID mismatch" and logged, as etcd refuses such peers.

use std::collections::HashMap;

use std::path::Path;
use std::pin::Pin;

use ballast_proto::ballastpb::{
    forward_request, peer_server::Peer, revision_item, ForwardItem, ForwardRequest, ForwardResponse, HelloRequest,
    HelloResponse, MembershipRecord, RaftBatch, RaftBatchAck, ReleaseRequest, ReportRequest, ReserveRequest,
    ReserveResponse, ResolvedRevision, RevisionAnswer, RevisionAnswers, RevisionBatch, SnapshotFetchRequest,
};
use ballast_proto::etcdserverpb::SnapshotResponse;
use ballast_raft::Message;
use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, Stream, StreamExt as _};
use prost_011::Message as _;
use tonic::{Request, Response, Status, Streaming};

use super::Api;
use crate::cluster::resolved::Fact;
use crate::error::EngineError;
use crate::shard::{ShardMsg, WriteReply};
use crate::storage::RocksBackend;

/// Serves the peer RPCs.
#[derive(Debug, Clone)]
pub struct PeerService {
    api: Api,
}

impl PeerService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { api }
    }

    fn check_cluster(&self, remote: u64, from: u64) -> Result<(), Status> {
        let local = self.api.member.cluster_id;
        if remote == local {
            return Ok(());
        }
        tracing::warn!(
            local_cluster = format_args!("{local:x}"),
            remote_cluster = format_args!("{remote:x}"),
            remote_member = format_args!("{from:x}"),
            "request cluster ID mismatch; refused a peer of another cluster"
        );
        Err(EngineError::ClusterIdMismatch { local, remote }.into())
    }

    /// Takes one batch of raft messages from a peer's raft connection (`peer_raft`): checks it
    /// is meant for this cluster and this member, and hands its messages to their shards.
    ///
    /// # Errors
    /// The batch is from another cluster or for another member: the connection is refused.
    pub(super) fn take_raft(&self, batch: RaftBatch) -> Result<(), Status> {
        self.check_cluster(batch.cluster_id, batch.from)?;
        // Batches are addressed by raft ID, which is not the member ID for a member
        // bootstrapped alone (`cluster::members`).
        let me = self.api.raft_id();
        if batch.to != me {
            return Err(Status::failed_precondition(format!(
                "raft messages for raft ID {:x} reached member {:x} (raft ID {me:x})",
                batch.to, self.api.member.id
            )));
        }
        self.deliver(batch);
        Ok(())
    }

    /// The raft connection from the member with raft ID `from` ended: the shards hear that it is
    /// unreachable, and the writes this member sent on to it will get no answer.
    pub(super) fn peer_gone(&self, from: u64) {
        self.api.router.report_unreachable(from);
        self.api.router.connection_lost(from);
    }

    /// Returns the member's peer connection settings.
    pub(super) fn cluster_config(&self) -> &crate::cluster::ClusterConfig {
        self.api.router.config()
    }

    fn deliver(&self, batch: RaftBatch) {
        let mut by_shard: HashMap<u32, Vec<Message>> = HashMap::new();
        for m in batch.messages {
            match Message::decode(m.message.as_ref()) {
                Ok(msg) => by_shard.entry(m.shard).or_default().push(msg),
                Err(e) => tracing::warn!(error = %e, shard = m.shard, "undecodable raft message dropped"),
            }
        }
        for (shard, msgs) in by_shard {
            match self.api.shards.get(shard as usize) {
                Some(sh) => {
                    if sh.send(ShardMsg::Raft(msgs)).is_err() {
                        tracing::debug!(shard, "shard mailbox full; raft messages dropped");
                    }
                }
                None => tracing::warn!(shard, "raft messages for a shard this member does not have"),
            }
        }
        if !batch.writes.is_empty() {
            self.take_writes(batch.from, batch.writes);
        }
        if !batch.answers.is_empty() {
            self.api.router.take_answers(batch.answers);
        }
    }

    /// Hands writes member `from` sent on to their shards, which answer once they are applied;
    /// one that cannot reach its shard is answered at once.
    fn take_writes(&self, from: u64, writes: Vec<ForwardItem>) {
        let mut refused = Vec::new();
        for item in writes {
            let id = item.id;
            let Some(cmd) = item.write.and_then(|w| w.command) else {
                refused.push((id, Err(EngineError::Remote(super::unexpected("an empty forwarded write")))));
                continue;
            };
            let Some(shard) = self.api.shards.get(item.shard as usize) else {
                refused
                    .push((id, Err(EngineError::Remote(Status::invalid_argument(format!("no shard {}", item.shard))))));
                continue;
            };
            if let Err(e) = shard.send(ShardMsg::ForwardedWrite(cmd, WriteReply::Peer { to: from, id })) {
                refused.push((id, Err(e)));
            }
        }
        if !refused.is_empty() {
            super::forwarded::send_answers(&self.api.router, from, refused, 0);
        }
    }

    /// Serves a request sent on by another member on shard `shard`, which this member must
    /// lead; `empty` is the refusal of a message that carries no request.
    async fn serve_on_leader(
        &self,
        shard: u32,
        request: Option<forward_request::Request>,
        empty: &'static str,
    ) -> Result<ForwardResponse, Status> {
        if shard as usize >= self.api.shards.len() {
            return Err(Status::invalid_argument(format!("no shard {shard}")));
        }
        let request = request.ok_or_else(|| Status::invalid_argument(empty))?;
        if !self.api.shard(shard).is_leader() {
            return Err(EngineError::NotLeader.into());
        }
        let (answer, applied_index) = self.api.serve_forwarded(shard, request, true).await?;
        Ok(ForwardResponse { applied_index, response: Some(answer) })
    }
}

impl PeerService {
    /// Serves one `Revisions` stream until the sender closes it: releases and reports are
    /// taken in order, each request waits for its grant without holding up the rest, the
    /// grants ready together go back in one message, and so does each new fact of the
    /// allocator here.
    async fn serve_revisions(self, mut inbound: Streaming<RevisionBatch>, out: RevisionSender) {
        let Some(group) = self.api.revisions.clone() else {
            let _ = out.send(Err(EngineError::NotCapable.into())).await;
            return;
        };
        let mut facts = group.subscribe_facts();
        // The newest fact goes down a new stream at once, not only the next one.
        facts.mark_changed();
        let mut pending = FuturesUnordered::new();
        let mut stream = None;
        let mut open = true;
        loop {
            tokio::select! {
                got = inbound.message(), if open => match got {
                    Ok(Some(batch)) => {
                        if let Err(status) = self.check_cluster(batch.cluster_id, batch.from) {
                            let _ = out.send(Err(status)).await;
                            return;
                        }
                        if stream.is_none() {
                            stream = Some(group.fact_stream(batch.from));
                        }
                        for item in batch.items {
                            match item.item {
                                Some(revision_item::Item::Reserve(r)) => {
                                    let group = std::sync::Arc::clone(&group);
                                    let id = item.id;
                                    pending.push(async move { RevisionAnswer { id, granted: group.serve_reserve(r).await } });
                                }
                                Some(revision_item::Item::Release(r)) => group.serve_release(&r),
                                Some(revision_item::Item::Report(r)) => group.serve_report(&r),
                                None => {}
                            }
                        }
                    }
                    Ok(None) | Err(_) => open = false,
                },
                Some(first) = pending.next(), if !pending.is_empty() => {
                    let mut answers = vec![first];
                    while let Some(Some(a)) = pending.next().now_or_never() {
                        answers.push(a);
                    }
                    if out.send(Ok(RevisionAnswers { answers, fact: None })).await.is_err() {
                        return;
                    }
                }
                changed = facts.changed(), if open => {
                    if changed.is_err() {
                        open = false;
                        continue;
                    }
                    let fact = facts.borrow_and_update().clone();
                    let Some(f) = fact else { continue };
                    let fact = ResolvedRevision {
                        cluster_id: self.api.member.cluster_id,
                        revision: f.revision,
                        applied_index: f.applied,
                    };
                    if out.send(Ok(RevisionAnswers { answers: Vec::new(), fact: Some(fact) })).await.is_err() {
                        return;
                    }
                }
                else => return,
            }
        }
    }
}

/// Where a `Revisions` stream's answers go.
type RevisionSender = tokio::sync::mpsc::Sender<Result<RevisionAnswers, Status>>;

/// Answer messages queued on one `Revisions` stream ahead of what HTTP/2 has sent: 16 as
/// `ClusterConfig::stream_window`, enough to keep the stream busy; past it the allocator's grants
/// to the member wait for it to read.
const REVISION_ANSWERS_WINDOW: usize = 16;

#[tonic::async_trait]
impl Peer for PeerService {
    async fn hello(&self, req: Request<HelloRequest>) -> Result<Response<HelloResponse>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, r.from)?;
        Ok(Response::new(HelloResponse {
            cluster_id: self.api.member.cluster_id,
            member_id: self.api.member.id,
            name: self.api.member.name.clone(),
            client_urls: self.api.member.client_urls.clone(),
        }))
    }

    async fn members(&self, req: Request<HelloRequest>) -> Result<Response<MembershipRecord>, Status> {
        let r = req.into_inner();
        // A joining member does not know the cluster ID yet and sends 0.
        if r.cluster_id != 0 {
            self.check_cluster(r.cluster_id, r.from)?;
        }
        let mut record = self.api.membership.read().to_record();
        record.shards = self.api.shards.len() as u32;
        record.leader_placement = self.api.placement.mode();
        Ok(Response::new(record))
    }

    type FetchSnapshotStream = Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send + 'static>>;

    async fn fetch_snapshot(
        &self,
        req: Request<SnapshotFetchRequest>,
    ) -> Result<Response<Self::FetchSnapshotStream>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, 0)?;
        let dir = crate::raft_snapshot::checkpoint_dir(&self.api.snapshot_dir, r.shard, r.index);
        if !dir.is_dir() {
            return Err(Status::not_found(format!("no checkpoint of shard {} at index {}", r.shard, r.index)));
        }
        // Four chunks in flight: the disk and the network stay busy without the state being
        // held in memory.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let shard = self.api.shard(r.shard).clone();
        tokio::task::spawn_blocking(move || {
            use crate::clock::Clock as _;
            let clock = crate::clock::SystemClock;
            let started = clock.now();
            let result = send_state(&dir, &tx);
            let sent = result.is_ok() && !tx.is_closed();
            if let Ok((entries, bytes)) = &result {
                tracing::info!(
                    shard = r.shard,
                    index = r.index,
                    to = format_args!("{:x}", r.from),
                    entries,
                    bytes,
                    complete = sent,
                    ms = clock.now().saturating_duration_since(started).as_millis() as u64,
                    "snapshot state sent"
                );
            }
            if let Err(e) = result {
                let _ = tx.blocking_send(Err(Status::unavailable(format!("snapshot state: {e}"))));
            }
            // Raft sends the follower appends again only once it hears how the transfer ended.
            let _ = shard.send(ShardMsg::SnapshotStatus(r.from, sent));
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    type SnapshotStream = super::maintenance::SnapshotChunks;

    async fn snapshot(&self, req: Request<HelloRequest>) -> Result<Response<Self::SnapshotStream>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, r.from)?;
        if !self.api.evaluates() {
            return Err(EngineError::NotLeader.into());
        }
        use ballast_proto::etcdserverpb::maintenance_server::Maintenance as _;
        let service = super::maintenance::MaintenanceService::new(self.api.clone());
        service.snapshot(Request::new(ballast_proto::etcdserverpb::SnapshotRequest {})).await
    }

    async fn resolved(&self, req: Request<ResolvedRevision>) -> Result<Response<RaftBatchAck>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, 0)?;
        if r.applied_index.len() == self.api.shards.len() {
            self.api.resolution.offer(Fact { revision: r.revision, applied: r.applied_index });
        }
        Ok(Response::new(RaftBatchAck {}))
    }

    async fn reserve(&self, req: Request<ReserveRequest>) -> Result<Response<ReserveResponse>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, 0)?;
        let Some(group) = &self.api.revisions else { return Err(EngineError::NotCapable.into()) };
        match group.serve_reserve(r).await {
            Some(resp) => Ok(Response::new(resp)),
            None => Err(EngineError::NotLeader.into()),
        }
    }

    async fn release(&self, req: Request<ReleaseRequest>) -> Result<Response<RaftBatchAck>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, 0)?;
        if let Some(group) = &self.api.revisions {
            group.serve_release(&r);
        }
        Ok(Response::new(RaftBatchAck {}))
    }

    async fn report(&self, req: Request<ReportRequest>) -> Result<Response<RaftBatchAck>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, 0)?;
        if let Some(group) = &self.api.revisions {
            group.serve_report(&r);
        }
        Ok(Response::new(RaftBatchAck {}))
    }

    type RevisionsStream = Pin<Box<dyn Stream<Item = Result<RevisionAnswers, Status>> + Send + 'static>>;

    async fn revisions(
        &self,
        req: Request<Streaming<RevisionBatch>>,
    ) -> Result<Response<Self::RevisionsStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(REVISION_ANSWERS_WINDOW);
        tokio::spawn(self.clone().serve_revisions(req.into_inner(), tx));
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn forward(&self, req: Request<ForwardRequest>) -> Result<Response<ForwardResponse>, Status> {
        let r = req.into_inner();
        self.check_cluster(r.cluster_id, 0)?;
        Ok(Response::new(self.serve_on_leader(r.shard, r.request, "empty forwarded request").await?))
    }
}

/// Bytes of one `FetchSnapshot` message. 1 MiB: a gigabyte in a thousand messages rather than
/// the thirty thousand of etcd's 32 KiB (each costs a wakeup on both sides), well under the
/// 4 MiB a peer client decodes.
const STATE_CHUNK: usize = 1 << 20;

/// Entries of a raft snapshot's state read ahead of the stream: two keep the reader busy while
/// the stream sends one, a few MiB at most.
const STATE_ENTRIES_AHEAD: usize = 2;

/// Reads the shard's state from the checkpoint at `checkpoint` on one thread
/// ([`crate::raft_snapshot::cut`]) while this one streams its entries as they come, so reading
/// and sending overlap, nothing is written to disk and memory holds a few entries. Answers the
/// entries and bytes handed to the stream; Ok also when the client went away.
fn send_state(checkpoint: &Path, tx: &super::maintenance::ChunkSender) -> crate::error::Result<(usize, u64)> {
    use super::maintenance::Entry;
    let (entries_tx, entries_rx) =
        std::sync::mpsc::sync_channel::<std::io::Result<(String, Entry)>>(STATE_ENTRIES_AHEAD);
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            let cut = crate::raft_snapshot::cut::<RocksBackend>(checkpoint, &mut |name, pairs| {
                entries_tx.send(Ok((name, Entry::Bytes(pairs)))).map_err(|_| EngineError::Stopped)
            });
            if let Err(e) = &cut {
                let _ = entries_tx.send(Err(std::io::Error::other(e.to_string())));
            }
            cut
        });
        let (mut count, mut bytes): (usize, u64) = (0, 0);
        let entries = entries_rx.into_iter().inspect(|entry| {
            if let Ok((_, Entry::Bytes(pairs))) = entry {
                count += 1;
                bytes += pairs.len() as u64;
            }
        });
        let streamed = super::maintenance::stream_files(entries, 0, STATE_CHUNK, None, tx);
        let cut = reader.join().unwrap_or(Err(EngineError::Stopped));
        streamed.map_err(|e| EngineError::from(crate::storage::StorageError::from(e)))?;
        match cut {
            Err(EngineError::Stopped) if tx.is_closed() => Ok((count, bytes)),
            other => other.map(|()| (count, bytes)),
        }
    })
}
