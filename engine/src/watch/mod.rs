//! Watch: etcd's watch streams, served from the shard that owns the keys.
//!
//! Reading order: [`ring`] (recent events with their previous values), `watcher` (one watch,
//! packed), `table` (a stream's watchers by ID and their key arena), `index` (synced watchers by
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
//! # Slow consumers
//! Events are pushed with `try_send` only. When a stream's channel is full the watcher is not
//! dropped and nothing waits: it simply stays behind (`next_rev` unchanged) and is caught up
//! later from the ring, or from history in the backend once the ring has moved on. Memory per
//! stream is bounded by the channel capacity times the catch-up batch size. Only a watcher whose
//! `next_rev` falls below the compacted revision is canceled, with `compact_revision`, exactly
//! as etcd does.
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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballast_proto::etcdserverpb::{WatchCreateRequest, WatchResponse};
use ballast_proto::mvccpb::Event;
use prost::Message;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::Semaphore;

use crate::error::Result;
use crate::header::HeaderInfo;
use crate::mvcc::MvccStore;
use crate::storage::KvBackend;
use index::{SyncedIndex, WatcherRef};
use ring::{event_rev, EventRing};
use table::WatcherTable;
use watcher::{ArenaFull, Watcher};

/// Identifies a client watch stream within the engine.
pub type StreamId = u64;

/// etcd's cancel reason for a duplicate client-chosen watch ID.
pub const DUPLICATE_WATCH_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";

/// Cancel reason for a create whose keys would take the stream's watchers' keys past 4 GiB (the
/// key arena's 32-bit offsets; see `table`). etcd has no such limit; no real client comes near it.
pub const WATCH_KEYS_FULL: &str = "ballast: the watch keys of this stream exceed 4 GiB; open another stream";

/// What a stream's channel carries. Responses are boxed so that a channel slot is a pointer: the
/// channel allocates its slots in blocks of 32 and keeps them for the stream's life, which for an
/// unboxed `WatchResponse` (112 bytes) was about 7 KiB per stream once it had sent a few dozen
/// responses, idle or not.
pub type Outgoing = Box<WatchResponse>;

