//! Watch: etcd's watch streams, served from the shard that owns the keys.
//!
//! Reading order: [`wire`] (events encoded once and shared by every response that carries
//! them), [`ring`] (recent events with their previous values), `watcher` (one watch, packed), `table` (a stream's watchers by ID and their key arena), `index` (synced watchers by
//! key, with `interval` for general ranges), then [`WatchHub`].
//!
//! # Model
//! A client stream (one gRPC `Watch` call) multiplexes watchers. Each stream has one bounded
//! outgoing channel; the hub is its only writer, so created/canceled/progress responses and
//! events leave in the order the hub decides. Each watcher remembers `next_rev`, the first
//! revision it has not been sent.
//!
//! # Synced and lagging watchers
//! A watcher that has been sent everything up to the hub's revision is *synced* and sits in the
//! hub's index by the keys it watches (etcd's synced `watcherGroup`): a round's events find their
//! watchers there, so a round costs its events times the watchers they match, and a watcher no
//! event touches costs nothing, not even a move of its `next_rev` (the index stands for its
//! position). A watcher that cannot be sent its events (its stream is full) leaves the index with
//! its exact `next_rev` and *lags*; `catch_up` serves it from the ring or from history and puts it
//! back in the index once it reaches the current revision. So does a watcher created with a
//! start revision in the past. One created with a start revision ahead of the store is indexed at
//! once and skips events below its start.
//!
//! # Batches
//! What one round (a publish, or a catch-up pass) has for a stream goes into the stream's channel
//! as one [`Outgoing`] batch: a stream multiplexing a thousand watchers of one resource, as
//! kube-apiserver's streams do, takes one channel slot and one wake-up per round, not a thousand.
//!
//! # Slow consumers
//! Events are pushed with `try_send` only. A stream holds at most [`WatchConfig::stream_buffer`]
//! batches, and its events are budgeted: about [`WatchConfig::queued_events_per_watcher`] per
//! watcher of the stream (a response counts as one more), counted when the hub sends a batch and
//! given back when the network plane takes it ([`WatchReceiver`]). A watcher whose events do not
//! fit is not dropped and nothing waits: it simply stays behind (`next_rev` unchanged) and is
//! caught up later from the ring, or from history in the backend once the ring has moved on, in
//! responses of at most [`WatchConfig::catchup_batch_events`]. A stream with nothing queued
//! always takes one response, however large, so no watcher starves behind the budget; so what a
//! stream holds is its budget plus at most one response. Only a watcher whose `next_rev` falls
//! below the compacted revision is canceled, with `compact_revision`, exactly as etcd does.
//!
//! Control responses (created, canceled, progress) that find the channel full wait in a
//! per-stream queue of compact records (watch ID, kind, revision: 32 bytes; the response is built
//! when it is written); no event is sent on a stream while the queue is non-empty, so a `created`
//! response always precedes its watcher's events. The queue is bounded by *control credits*, as
//! etcd bounds its control channel and blocks its receive loop: the request side of a stream
//! spends one credit per request it forwards (create, cancel, progress) and waits when it has
//! none, so it stops reading a client that does not read its responses, and HTTP/2 flow control
//! pushes back on that client. The hub grants [`WatchConfig::control_credits`] when it opens the
//! stream and gives a credit back when a request's response enters the channel, or at once when
//! the request is answered by nothing (a cancel of an unknown ID, a progress request merged with
//! one already waiting). The only records not paid for by a credit are compaction cancels, one
//! per watcher at most, each replacing the watcher it ends.

mod index;
mod interval;
pub mod ring;
mod table;
mod watcher;
pub mod wire;

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ballast_proto::etcdserverpb::WatchCreateRequest;
use ballast_proto::mvccpb::Event;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::Semaphore;

use crate::error::Result;
use crate::header::HeaderInfo;
use crate::mvcc::MvccStore;
use crate::storage::KvBackend;
pub use index::StreamId;
use index::{SyncedIndex, WatcherRef};
use ring::EventRing;
use table::WatcherTable;
use watcher::{ArenaFull, Watcher};
use wire::{EncodedEvent, EncodedHeader, Events, WireEvent, WireResponse};

/// etcd's cancel reason for a duplicate client-chosen watch ID.
pub const DUPLICATE_WATCH_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";

/// Cancel reason for a create whose keys would take the stream's watchers' keys past 4 GiB (the
/// key arena's 32-bit offsets; see `table`). etcd has no such limit; no real client comes near it.
pub const WATCH_KEYS_FULL: &str = "ballast: the watch keys of this stream exceed 4 GiB; open another stream";

/// What a stream's channel carries: the responses of one round for that stream, in order (see
/// the module doc). A channel slot is the vector itself, three words: the channel allocates its
/// slots in blocks of 32 and keeps them for the stream's life, so a slot holding a response
/// (112 bytes) cost an idle stream about 7 KiB.
pub type Outgoing = Vec<WireResponse>;

