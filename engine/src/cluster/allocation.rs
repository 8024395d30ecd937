//! [`RevisionGroup`]: a member's way to the revision allocator of a cluster whose shard leaders
//! live on different members (`engine/SHARDING.md`, "Multi-member clusters with several
//! shards").
//!
//! The allocator ([`revision_group::Allocator`]) runs on the member that leads shard 0, from
//! the moment that shard has applied every entry of its earlier terms (its **epoch** is shard
//! 0's term) until it steps down. Every member reaches it the same way: a request whose grant is
//! handed to a `Deliver` callback. On the allocator's member the request goes to it in-process;
//! elsewhere it travels, with releases and reports, on this member's one `Peer.Revisions`
//! stream to shard 0's leader as this member last saw it ([`super::revision_link`]), which also
//! brings the allocator's resolved facts. A request that cannot be placed (no leader known,
//! another epoch, a transport failure) is answered with no grant, and the shard asks again
//! later.
//!
//! Nothing here blocks a shard thread: remote calls run on the network plane's runtime, and
//! the in-process allocator is behind a lock held only while it computes a grant.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::collections::HashMap;

use ballast_proto::ballastpb::{self, ReleaseRequest, ReportRequest, ReserveRequest, ReserveResponse};
use parking_lot::{Mutex, RwLock};

use super::resolved::Fact;
use super::revision_group::{Allocator, AllocatorConfig, Grant, Release, Report, Request, RoundId};
use super::revision_link::{FactSink, RevisionLinks, Up};
use super::{Membership, PeerRouter};
use crate::clock::Clock;

/// A grant as the asking round receives it, with the allocator's fact when it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Granted {
    /// The grant.
    pub grant: Grant,
    /// What the allocator knew then: a read at `grant.start - 1` waits until this member holds
    /// it.
    pub fact: Fact,
}

/// Where a grant goes; returns false when its round is gone (the grant is then released
/// unused). Called with None when the request could not be placed or the epoch ended.
pub type Deliver = Box<dyn FnOnce(Option<Granted>) -> bool + Send>;

/// A member's side of the revision group (see the module doc).
pub struct RevisionGroup {
    shards: usize,
    cfg: AllocatorConfig,
    clock: Arc<dyn Clock>,
    /// The allocator while this member leads shard 0 with its earlier terms applied.
    allocator: Mutex<Option<Allocator<Deliver>>>,
    /// Shard 0's leader (raft ID, 0: none known) and term as this member last saw them.
    anchor: AtomicU64,
    anchor_term: AtomicU64,
    me: u64,
    cluster_id: u64,
    router: Arc<PeerRouter>,
    membership: Arc<RwLock<Membership>>,
    runtime: tokio::runtime::Handle,
    /// Wakes shard 0's loop when the allocator wants a higher ceiling committed.
    waker: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Told when shard 0's leader or term changes: a request waiting on the previous allocator
    /// (paused, cut off) is given up at once rather than after its call's timeout.
    anchor_moved: tokio::sync::Notify,
    /// This member's streams to the allocator's member.
    links: Arc<RevisionLinks>,
    /// The newest fact of the allocator here, for the `Peer.Revisions` streams it serves.
    facts: tokio::sync::watch::Sender<Option<Fact>>,
    /// Members (raft ID) with a `Peer.Revisions` stream open to this one, and how many: they
    /// take facts from it, not from `Peer.Resolved`.
    fact_streams: Mutex<HashMap<u64, usize>>,
}

impl std::fmt::Debug for RevisionGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevisionGroup")
            .field("anchor", &self.anchor.load(Ordering::Relaxed))
            .field("epoch", &self.epoch())
            .finish()
    }
}

/// Who the group is, at [`RevisionGroup::new`].
#[derive(Debug)]
pub struct GroupMembers {
    /// This member's raft ID.
    pub me: u64,
    /// The cluster ID every peer call carries.
    pub cluster_id: u64,
    /// The peer connections.
    pub router: Arc<PeerRouter>,
    /// The membership (raft ID to member ID).
    pub membership: Arc<RwLock<Membership>>,
    /// The network plane's runtime, for remote calls made from shard threads.
    pub runtime: tokio::runtime::Handle,
}