/// The hub's side of a watch stream: the bounded channel its responses go to, and the stream's
/// control credits (see the module doc), which the hub grants and gives back.
#[derive(Clone, Debug)]
pub struct WatchSender {
    tx: mpsc::Sender<Outgoing>,
    credits: Arc<Semaphore>,
    lag: Arc<AtomicI64>,
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
/// is opened), the receiver the client's responses come from (`buffer` of them), and the request
/// side's credits. There are no credits until the hub opens the stream.
pub fn stream_channel(buffer: usize) -> (WatchSender, mpsc::Receiver<Outgoing>, ControlCredits) {
    let (tx, rx) = mpsc::channel(buffer.max(1));
    let credits = Arc::new(Semaphore::new(0));
    let lag = Arc::new(AtomicI64::new(NOT_LAGGING));
    (WatchSender { tx, credits: credits.clone(), lag }, rx, ControlCredits(credits))
}

/// Tunables of watch delivery.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// Events kept in the per-shard ring. 65,536 covers several seconds of a busy control plane
    /// (kube-apiserver's watch cache keeps 100 to 1,000 events per resource) while staying a few
    /// MiB; older resumes read history from the backend.
    pub ring_events: usize,
    /// Responses buffered per stream before its watchers start lagging. 64 absorbs bursts
    /// without letting one slow client pin much memory.
    pub stream_buffer: usize,
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
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            ring_events: 65_536,
            stream_buffer: 64,
            control_credits: 64,
            catchup_batch_events: 1_000,
            progress_notify_interval: Duration::from_secs(600),
            max_response_bytes: 1_572_864,
            merge_tick: Duration::from_millis(2),
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
    fn response(self, hdr: &HeaderInfo) -> WatchResponse {
        match self {
            Control::Created { watch_id, rev } => {
                WatchResponse { header: Some(hdr.at(rev)), watch_id, created: true, ..Default::default() }
            }
            Control::Refused { rev, reason } => WatchResponse {
                header: Some(hdr.at(rev)),
                watch_id: -1,
                created: true,
                canceled: true,
                cancel_reason: reason.to_string(),
                ..Default::default()
            },
            Control::Canceled { watch_id, rev } => {
                WatchResponse { header: Some(hdr.at(rev)), watch_id, canceled: true, ..Default::default() }
            }
            Control::Compacted { watch_id, rev, compact_revision } => WatchResponse {
                header: Some(hdr.at(rev)),
                watch_id,
                canceled: true,
                compact_revision,
                ..Default::default()
            },
            Control::Progress { rev } => {
                WatchResponse { header: Some(hdr.at(rev)), watch_id: -1, ..Default::default() }
            }
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

    fn try_send(&mut self, resp: WatchResponse) -> Sent {
        if !self.pending.is_empty() {
            return Sent::Full;
        }
        match self.tx.try_send(Box::new(resp)) {
            Ok(()) => Sent::Yes,
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

    fn drain_pending(&mut self, hdr: &HeaderInfo) -> bool {
        let mut answered = 0;
        let mut open = true;
        while let Some(c) = self.pending.front().copied() {
            match self.tx.try_reserve() {
                Ok(slot) => {
                    slot.send(Box::new(c.response(hdr)));
                    self.pending.pop_front();
                    answered += usize::from(c.answers_request());
                }
                Err(TrySendError::Full(())) => break,
                Err(TrySendError::Closed(())) => {
                    open = false;
                    break;
                }
            }
        }
        if answered > 0 {
            self.credits.add_permits(answered);
        }
        // Compaction can cancel every watcher of a stream at once; a VecDeque keeps the capacity
        // of such a burst after draining, which an idle stream would then carry for good.
        if self.pending.is_empty() && self.pending.capacity() > PENDING_KEPT {
            self.pending = VecDeque::new();
        }
        open
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
}

impl WatchHub {
    /// Returns a hub for a store currently at `current_rev`.
    pub fn new(cfg: WatchConfig, current_rev: i64) -> Self {
        Self {
            streams: HashMap::new(),
            index: SyncedIndex::default(),
            attention: HashSet::new(),
            ring: EventRing::new(current_rev, cfg.ring_events),
            cfg,
            last_progress_tick: None,
        }
    }

    /// Returns the tunables.
    pub fn config(&self) -> &WatchConfig {
        &self.cfg
    }

    /// Registers a client stream and grants its control credits.
    pub fn open_stream(&mut self, id: StreamId, sender: WatchSender) {
        let WatchSender { tx, credits, lag } = sender;
        credits.add_permits(self.cfg.control_credits.max(1));
        let stream = Stream {
            id,
            tx,
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
    /// and keeps them in the ring. Only the watchers the events match are visited (see the module
    /// doc); one whose stream is full leaves the index and lags.
    pub fn publish(&mut self, events: &[Event], new_rev: i64, hdr: &HeaderInfo) {
        if let Some(first) = events.first() {
            self.ring.push(events, new_rev);
            self.deliver(events, event_rev(first), new_rev, hdr);
        }
        if !self.attention.is_empty() {
            self.answer_deferred_progress(new_rev, hdr);
        }
    }

    /// Sends a round's events (revisions `first..=new_rev`) to the indexed watchers they match.
    fn deliver(&mut self, events: &[Event], first: i64, new_rev: i64, hdr: &HeaderInfo) {
        // Each match once, as (watcher, event); candidates come grouped by watcher within one
        // event, and a stable sort groups a round of several events by watcher, events in order.
        let mut hits: Vec<(WatcherRef, usize)> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            if let Some(kv) = &e.kv {
                self.index.candidates(&kv.key, |w| hits.push((w, i)));
            }
        }
        if events.len() > 1 {
            hits.sort_by_key(|(w, _)| *w);
        }
        let max_bytes = self.cfg.max_response_bytes;
        let mut gone = Vec::new();
        let mut rest = &hits[..];
        while let Some(&(head, _)) = rest.first() {
            let run = rest.iter().take_while(|(w, _)| w.stream == head.stream).count();
            let (of_stream, tail) = rest.split_at(run);
            rest = tail;
            let Some(s) = self.streams.get_mut(&head.stream) else { continue };
            if gone.contains(&head.stream) {
                continue;
            }
            let mut of_stream = of_stream;
            while let Some(&(w, _)) = of_stream.first() {
                let run = of_stream.iter().take_while(|(x, _)| x.id == w.id).count();
                let (of_watcher, tail) = of_stream.split_at(run);
                of_stream = tail;
                let Some(watcher) = s.watchers.get(&w.id).filter(|w| w.indexed()) else { continue };
                let keys = s.watchers.keys();
                let batch: Vec<Event> = of_watcher
                    .iter()
                    .map(|(_, i)| &events[*i])
                    .filter(|e| event_rev(e) >= watcher.next_rev() && watcher.wants(keys, e))
                    .map(|e| watcher.shape(e))
                    .collect();
                if batch.is_empty() {
                    continue; // a hash collision, a filter, or a start revision still ahead
                }
                let fragment = watcher.fragment();
                match send_events(s, w.id, batch, new_rev, hdr, fragment, max_bytes) {
                    Sent::Yes => {
                        let watcher = s.watchers.get_mut(&w.id).expect("invariant: present just above");
                        watcher.advance(new_rev + 1);
                        watcher.mark_sent();
                    }
                    Sent::Full => {
                        s.leave_index(&mut self.index, w.id, first);
                        self.attention.insert(head.stream);
                    }
                    Sent::Closed => {
                        gone.push(head.stream);
                        break;
                    }
                }
            }
        }
        for id in gone {
            self.close_stream(id);
        }
    }

    /// Returns true when some watcher is behind or some control response waits.
    pub fn has_lagging(&self) -> bool {
        !self.attention.is_empty()
    }

    /// Moves lagging watchers forward: from the ring when it still covers them, else from
    /// history; cancels those behind the compacted revision.
    ///
    /// # Errors
    /// Returns a storage error from reading history.
    pub fn catch_up<B: KvBackend>(&mut self, store: &MvccStore<B>, hdr: &HeaderInfo) -> Result<()> {
        let current = store.current_rev();
        let compact = store.compact_rev();
        let max_bytes = self.cfg.max_response_bytes;
        let batch_max = self.cfg.catchup_batch_events;
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
            if !s.pending.is_empty() {
                continue;
            }
            let ids: Vec<i64> = if s.lagging == 0 {
                Vec::new()
            } else {
                s.watchers.iter().filter(|(_, w)| !w.indexed()).map(|(id, _)| id).collect()
            };
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
                        gone.push(*sid);
                        break;
                    }
                    continue;
                }
                let (batch, upto) = collect(w, s.watchers.keys(), &self.ring, store, current, batch_max)?;
                let fragment = w.fragment();
                let sent = if batch.is_empty() {
                    Sent::Yes
                } else {
                    send_events(s, id, batch, current, hdr, fragment, max_bytes)
                };
                match sent {
                    Sent::Yes => {
                        let w = s.watchers.get_mut(&id).expect("invariant: id taken from this map");
                        w.advance(upto + 1);
                        w.mark_sent();
                        if upto >= current {
                            s.join_index(&mut self.index, id);
                        }
                    }
                    Sent::Full => break,
                    Sent::Closed => {
                        gone.push(*sid);
                        break;
                    }
                }
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
            for (id, w) in s.watchers.iter_mut() {
                if !w.progress_notify() {
                    continue;
                }
                let idle = !w.take_sent();
                if idle && w.synced(current_rev) && quiet {
                    let resp = WatchResponse { header: Some(hdr.at(current_rev)), watch_id: id, ..Default::default() };
                    let _ = s.tx.try_send(Box::new(resp));
                }
            }
        }
    }
}

/// Collects the events a lagging watcher needs next, up to about `batch_max` events without
/// splitting a revision; returns them and the last revision covered. `keys` is the watcher's
/// table's key arena.
fn collect<B: KvBackend>(
    w: &Watcher,
    keys: &[u8],
    ring: &EventRing,
    store: &MvccStore<B>,
    current: i64,
    batch_max: usize,
) -> Result<(Vec<Event>, i64)> {
    let from_ring = w.next_rev() >= ring.first_rev();
    // History is read only up to the ring's start; the ring serves the rest on the next pass.
    let limit = if from_ring { current } else { (ring.first_rev() - 1).min(current) };
    let mut upto = limit;
    let mut out: Vec<Event> = Vec::new();
    let mut take = |e: &Event| -> bool {
        let rev = event_rev(e);
        if out.len() >= batch_max && out.last().is_some_and(|l| event_rev(l) != rev) {
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
        store.history(w.next_rev(), limit, &mut |e| take(&e))?;
    }
    Ok((out, upto))
}

/// Sends `events` to watcher `id`, split into fragments when it asked for them and the response
/// is too large.
fn send_events(
    s: &mut Stream,
    id: i64,
    events: Vec<Event>,
    rev: i64,
    hdr: &HeaderInfo,
    fragment: bool,
    max_bytes: usize,
) -> Sent {
    let resp = WatchResponse { header: Some(hdr.at(rev)), watch_id: id, events, ..Default::default() };
    if !fragment || resp.encoded_len() <= max_bytes {
        return s.try_send(resp);
    }
    let parts = fragments(resp, max_bytes);
    if s.tx.capacity() < parts.len() || !s.pending.is_empty() {
        return Sent::Full;
    }
    for p in parts {
        if let Sent::Closed = s.try_send(p) {
            return Sent::Closed;
        }
    }
    Sent::Yes
}

/// Splits `resp` into fragments of about `max_bytes` each (never splitting an event), the last
/// one with `fragment` unset, as etcd does for watchers created with `fragment`.
pub(crate) fn fragments(resp: WatchResponse, max_bytes: usize) -> Vec<WatchResponse> {
    let mut parts: Vec<WatchResponse> = Vec::new();
    let mut cur = WatchResponse { header: resp.header, watch_id: resp.watch_id, fragment: true, ..Default::default() };
    for e in resp.events {
        if !cur.events.is_empty() && cur.encoded_len() + e.encoded_len() + 8 > max_bytes {
            let next =
                WatchResponse { header: cur.header, watch_id: cur.watch_id, fragment: true, ..Default::default() };
            parts.push(std::mem::replace(&mut cur, next));
        }
        cur.events.push(e);
    }
    cur.fragment = false;
    parts.push(cur);
    parts
}

#[cfg(test)]
mod tests;