/// Returns what a batch counts against its stream's event budget: its events, and one per
/// response.
fn weight(batch: &[WireResponse]) -> usize {
    batch.iter().map(|r| 1 + r.events.len()).sum()
}

/// The hub's side of a watch stream: the bounded channel its responses go to, the stream's
/// queued events, and the stream's control credits (see the module doc), which the hub grants
/// and gives back.
#[derive(Clone, Debug)]
pub struct WatchSender {
    tx: mpsc::Sender<Outgoing>,
    queued: Arc<AtomicUsize>,
    credits: Arc<Semaphore>,
    lag: Arc<AtomicI64>,
}

/// The network plane's side of a watch stream: yields the hub's batches and gives their events
/// back to the stream's budget as it takes them.
#[derive(Debug)]
pub struct WatchReceiver {
    rx: mpsc::Receiver<Outgoing>,
    queued: Arc<AtomicUsize>,
}

impl WatchReceiver {
    /// Takes the next batch if one is queued, without waiting.
    pub fn try_recv(&mut self) -> Option<Outgoing> {
        let batch = self.rx.try_recv().ok()?;
        self.queued.fetch_sub(weight(&batch), Ordering::Relaxed);
        Some(batch)
    }
}

impl futures::Stream for WatchReceiver {
    type Item = Outgoing;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Outgoing>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(batch)) = &polled {
            self.queued.fetch_sub(weight(batch), Ordering::Relaxed);
        }
        polled
    }
}

impl WatchSender {
    /// Resolves once the client's side of the stream is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Returns the stream's *lag mark*: `NOT_LAGGING` while every watcher of the stream is in
    /// the hub's index (sent everything the shard has published), else a revision up to which
    /// every watcher of the stream has been sent everything. Merging the streams of several
    /// shards in revision order needs it (`api::watch_shards`).
    pub fn lag_mark(&self) -> Arc<AtomicI64> {
        Arc::clone(&self.lag)
    }
}

/// A lag mark's value while no watcher of the stream lags.
pub const NOT_LAGGING: i64 = i64::MAX;

/// The request side's share of a stream's control credits: one is spent per create, cancel or
/// progress request forwarded to the hub.
#[derive(Clone, Debug)]
pub struct ControlCredits(Arc<Semaphore>);

impl ControlCredits {
    /// Waits for a credit and spends it. Returns false once the hub has closed the stream.
    pub async fn spend(&self) -> bool {
        match self.0.acquire().await {
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        }
    }

    /// Spends a credit if one is available now.
    pub fn try_spend(&self) -> bool {
        self.0.try_acquire().map(|p| p.forget()).is_ok()
    }
}

/// Returns a new stream's channel: the sender the hub writes with (handed over when the stream
/// is opened), the receiver the client's responses come from (`buffer` batches of them), and the
/// request side's credits. There are no credits until the hub opens the stream.
pub fn stream_channel(buffer: usize) -> (WatchSender, WatchReceiver, ControlCredits) {
    let (tx, rx) = mpsc::channel(buffer.max(1));
    let queued = Arc::new(AtomicUsize::new(0));
    let credits = Arc::new(Semaphore::new(0));
    let lag = Arc::new(AtomicI64::new(NOT_LAGGING));
    let sender = WatchSender { tx, queued: queued.clone(), credits: credits.clone(), lag };
    (sender, WatchReceiver { rx, queued }, ControlCredits(credits))
}