impl RevisionGroup {
    /// The group of a member of `shards` shards.
    pub fn new(shards: usize, cfg: AllocatorConfig, clock: Arc<dyn Clock>, who: GroupMembers) -> Self {
        let GroupMembers { me, cluster_id, router, membership, runtime } = who;
        let links = Arc::new(RevisionLinks::new(Arc::clone(&router), me));
        Self {
            shards,
            cfg,
            clock,
            allocator: Mutex::new(None),
            anchor: AtomicU64::new(0),
            anchor_term: AtomicU64::new(0),
            me,
            cluster_id,
            router,
            membership,
            runtime,
            waker: std::sync::OnceLock::new(),
            anchor_moved: tokio::sync::Notify::new(),
            links,
            facts: tokio::sync::watch::Sender::new(None),
            fact_streams: Mutex::new(HashMap::new()),
        }
    }

    /// Sets what takes the facts the allocator's member sends down this member's stream to it
    /// (set once, when the network plane is built).
    pub fn set_fact_sink(&self, sink: FactSink) {
        self.links.set_fact_sink(sink);
    }

    /// Sends `fact` (the allocator here) down every `Peer.Revisions` stream this member serves.
    pub fn publish_fact(&self, fact: Fact) {
        self.facts.send_replace(Some(fact));
    }

    /// The facts [`RevisionGroup::publish_fact`] sends, for a stream served here.
    pub fn subscribe_facts(&self) -> tokio::sync::watch::Receiver<Option<Fact>> {
        self.facts.subscribe()
    }

    /// True while member `peer` (raft ID) has a `Peer.Revisions` stream open to this one.
    pub fn has_fact_stream(&self, peer: u64) -> bool {
        self.fact_streams.lock().get(&peer).is_some_and(|n| *n > 0)
    }

    /// Records a `Peer.Revisions` stream from `peer` until the returned guard is dropped.
    pub fn fact_stream(self: &Arc<Self>, peer: u64) -> FactStream {
        *self.fact_streams.lock().entry(peer).or_default() += 1;
        FactStream { group: Arc::clone(self), peer }
    }

    /// Sets what wakes shard 0's loop (set once, when the shards are open).
    pub fn set_waker(&self, wake: Box<dyn Fn() + Send + Sync>) {
        let _ = self.waker.set(wake);
    }

    /// Wakes shard 0 when the allocator here waits for a higher ceiling.
    fn poke(&self) {
        if self.ceiling_wanted().is_some() {
            if let Some(wake) = self.waker.get() {
                wake();
            }
        }
    }

    /// Records shard 0's leader and term as this member sees them (shard 0's loop, every round).
    pub fn note_anchor(&self, leader: u64, term: u64) {
        let old_leader = self.anchor.swap(leader, Ordering::SeqCst);
        let old_term = self.anchor_term.swap(term, Ordering::SeqCst);
        if (old_leader, old_term) != (leader, term) {
            self.anchor_moved.notify_waiters();
        }
    }

    /// The allocator's tunables.
    pub fn config(&self) -> &AllocatorConfig {
        &self.cfg
    }

    /// The allocator's epoch as this member sees it: shard 0's term while it has a leader.
    pub fn seen_epoch(&self) -> Option<u64> {
        (self.anchor.load(Ordering::SeqCst) != 0).then(|| self.anchor_term.load(Ordering::SeqCst))
    }

    /// The epoch of the allocator on this member, if it runs here.
    pub fn epoch(&self) -> Option<u64> {
        self.allocator.lock().as_ref().map(Allocator::epoch)
    }

    /// Starts the allocator of `epoch` here (shard 0 leads with its earlier terms applied), from
    /// the committed `ceiling` and `last`, the highest revision this member has seen.
    pub fn open_epoch(&self, epoch: u64, ceiling: i64, last: i64) {
        let old = self.allocator.lock().replace(Allocator::new(self.cfg, epoch, self.shards, ceiling, last));
        if let Some(mut old) = old {
            refuse(old.drain());
        }
        tracing::info!(epoch, ceiling, last, "revision allocator started");
        self.poke();
    }

    /// Ends the allocator here (shard 0 stepped down): its waiters are refused.
    pub fn close_epoch(&self) {
        let old = self.allocator.lock().take();
        if let Some(mut old) = old {
            tracing::info!(epoch = old.epoch(), "revision allocator stopped");
            refuse(old.drain());
        }
    }

    /// A ceiling shard 0 should commit, when the allocator here wants one.
    pub fn ceiling_wanted(&self) -> Option<i64> {
        self.allocator.lock().as_ref().and_then(Allocator::ceiling_wanted)
    }