/// Tunables of watch delivery.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// Events kept in the per-shard ring. 65,536 covers several seconds of a busy control plane
    /// (kube-apiserver's watch cache keeps 100 to 1,000 events per resource) while staying a few
    /// MiB; older resumes read history from the backend.
    pub ring_events: usize,
    /// Most bytes the ring's events hold, values and previous values included. By count alone,
    /// 65,536 events of large objects (a CustomResourceDefinition of hundreds of KB, each write
    /// an event with its previous value) held GBs: creating and deleting 60 KB definitions grew
    /// a member by 1.6 MB a cycle. 64 MiB holds the count's worth of small writes and a few
    /// hundred of the largest; a watcher resuming before the ring reads history from the
    /// backend, as past the count.
    pub ring_bytes: usize,
    /// Batches (one per round at most, see the module doc) buffered per stream before its
    /// watchers start lagging. 64 rounds absorb a burst of small writes; the event budget below
    /// is what bounds the memory.
    pub stream_buffer: usize,
    /// Events (a response counts as one) a stream may have queued per watcher, with a floor of
    /// `stream_buffer`, before further events wait in the ring for its watchers to catch up. 16
    /// lets a stream of a thousand watchers on one resource take a burst of 16 writes without
    /// falling back to catch-up, and keeps what a stalled client pins to about 16 responses'
    /// worth per watcher (the events' bytes themselves are shared with the ring).
    pub queued_events_per_watcher: usize,
    /// Control requests (create, cancel, progress) a stream may have in flight, from being read
    /// off the client's stream until their response enters the stream's channel; the stream's
    /// requests are not read while none is left (see the module doc). This bounds what a burst
    /// of creates holds on the server: without it, a client opening thousands of watchers at
    /// once queued one response per watcher, and the allocator kept those pages after the queue
    /// drained. etcd bounds the same path at 16 responses; 64, one channel's worth, keeps the
    /// channel full while the next requests are read, so registering at full speed costs
    /// nothing. At least 1.
    pub control_credits: usize,
    /// Most events per catch-up response (a revision is never split, so one may exceed it).
    /// 1,000 keeps a catch-up response near etcd's own batching and below 1.5 MiB for
    /// Kubernetes-sized objects.
    pub catchup_batch_events: usize,
    /// How often watchers created with `progress_notify` get a notification when idle. etcd's
    /// default is 10 minutes.
    pub progress_notify_interval: Duration,
    /// Size above which `fragment` watchers get split responses (etcd: max-request-bytes).
    pub max_response_bytes: usize,
    /// How often a client stream over several shards looks at them again while it holds a
    /// watcher's events back for a shard that has sent nothing (`api::watch_shards`). 2 ms adds
    /// at most that to such an event's delivery, against a shard round of a few ms, and costs a
    /// timer wake-up per holding stream only while it holds.
    pub merge_tick: Duration,
    /// Batches a client stream over several shards holds for its client (`api::watch_shards`;
    /// one per turn of its merge, each with everything that turn released). 4 keeps the client
    /// busy while the merge prepares the next; a client that reads slower stops the merge, which
    /// leaves the shards' channels full, and their event budgets take over.
    pub merge_buffer: usize,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            ring_events: 65_536,
            ring_bytes: 64 << 20,
            stream_buffer: 64,
            queued_events_per_watcher: 16,
            control_credits: 64,
            catchup_batch_events: 1_000,
            progress_notify_interval: Duration::from_secs(600),
            max_response_bytes: 1_572_864,
            merge_tick: Duration::from_millis(2),
            merge_buffer: 4,
        }
    }
}

/// A control response waiting for room in a stream's channel. The response is built from it when
/// it is written, with the header's cluster, member and term of that moment.
#[derive(Clone, Copy, Debug)]
enum Control {
    /// A watcher was created.
    Created { watch_id: i64, rev: i64 },
    /// A create was refused: `created` and `canceled` with `watch_id = -1`, as etcd answers.
    Refused { rev: i64, reason: &'static str },
    /// A watcher was canceled at the client's request.
    Canceled { watch_id: i64, rev: i64 },
    /// A watcher fell behind the compacted revision and was canceled.
    Compacted { watch_id: i64, rev: i64, compact_revision: i64 },
    /// The answer to a progress request: every watcher has been sent everything up to `rev`.
    Progress { rev: i64 },
}

impl Control {
    fn response(self, hdr: &HeaderInfo) -> WireResponse {
        match self {
            Control::Created { watch_id, rev } => {
                WireResponse { header: Some(hdr.at(rev)), watch_id, created: true, ..Default::default() }
            }
            Control::Refused { rev, reason } => WireResponse {
                header: Some(hdr.at(rev)),
                watch_id: -1,
                created: true,
                canceled: true,
                cancel_reason: reason.to_string(),
                ..Default::default()
            },
            Control::Canceled { watch_id, rev } => {
                WireResponse { header: Some(hdr.at(rev)), watch_id, canceled: true, ..Default::default() }
            }
            Control::Compacted { watch_id, rev, compact_revision } => WireResponse {
                header: Some(hdr.at(rev)),
                watch_id,
                canceled: true,
                compact_revision,
                ..Default::default()
            },
            Control::Progress { rev } => WireResponse { header: Some(hdr.at(rev)), watch_id: -1, ..Default::default() },
        }
    }

    /// Returns true when this answers a client request, whose credit comes back once it is sent.
    fn answers_request(self) -> bool {
        !matches!(self, Control::Compacted { .. })
    }
}

#[derive(Debug)]
struct Stream {
    /// This stream's ID, which the index's entries carry.
    id: StreamId,
    tx: mpsc::Sender<Outgoing>,
    /// Events and responses sent and not yet taken by the network plane (see [`weight`]).
    queued: Arc<AtomicUsize>,
    credits: Arc<Semaphore>,
    watchers: WatcherTable,
    /// Watchers not in the hub's index: the ones `catch_up` has to serve.
    lagging: usize,
    /// The stream's lag mark (see [`WatchSender::lag_mark`]): lowered to just below the first
    /// unsent revision of each watcher that starts lagging, reset when none lags. Between the
    /// two it may be lower than needed, which only delays a merge, never reorders it.
    lag: Arc<AtomicI64>,
    next_id: i64,
    /// Control responses waiting for room in the channel, in order. At most the stream's
    /// control credits plus one compaction cancel per watcher.
    pending: VecDeque<Control>,
    /// A progress request that could not be answered yet because a watcher was not synced. It
    /// holds its request's credit until answered.
    progress_deferred: bool,
}

impl Drop for Stream {
    /// Wakes a request side waiting for credits: the stream is gone.
    fn drop(&mut self) {
        self.credits.close();
    }
}

enum Sent {
    Yes,
    Full,
    Closed,
}

impl Stream {
    fn watcher_ref(&self, id: i64) -> WatcherRef {
        WatcherRef { stream: self.id, id }
    }

    /// Puts watcher `id`, which has been sent everything up to the hub's revision, in the index.
    fn join_index(&mut self, index: &mut SyncedIndex, id: i64) {
        let Some(w) = self.watchers.get_mut(&id) else { return };
        if w.indexed() {
            return;
        }
        w.join_index();
        index.insert(self.watcher_ref(id), self.watchers[&id].range(self.watchers.keys()));
        self.lagging -= 1;
        self.reset_lag_if_none();
    }

    /// Lowers the lag mark for a watcher that lags from revision `next_rev` on.
    fn mark_lag(&self, next_rev: i64) {
        self.lag.fetch_min(next_rev - 1, Ordering::SeqCst);
    }

    fn reset_lag_if_none(&self) {
        if self.lagging == 0 {
            self.lag.store(NOT_LAGGING, Ordering::SeqCst);
        }
    }

    /// Takes watcher `id` out of the index, having been sent every revision before `rev`.
    fn leave_index(&mut self, index: &mut SyncedIndex, id: i64, rev: i64) {
        let Some(w) = self.watchers.get(&id) else { return };
        if !w.indexed() {
            return;
        }
        index.remove(self.watcher_ref(id), w.range(self.watchers.keys()));
        self.watchers.get_mut(&id).expect("invariant: present just above").leave_index(rev);
        self.lagging += 1;
        self.mark_lag(rev);
    }

    /// Forgets watcher `id`, in the index too; returns false when there is no such watcher.
    fn remove_watcher(&mut self, index: &mut SyncedIndex, id: i64) -> bool {
        let Some(w) = self.watchers.get(&id) else { return false };
        if w.indexed() {
            index.remove(self.watcher_ref(id), w.range(self.watchers.keys()));
        } else {
            self.lagging -= 1;
            self.reset_lag_if_none();
        }
        self.watchers.remove(&id);
        true
    }

    /// Returns the room left in the stream's event budget; None while control responses wait,
    /// which go first.
    fn room(&self, per_watcher: usize, floor: usize) -> Option<Room> {
        if !self.pending.is_empty() {
            return None;
        }
        let queued = self.queued.load(Ordering::Relaxed);
        let budget = per_watcher.saturating_mul(self.watchers.len()).max(floor);
        Some(Room { left: budget.saturating_sub(queued), first_free: queued == 0 })
    }

    /// Puts a batch in the channel, counting its events; control responses still waiting go
    /// first, so a batch of events finds the channel full while there are any.
    fn send_batch(&mut self, batch: Outgoing) -> Sent {
        if !self.pending.is_empty() {
            return Sent::Full;
        }
        let w = weight(&batch);
        match self.tx.try_send(batch) {
            Ok(()) => {
                self.queued.fetch_add(w, Ordering::Relaxed);
                Sent::Yes
            }
            Err(TrySendError::Full(_)) => Sent::Full,
            Err(TrySendError::Closed(_)) => Sent::Closed,
        }
    }

    /// Gives back the credit of a request that is answered by nothing.
    fn return_credit(&self) {
        self.credits.add_permits(1);
    }

    /// Sends a control response now or queues it; false when the client is gone.
    fn send_control(&mut self, c: Control, hdr: &HeaderInfo) -> bool {
        self.pending.push_back(c);
        self.drain_pending(hdr)
    }

    /// Sends every waiting control response, as one batch, if the channel has a slot.
    fn drain_pending(&mut self, hdr: &HeaderInfo) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        match self.tx.try_reserve() {
            Ok(slot) => {
                let batch: Outgoing = self.pending.iter().map(|c| c.response(hdr)).collect();
                let answered = self.pending.iter().filter(|c| c.answers_request()).count();
                self.queued.fetch_add(weight(&batch), Ordering::Relaxed);
                slot.send(batch);
                self.pending.clear();
                if answered > 0 {
                    self.credits.add_permits(answered);
                }
            }
            Err(TrySendError::Full(())) => return true,
            Err(TrySendError::Closed(())) => return false,
        }
        // Compaction can cancel every watcher of a stream at once; a VecDeque keeps the capacity
        // of such a burst after draining, which an idle stream would then carry for good.
        if self.pending.capacity() > PENDING_KEPT {
            self.pending = VecDeque::new();
        }
        true
    }
}

/// What a stream's event budget has left for the batch being built.
#[derive(Clone, Copy, Debug)]
struct Room {
    left: usize,
    /// Nothing is queued: the batch's first response goes however large it is (a catch-up
    /// response of `catchup_batch_events`, a large revision), so no watcher starves behind the
    /// budget; the budget then bounds the rest.
    first_free: bool,
}