    /// Takes a ceiling shard 0 committed while this member's allocator runs.
    pub fn ceiling_committed(&self, epoch: u64, ceiling: i64) {
        let now = self.clock.now();
        self.with_local(epoch, |a| a.ceiling_committed(ceiling, now));
    }

    /// Abandons a holder past its deadline (called every `resolved_interval`).
    pub fn tick(&self) {
        let now = self.clock.now();
        let grants = match self.allocator.lock().as_mut() {
            Some(a) => a.tick(now),
            None => return,
        };
        self.deliver_all(grants);
    }

    /// The allocator's fact, when it runs here.
    pub fn fact(&self) -> Option<Fact> {
        self.allocator.lock().as_ref().and_then(Allocator::fact)
    }

    /// Asks for `want` revisions for round `id` (or, with `want` 0, where the cluster stands;
    /// `hold` keeps the counter until released). The grant goes to `deliver`.
    pub fn request(self: &Arc<Self>, id: RoundId, want: i64, hold: bool, deliver: Deliver) {
        let Some(epoch) = self.seen_epoch() else {
            deliver(None);
            return;
        };
        if self.anchor.load(Ordering::SeqCst) == self.me {
            let now = self.clock.now();
            let req = Request { id, want, hold, waiter: deliver };
            let mut guard = self.allocator.lock();
            match guard.as_mut().filter(|a| a.epoch() == epoch) {
                Some(a) => {
                    let grants = a.request(req, now);
                    drop(guard);
                    self.deliver_all(grants);
                }
                None => {
                    drop(guard);
                    (req.waiter)(None);
                }
            }
            return;
        }
        let Some(anchor) = self.anchor_peer() else {
            deliver(None);
            return;
        };
        let msg = ReserveRequest { cluster_id: self.cluster_id, epoch, id: Some(round_to_wire(id)), want, hold };
        let group = Arc::clone(self);
        let limit = self.cfg.grant_timeout * 2 + self.cfg.call_slack;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.links.send(&self.runtime, anchor, Up::Reserve(msg, tx));
        self.runtime.spawn(async move {
            // Registered before the epoch is looked at again, so a move in between is not missed.
            let moved = group.anchor_moved.notified();
            let granted = if group.seen_epoch() != Some(epoch) {
                None
            } else {
                tokio::select! {
                    answer = tokio::time::timeout(limit, rx) => match answer {
                        Ok(Ok(Some(resp))) => Some(from_wire(id, &resp)),
                        _ => None,
                    },
                    () = moved => None,
                }
            };
            let release = granted.as_ref().map(|g| Release { epoch: g.grant.epoch, id, used: 0, index: 0 });
            if !deliver(granted) {
                if let Some(rel) = release {
                    group.release(rel);
                }
            }
        });
    }

    /// Returns a round's grant.
    pub fn release(&self, rel: Release) {
        if self.epoch() == Some(rel.epoch) {
            let now = self.clock.now();
            self.with_local(rel.epoch, |a| a.release(rel, now));
            return;
        }
        let Some(anchor) = self.anchor_peer() else { return };
        let msg = ReleaseRequest {
            cluster_id: self.cluster_id,
            epoch: rel.epoch,
            id: Some(round_to_wire(rel.id)),
            used: rel.used,
            index: rel.index,
        };
        self.links.send(&self.runtime, anchor, Up::Release(msg));
    }

    /// Sends a shard leader's report to the allocator.
    pub fn report(&self, rep: Report) {
        if self.epoch() == Some(rep.epoch) {
            let now = self.clock.now();
            self.with_local(rep.epoch, |a| a.report(rep, now));
            return;
        }
        let Some(anchor) = self.anchor_peer() else { return };
        let msg = ReportRequest {
            cluster_id: self.cluster_id,
            epoch: rep.epoch,
            shard: rep.shard,
            term: rep.term,
            done_through: rep.done_through,
            index: rep.index,
        };
        self.links.send(&self.runtime, anchor, Up::Report(msg));
    }