impl Room {
    /// Takes room for a response of `weight`; false when it does not fit.
    fn take(&mut self, weight: usize) -> bool {
        if weight <= self.left {
            self.left -= weight;
        } else if self.first_free {
            self.left = 0;
        } else {
            return false;
        }
        self.first_free = false;
        true
    }

    /// Adds `resp` to `batch` if it fits: split into fragments when its watcher asked for them
    /// and it is larger than `max_bytes`. False, leaving `batch` as it was, when it does not fit.
    fn add(&mut self, batch: &mut Outgoing, resp: WireResponse, fragment: bool, max_bytes: usize) -> bool {
        if fragment && resp.encoded_len() > max_bytes {
            let parts = resp.fragments(max_bytes);
            if !self.take(weight(&parts)) {
                return false;
            }
            batch.extend(parts);
        } else {
            // The common case, kept free of a vector per response.
            if !self.take(1 + resp.events.len()) {
                return false;
            }
            batch.push(resp);
        }
        true
    }
}

/// Queue slots a stream keeps after draining its control responses: a few requests' worth.
const PENDING_KEPT: usize = 8;

/// Every watch stream of a shard, with the shard's event ring.
#[derive(Debug)]
pub struct WatchHub {
    streams: HashMap<StreamId, Stream>,
    /// Every synced watcher of every stream, by key (see the module doc).
    index: SyncedIndex,
    /// Streams with a lagging watcher, a queued control response or a deferred progress
    /// request. Only these are visited between rounds, so idle watchers cost nothing.
    attention: HashSet<StreamId>,
    ring: EventRing,
    cfg: WatchConfig,
    last_progress_tick: Option<Instant>,
    /// A round's matches as (watcher, event), kept between rounds for its capacity.
    hits: Vec<(WatcherRef, usize)>,
}

impl WatchHub {
    /// Returns a hub for a store currently at `current_rev`.
    pub fn new(cfg: WatchConfig, current_rev: i64) -> Self {
        Self {
            streams: HashMap::new(),
            index: SyncedIndex::default(),
            attention: HashSet::new(),
            ring: EventRing::new(current_rev, cfg.ring_events, cfg.ring_bytes),
            cfg,
            last_progress_tick: None,
            hits: Vec::new(),
        }
    }

    /// Returns the tunables.
    pub fn config(&self) -> &WatchConfig {
        &self.cfg
    }

    /// Registers a client stream and grants its control credits.
    pub fn open_stream(&mut self, id: StreamId, sender: WatchSender) {
        let WatchSender { tx, queued, credits, lag } = sender;
        credits.add_permits(self.cfg.control_credits.max(1));
        let stream = Stream {
            id,
            tx,
            queued,
            credits,
            watchers: WatcherTable::default(),
            lagging: 0,
            lag,
            next_id: 0,
            pending: VecDeque::new(),
            progress_deferred: false,
        };
        self.streams.insert(id, stream);
    }

    /// Forgets a client stream and its watchers.
    pub fn close_stream(&mut self, id: StreamId) {
        if let Some(s) = self.streams.remove(&id) {
            let keys = s.watchers.keys();
            for (wid, w) in s.watchers.iter().filter(|(_, w)| w.indexed()) {
                self.index.remove(s.watcher_ref(wid), w.range(keys));
            }
        }
        self.attention.remove(&id);
    }

    /// Returns the number of watchers on all streams.
    pub fn watcher_count(&self) -> usize {
        self.streams.values().map(|s| s.watchers.len()).sum()
    }

    /// Refuses a create request for `reason` (the caller may not watch its range): answers
    /// `created` + `canceled` with `watch_id = -1` and the reason, as etcd does.
    pub fn refuse(&mut self, stream: StreamId, reason: &'static str, current: i64, hdr: &HeaderInfo) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        if !s.send_control(Control::Refused { rev: current, reason }, hdr) {
            self.close_stream(stream);
        }
    }

    /// Handles a create request: answers `created` and registers the watcher, or answers
    /// `created` + `canceled` with `watch_id = -1` for a duplicate ID (or a stream whose
    /// watchers' keys are full, see [`WATCH_KEYS_FULL`]).
    pub fn create<B: KvBackend>(
        &mut self,
        stream: StreamId,
        req: &WatchCreateRequest,
        store: &MvccStore<B>,
        hdr: &HeaderInfo,
    ) {
        let current = store.current_rev();
        let Some(s) = self.streams.get_mut(&stream) else { return };
        let id = if req.watch_id != 0 {
            req.watch_id
        } else {
            while s.watchers.contains_key(&s.next_id) {
                s.next_id += 1;
            }
            s.next_id
        };
        let (control, behind) = if s.watchers.contains_key(&id) {
            (Control::Refused { rev: current, reason: DUPLICATE_WATCH_ID }, false)
        } else {
            match s.watchers.insert(id, req, current) {
                Ok(()) => {
                    s.lagging += 1;
                    let behind = s.watchers[&id].next_rev() <= current;
                    if behind {
                        s.mark_lag(s.watchers[&id].next_rev());
                    } else {
                        s.join_index(&mut self.index, id);
                    }
                    (Control::Created { watch_id: id, rev: current }, behind)
                }
                Err(ArenaFull) => (Control::Refused { rev: current, reason: WATCH_KEYS_FULL }, false),
            }
        };
        if !s.send_control(control, hdr) {
            self.close_stream(stream);
        } else if behind || !s.pending.is_empty() {
            self.attention.insert(stream);
        }
    }

    /// Handles a cancel request; unknown IDs are ignored, as etcd does.
    pub fn cancel(&mut self, stream: StreamId, watch_id: i64, current_rev: i64, hdr: &HeaderInfo) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        if !s.remove_watcher(&mut self.index, watch_id) {
            s.return_credit();
            return;
        }
        if !s.send_control(Control::Canceled { watch_id, rev: current_rev }, hdr) {
            self.close_stream(stream);
        } else if !s.pending.is_empty() {
            self.attention.insert(stream);
        }
    }

    /// Handles a progress request: answers at once with `watch_id = -1` when every watcher of the
    /// stream is synced, otherwise as soon as they are. A request made while another waits is
    /// answered by that one's response.
    pub fn request_progress(&mut self, stream: StreamId, current_rev: i64, hdr: &HeaderInfo) {
        if let Some(s) = self.streams.get_mut(&stream) {
            if s.progress_deferred {
                s.return_credit();
            }
            s.progress_deferred = true;
            self.attention.insert(stream);
        }
        self.answer_deferred_progress(current_rev, hdr);
    }

    fn answer_deferred_progress(&mut self, current_rev: i64, hdr: &HeaderInfo) {
        let mut gone = Vec::new();
        for id in &self.attention {
            let Some(s) = self.streams.get_mut(id) else { continue };
            if !s.progress_deferred || !s.watchers.values().all(|w| w.synced(current_rev)) {
                continue;
            }
            s.progress_deferred = false;
            // etcd answers nothing on a stream without watchers.
            if s.watchers.is_empty() {
                s.return_credit();
            } else if !s.send_control(Control::Progress { rev: current_rev }, hdr) {
                gone.push(*id);
            }
        }
        for id in gone {
            self.close_stream(id);
        }
    }

    /// Delivers one applied round's events (revisions `(old_rev, new_rev]`) to synced watchers
    /// and keeps them in the ring. Each event is encoded here, once, for every watcher (see
    /// `wire`). Only the watchers the events match are visited (see the module doc); one whose
    /// stream is full leaves the index and lags.
    pub fn publish(&mut self, events: &[Event], new_rev: i64, hdr: &HeaderInfo) {
        let events: Vec<EncodedEvent> = events.iter().map(EncodedEvent::new).collect();
        if let Some(first) = events.first().map(EncodedEvent::rev) {
            self.deliver(&events, first, new_rev, hdr);
            self.ring.push(events, new_rev);
        }
        if !self.attention.is_empty() {
            self.answer_deferred_progress(new_rev, hdr);
        }
    }

    /// Sends a round's events (revisions `first..=new_rev`) to the indexed watchers they match.
    fn deliver(&mut self, events: &[EncodedEvent], first: i64, new_rev: i64, hdr: &HeaderInfo) {
        // Each match once, as (watcher, event). Candidates come sorted within one index entry;
        // an event matched by several entries, or a round of several events, is sorted (stably,
        // so each watcher's events stay in order) to make one run per stream and per watcher.
        // The vector is the hub's, reused round after round: a round's matches run to one per
        // watcher, and growing a new one to 100,000 entries by doubling copies it as many again.
        let mut hits = std::mem::take(&mut self.hits);
        hits.clear();
        for (i, e) in events.iter().enumerate() {
            self.index.candidates(e.key(), |w| hits.push((w, i)));
        }
        if !hits.is_sorted_by_key(|(w, _)| *w) {
            hits.sort_by_key(|(w, _)| *w);
        }
        let (max_bytes, per_watcher, floor) =
            (self.cfg.max_response_bytes, self.cfg.queued_events_per_watcher, self.cfg.stream_buffer);
        // Every response of the round has this header: encoded once, copied into each.
        let header = hdr.at(new_rev);
        let header_bytes = Some(EncodedHeader::new(&header));
        let mut gone = Vec::new();
        let mut rest = &hits[..];
        while let Some(&(head, _)) = rest.first() {
            let run = rest.iter().take_while(|(w, _)| w.stream == head.stream).count();
            let (mut of_stream, tail) = rest.split_at(run);
            rest = tail;
            let Some(s) = self.streams.get_mut(&head.stream) else { continue };
            let mut room = s.room(per_watcher, floor).unwrap_or(Room { left: 0, first_free: false });
            // One response per watcher unless one fragments: sized once, never grown.
            let mut batch = Outgoing::with_capacity(run);
            // Watchers whose events are in `batch`, and those that must lag this round.
            let (mut carried, mut behind) = (Vec::with_capacity(run), Vec::new());
            while let Some(&(w, _)) = of_stream.first() {
                let run = of_stream.iter().take_while(|(x, _)| x.id == w.id).count();
                let (of_watcher, tail) = of_stream.split_at(run);
                of_stream = tail;
                let Some(watcher) = s.watchers.get(&w.id).filter(|w| w.indexed()) else { continue };
                let keys = s.watchers.keys();
                let mine: Events = of_watcher
                    .iter()
                    .map(|(_, i)| &events[*i])
                    .filter(|e| e.rev() >= watcher.next_rev() && watcher.wants(keys, e))
                    .map(|e| watcher.shape(e))
                    .collect();
                if mine.is_empty() {
                    continue; // a hash collision, a filter, or a start revision still ahead
                }
                let resp = WireResponse {
                    header: Some(header),
                    header_bytes,
                    watch_id: w.id,
                    events: mine,
                    ..Default::default()
                };
                if !room.add(&mut batch, resp, watcher.fragment(), max_bytes) {
                    behind.push(w.id);
                    continue;
                }
                carried.push(w.id);
            }
            if !batch.is_empty() {
                match s.send_batch(batch) {
                    Sent::Yes => {
                        for id in carried {
                            let watcher = s.watchers.get_mut(&id).expect("invariant: present just above");
                            watcher.advance(new_rev + 1);
                            watcher.mark_sent();
                        }
                    }
                    Sent::Full => behind.extend(carried),
                    Sent::Closed => {
                        gone.push(head.stream);
                        continue;
                    }
                }
            }
            if !behind.is_empty() {
                for id in behind {
                    s.leave_index(&mut self.index, id, first);
                }
                self.attention.insert(head.stream);
            }
        }
        self.hits = hits;
        for id in gone {
            self.close_stream(id);
        }
    }

    /// The state jumped from revision `before` to `now` without events (a raft snapshot was
    /// installed): every watcher is caught up from history from `before + 1` on, and the ring
    /// starts again at `now`, since it holds nothing of the revisions in between.
    pub fn state_replaced(&mut self, before: i64, now: i64) {
        self.ring = EventRing::new(now, self.cfg.ring_events, self.cfg.ring_bytes);
        for s in self.streams.values_mut() {
            let ids: Vec<i64> = s.watchers.iter().filter(|(_, w)| w.indexed()).map(|(id, _)| id).collect();
            if ids.is_empty() {
                continue;
            }
            for id in ids {
                s.leave_index(&mut self.index, id, before + 1);
            }
            self.attention.insert(s.id);
        }
    }

    /// Returns true when some watcher is behind or some control response waits.
    pub fn has_lagging(&self) -> bool {
        !self.attention.is_empty()
    }

    /// Returns how many streams have lagging watchers.
    pub fn lagging_streams(&self) -> usize {
        self.attention.len()
    }

    /// Moves lagging watchers forward: from the ring when it still covers them, else from
    /// history; cancels those behind the compacted revision.
    ///
    /// # Errors
    /// Returns a storage error from reading history.
    pub fn catch_up<B: KvBackend>(&mut self, store: &MvccStore<B>, hdr: &HeaderInfo) -> Result<()> {
        self.catch_up_to(store, store.current_rev(), hdr)
    }

    /// As [`WatchHub::catch_up`], up to `current`: the revision up to which the shard holds
    /// every event it will ever have (below the member's counter when another shard of the
    /// member, or a round still in flight, took the revisions above it).
    ///
    /// # Errors
    /// Returns a storage error from reading history.
    pub fn catch_up_to<B: KvBackend>(&mut self, store: &MvccStore<B>, current: i64, hdr: &HeaderInfo) -> Result<()> {
        let compact = store.compact_rev();
        let (max_bytes, batch_max) = (self.cfg.max_response_bytes, self.cfg.catchup_batch_events);
        let (per_watcher, floor) = (self.cfg.queued_events_per_watcher, self.cfg.stream_buffer);
        let header = hdr.at(current);
        let header_bytes = Some(EncodedHeader::new(&header));
        let mut gone = Vec::new();
        let mut settled = Vec::new();
        for sid in &self.attention {
            let Some(s) = self.streams.get_mut(sid) else {
                settled.push(*sid);
                continue;
            };
            if !s.drain_pending(hdr) {
                gone.push(*sid);
                continue;
            }
            let Some(mut room) = s.room(per_watcher, floor) else { continue };
            let ids: Vec<i64> = if s.lagging == 0 {
                Vec::new()
            } else {
                s.watchers.iter().filter(|(_, w)| !w.indexed()).map(|(id, _)| id).collect()
            };
            // One batch for the stream: the watchers it carries move on once it is sent. Each
            // response takes at least one of the budget's events, and the first may take more.
            let most = ids.len().min(room.left + 1);
            let mut batch = Outgoing::with_capacity(most);
            let mut carried: Vec<(i64, i64)> = Vec::with_capacity(most);
            let mut closed = false;
            for id in ids {
                let w = &s.watchers[&id];
                if w.next_rev() > current {
                    s.join_index(&mut self.index, id);
                    continue;
                }
                if w.next_rev() < compact {
                    s.remove_watcher(&mut self.index, id);
                    let canceled = Control::Compacted { watch_id: id, rev: current, compact_revision: compact };
                    if !s.send_control(canceled, hdr) {
                        closed = true;
                        break;
                    }
                    continue;
                }
                let (events, upto) = collect(w, s.watchers.keys(), &self.ring, store, current, batch_max)?;
                if events.is_empty() {
                    // Nothing of its keys in these revisions: it moves on without a response.
                    let w = s.watchers.get_mut(&id).expect("invariant: id taken from this map");
                    w.advance(upto + 1);
                    if upto >= current {
                        s.join_index(&mut self.index, id);
                    }
                    continue;
                }
                let resp = WireResponse {
                    header: Some(header),
                    header_bytes,
                    watch_id: id,
                    events: events.into(),
                    ..Default::default()
                };
                if !room.add(&mut batch, resp, w.fragment(), max_bytes) {
                    break;
                }
                carried.push((id, upto));
            }
            if !closed && !batch.is_empty() {
                match s.send_batch(batch) {
                    Sent::Yes => {
                        for (id, upto) in carried {
                            let w = s.watchers.get_mut(&id).expect("invariant: id taken from this map");
                            w.advance(upto + 1);
                            w.mark_sent();
                            if upto >= current {
                                s.join_index(&mut self.index, id);
                            }
                        }
                    }
                    Sent::Full => {}
                    Sent::Closed => closed = true,
                }
            }
            if closed {
                gone.push(*sid);
                continue;
            }
            if s.pending.is_empty() && !s.progress_deferred && s.lagging == 0 {
                settled.push(*sid);
            }
        }
        for id in settled {
            self.attention.remove(&id);
        }
        for id in gone {
            self.close_stream(id);
        }
        self.answer_deferred_progress(current, hdr);
        Ok(())
    }

    /// Sends periodic progress notifications to idle synced watchers that asked for them.
    pub fn tick_progress(&mut self, now: Instant, current_rev: i64, hdr: &HeaderInfo) {
        let due = self
            .last_progress_tick
            .is_none_or(|t| now.saturating_duration_since(t) >= self.cfg.progress_notify_interval);
        if !due {
            return;
        }
        let first = self.last_progress_tick.is_none();
        self.last_progress_tick = Some(now);
        if first {
            return;
        }
        for s in self.streams.values_mut() {
            let quiet = s.pending.is_empty();
            let mut notes = Outgoing::new();
            for (id, w) in s.watchers.iter_mut() {
                if !w.progress_notify() {
                    continue;
                }
                let idle = !w.take_sent();
                if idle && w.synced(current_rev) && quiet {
                    notes.push(WireResponse { header: Some(hdr.at(current_rev)), watch_id: id, ..Default::default() });
                }
            }
            // A stream without room skips this notification, as etcd's does.
            if !notes.is_empty() {
                let _ = s.send_batch(notes);
            }
        }
    }
}