    /// Serves `Peer.Reserve`: waits for the grant of the allocator here. None when it does not
    /// run here in the asked epoch, or the grant did not come in time.
    pub async fn serve_reserve(self: &Arc<Self>, req: ReserveRequest) -> Option<ReserveResponse> {
        let id = round_from_wire(req.id.as_ref());
        if self.epoch() != Some(req.epoch) {
            return None;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let deliver: Deliver = Box::new(move |g| tx.send(g).is_ok());
        let now = self.clock.now();
        let grants = {
            let mut guard = self.allocator.lock();
            let a = guard.as_mut().filter(|a| a.epoch() == req.epoch)?;
            a.request(Request { id, want: req.want, hold: req.hold, waiter: deliver }, now)
        };
        self.deliver_all(grants);
        let granted = tokio::time::timeout(self.cfg.grant_timeout * 2, rx).await.ok()?.ok()??;
        Some(ReserveResponse {
            epoch: granted.grant.epoch,
            start: granted.grant.start,
            count: granted.grant.count,
            resolved: granted.fact.revision,
            applied_index: granted.fact.applied,
        })
    }

    /// Serves `Peer.Release`.
    pub fn serve_release(&self, req: &ReleaseRequest) {
        let rel = Release { epoch: req.epoch, id: round_from_wire(req.id.as_ref()), used: req.used, index: req.index };
        let now = self.clock.now();
        self.with_local(req.epoch, |a| a.release(rel, now));
    }

    /// Serves `Peer.Report`.
    pub fn serve_report(&self, req: &ReportRequest) {
        let rep = Report {
            epoch: req.epoch,
            shard: req.shard,
            term: req.term,
            done_through: req.done_through,
            index: req.index,
        };
        let now = self.clock.now();
        self.with_local(req.epoch, |a| a.report(rep, now));
    }

    /// Runs `f` on the allocator here when it is of `epoch`, then delivers the grants it made.
    fn with_local(&self, epoch: u64, f: impl FnOnce(&mut Allocator<Deliver>) -> Vec<(Deliver, Grant)>) {
        let grants = match self.allocator.lock().as_mut().filter(|a| a.epoch() == epoch) {
            Some(a) => f(a),
            None => return,
        };
        self.deliver_all(grants);
    }

    /// Hands out grants, outside the allocator's lock; a grant whose round is gone is released
    /// unused at once, which may make more grants.
    fn deliver_all(&self, grants: Vec<(Deliver, Grant)>) {
        self.deliver_grants(grants);
        self.poke();
    }

    fn deliver_grants(&self, mut grants: Vec<(Deliver, Grant)>) {
        while !grants.is_empty() {
            let fact = self.fact().unwrap_or(Fact { revision: 0, applied: Vec::new() });
            let mut more = Vec::new();
            for (deliver, grant) in grants {
                if !deliver(Some(Granted { grant, fact: fact.clone() })) {
                    let now = self.clock.now();
                    let rel = Release { epoch: grant.epoch, id: grant.id, used: 0, index: 0 };
                    if let Some(a) = self.allocator.lock().as_mut().filter(|a| a.epoch() == grant.epoch) {
                        more.extend(a.release(rel, now));
                    }
                }
            }
            grants = more;
        }
    }

    /// Shard 0's leader (raft ID) when it is a known peer.
    fn anchor_peer(&self) -> Option<u64> {
        // Peer connections are known by raft ID (see `PeerRouter::add_peer`).
        let leader = self.anchor.load(Ordering::SeqCst);
        self.membership.read().by_raft_id(leader)?;
        self.router.client(leader).map(|_| leader)
    }
}

/// A `Peer.Revisions` stream served by this member, counted while it is open.
#[derive(Debug)]
pub struct FactStream {
    group: Arc<RevisionGroup>,
    peer: u64,
}

impl Drop for FactStream {
    fn drop(&mut self) {
        let mut streams = self.group.fact_streams.lock();
        if let Some(n) = streams.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                streams.remove(&self.peer);
            }
        }
    }
}

fn refuse(waiters: Vec<Deliver>) {
    for w in waiters {
        w(None);
    }
}

fn round_to_wire(id: RoundId) -> ballastpb::RoundId {
    ballastpb::RoundId { shard: id.shard, term: id.term, round: id.round }
}

fn round_from_wire(id: Option<&ballastpb::RoundId>) -> RoundId {
    id.map_or(RoundId { shard: 0, term: 0, round: 0 }, |i| RoundId { shard: i.shard, term: i.term, round: i.round })
}

fn from_wire(id: RoundId, r: &ReserveResponse) -> Granted {
    Granted {
        grant: Grant { epoch: r.epoch, id, start: r.start, count: r.count },
        fact: Fact { revision: r.resolved, applied: r.applied_index.clone() },
    }
}