/// Collects the events a lagging watcher needs next, up to about `batch_max` events without
/// splitting a revision; returns them and the last revision covered. `keys` is the watcher's
/// table's key arena. Events from the ring share its encoding; history is encoded here, for this
/// watcher alone.
fn collect<B: KvBackend>(
    w: &Watcher,
    keys: &[u8],
    ring: &EventRing,
    store: &MvccStore<B>,
    current: i64,
    batch_max: usize,
) -> Result<(Vec<WireEvent>, i64)> {
    let from_ring = w.next_rev() >= ring.first_rev();
    // History is read only up to the ring's start; the ring serves the rest on the next pass.
    let limit = if from_ring { current } else { (ring.first_rev() - 1).min(current) };
    let mut upto = limit;
    let mut out: Vec<WireEvent> = Vec::new();
    let mut take = |e: &EncodedEvent| -> bool {
        let rev = e.rev();
        if out.len() >= batch_max && out.last().is_some_and(|l| l.rev() != rev) {
            upto = rev - 1;
            return false;
        }
        if w.wants(keys, e) {
            out.push(w.shape(e));
        }
        true
    };
    if from_ring {
        for e in ring.since(w.next_rev()) {
            if !take(e) {
                break;
            }
        }
    } else {
        store.history(w.next_rev(), limit, &mut |e| take(&EncodedEvent::new(&e)))?;
    }
    Ok((out, upto))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // these tests measure real threads and deadlines
mod tests;
