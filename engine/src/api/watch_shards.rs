//! One client watch stream over a member with several shards.
//!
//! The stream is opened on every shard, each with its own channel, control credits and lag mark,
//! and a merge task (one per client stream) turns the shards' responses into one etcd stream:
//!
//! * **Watch IDs.** Each shard's hub would number its own watchers from 0, so the network plane
//!   chooses automatic IDs (the lowest free one, the hub's rule) and remembers where each watcher
//!   lives, to route cancels and to find a client-chosen ID that is already taken.
//! * **Created responses in request order.** Clients match a `created` response to their oldest
//!   pending create (clientv3 does), so a create is forwarded only once the previous one has been
//!   answered; clientv3 sends them one at a time anyway.
//! * **Watchers over keys of several shards** (`/registry/pods/` over every namespace) are
//!   created on every shard, from one start revision (the counter's next one when the client
//!   gave none, so no shard starts later than another). Their events are held per shard and
//!   released in revision order up to the revision every shard is known to have sent everything
//!   up to: the lowest over shards of [`ShardHandle::published_through`] and the stream's lag
//!   mark on that shard ([`crate::watch::WatchSender::lag_mark`]), read before the channels are
//!   drained. A revision belongs to one shard, so the merge never interleaves one revision's
//!   events. While events are held the task re-checks every `merge_tick`, since the shard that
//!   holds the others back may have nothing to send this watcher. A watcher is released only
//!   against a bound read after every shard answered its `created`: until a shard has created
//!   it, that shard's lag mark says nothing of the history it will send for it
//!   (`api::watch_cross`). The client sees one `created`, one `canceled`, and progress
//!   notifications at released revisions.
//! * **Progress.** A progress request goes to every shard holding a watcher of the stream (a hub
//!   answers nothing on a stream without watchers, as etcd does); the client gets one answer,
//!   once each of them has answered, at the lowest of their revisions and of the released
//!   revision (no event at or below it is still to come).
//!
//! Slow consumers: the merge task writes into the client's bounded channel and waits when it is
//! full, so it stops draining the shards' channels; their hubs then treat the stream's watchers
//! as lagging (the hubs' policy), which lowers the lag marks and holds merged events until the
//! lagging ones are caught up.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use ballast_proto::etcdserverpb::{watch_request::RequestUnion, ResponseHeader, WatchCreateRequest, WatchRequest};
use futures::stream::SelectAll;
use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::{mpsc, Notify};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use super::auth::Credentials;
use super::watch_cross::{CrossWatchers, Shape, Taken};
use super::watch_stream::send_reliably;
use super::{route, Api};
use crate::shard::ShardMsg;
use crate::watch::wire::WireResponse;
use crate::watch::{self, ControlCredits, Outgoing, WatchSender};

/// Where a watcher of the stream lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    One(u32),
    /// On every shard; `fragment` as the client asked (the merge splits such a watcher's
    /// responses itself).
    All {
        fragment: bool,
    },
}

/// The watchers of one client stream, by watch ID, shared by its request side and merge task.
#[derive(Debug, Default)]
struct Ids {
    placement: HashMap<i64, Placement>,
    next_auto: i64,
    /// `created` responses the client has been sent (refusals included).
    created: u64,
    /// For each progress request forwarded and not yet answered, the shards asked.
    progress_rounds: VecDeque<BTreeSet<usize>>,
}

type SharedIds = Arc<Mutex<Ids>>;

fn lock(ids: &SharedIds) -> std::sync::MutexGuard<'_, Ids> {
    // Every update is a single insert, remove or increment, so a poisoned lock holds no
    // half-made change.
    ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

type Tagged = SelectAll<std::pin::Pin<Box<dyn Stream<Item = (usize, Outgoing)> + Send>>>;

/// Opens stream `id` on every shard and returns the client's response stream, or None when the
/// engine is stopping. The request side and the merge run on their own tasks.
pub(crate) async fn open(
    api: Api,
    id: u64,
    inbound: Streaming<WatchRequest>,
    creds: Credentials,
) -> Option<impl Stream<Item = Outgoing> + Send + 'static> {
    let mut senders = Vec::new();
    let mut tagged: Tagged = SelectAll::new();
    let mut credits = Vec::new();
    let mut lags = Vec::new();
    for s in 0..api.shards.len() {
        let (tx, rx, c) = watch::stream_channel(api.watch_stream_buffer);
        lags.push(tx.lag_mark());
        if !send_reliably(&api.shards[s], || ShardMsg::WatchOpen(id, tx.clone())).await {
            return None;
        }
        senders.push(tx);
        tagged.push(rx.map(move |r| (s, r)).boxed());
        credits.push(c);
    }
    let shards = api.shards.len();
    let ids: SharedIds = Arc::default();
    let answered = Arc::new(Notify::new());
    let (out, client) = mpsc::channel(api.watch_merge_buffer.max(1));
    let merge = Merge {
        api: api.clone(),
        ids: Arc::clone(&ids),
        answered: Arc::clone(&answered),
        lags,
        credits: credits.clone(),
        stream: id,
        cross: CrossWatchers::new(shards),
        progress: (0..shards).map(|_| None).collect(),
        answer: None,
    };
    tokio::spawn(merge.run(tagged, out));
    tokio::spawn(serve_requests(api, id, (inbound, creds), senders, credits, ids, answered));
    Some(ReceiverStream::new(client))
}

/// Reads the client's requests and forwards each to its shard or shards; a create its
/// credentials do not allow is refused.
async fn serve_requests(
    api: Api,
    id: u64,
    (mut inbound, creds): (Streaming<WatchRequest>, Credentials),
    senders: Vec<WatchSender>,
    credits: Vec<ControlCredits>,
    ids: SharedIds,
    answered: Arc<Notify>,
) {
    let closed = senders[0].clone();
    let mut creates_sent: u64 = 0;
    loop {
        let msg = tokio::select! {
            msg = inbound.message() => msg,
            () = closed.closed() => break,
        };
        let Ok(Some(msg)) = msg else { break };
        let Some(request) = msg.request_union else { continue };
        let forwarded = match request {
            RequestUnion::CreateRequest(mut c) => {
                // Answer creates in request order: wait for the previous one's `created`.
                loop {
                    let notified = answered.notified();
                    if lock(&ids).created >= creates_sent {
                        break;
                    }
                    tokio::select! {
                        () = notified => {}
                        () = closed.closed() => return close(&api, id).await,
                    }
                }
                creates_sent += 1;
                if let Err(reason) = api.watch_permitted(&creds, &c).await {
                    // Refused by shard 0 as etcd refuses it: `created` and `canceled`, ID -1.
                    if !(credits[0].spend().await
                        && send_reliably(api.shard(0), || ShardMsg::WatchRefuse(id, reason)).await)
                    {
                        break;
                    }
                    continue;
                }
                let place = match route::one_shard(&api.map, "a watch", &c.key, &c.range_end) {
                    Ok(s) => Placement::One(s),
                    Err(_) => Placement::All { fragment: c.fragment },
                };
                match choose_id(&ids, &mut c, place) {
                    Placement::One(s) => {
                        credits[s as usize].spend().await
                            && send_reliably(api.shard(s), || ShardMsg::WatchCreate(id, c.clone())).await
                    }
                    Placement::All { .. } => {
                        // One start for every shard: none may begin after another's events.
                        if c.start_revision <= 0 {
                            c.start_revision = api.revs.last() + 1;
                        }
                        let mut ok = true;
                        for (s, credit) in credits.iter().enumerate() {
                            ok = ok
                                && credit.spend().await
                                && send_reliably(&api.shards[s], || ShardMsg::WatchCreate(id, c.clone())).await;
                        }
                        ok
                    }
                }
            }
            RequestUnion::CancelRequest(c) => {
                // An unknown ID goes to shard 0, which ignores it as etcd does. A watcher over
                // several shards stays known until the merge has seen every shard cancel it.
                let place = {
                    let mut ids = lock(&ids);
                    match ids.placement.get(&c.watch_id).copied() {
                        Some(all @ Placement::All { .. }) => all,
                        Some(one) => {
                            ids.placement.remove(&c.watch_id);
                            one
                        }
                        None => Placement::One(0),
                    }
                };
                let targets: Vec<usize> = match place {
                    Placement::One(s) => vec![s as usize],
                    Placement::All { .. } => (0..credits.len()).collect(),
                };
                let mut ok = true;
                for s in targets {
                    ok = ok
                        && credits[s].spend().await
                        && send_reliably(&api.shards[s], || ShardMsg::WatchCancel(id, c.watch_id)).await;
                }
                ok
            }
            RequestUnion::ProgressRequest(_) => {
                let asked: BTreeSet<usize> = {
                    let mut ids = lock(&ids);
                    let mut asked = BTreeSet::new();
                    for p in ids.placement.values() {
                        match p {
                            Placement::One(s) => {
                                asked.insert(*s as usize);
                            }
                            Placement::All { .. } => asked.extend(0..credits.len()),
                        }
                    }
                    if asked.is_empty() {
                        asked.insert(0); // answers nothing, as etcd on a stream without watchers
                    } else {
                        ids.progress_rounds.push_back(asked.clone());
                    }
                    asked
                };
                let mut ok = true;
                for s in asked {
                    ok = ok
                        && credits[s].spend().await
                        && send_reliably(&api.shards[s], || ShardMsg::WatchProgress(id)).await;
                }
                ok
            }
        };
        if !forwarded {
            break;
        }
    }
    // A client that only half-closes keeps receiving, as with etcd.
    closed.closed().await;
    close(&api, id).await;
}

async fn close(api: &Api, id: u64) {
    for shard in &api.shards {
        send_reliably(shard, || ShardMsg::WatchClose(id)).await;
    }
}

/// Gives an automatic create its ID and records where the watcher lives; returns where the
/// create goes. A client-chosen ID that is already live goes where that watcher is, whose hub
/// answers it as a duplicate.
fn choose_id(ids: &SharedIds, c: &mut WatchCreateRequest, place: Placement) -> Placement {
    let mut ids = lock(ids);
    if c.watch_id != 0 {
        return match ids.placement.get(&c.watch_id) {
            Some(Placement::One(owner)) => Placement::One(*owner),
            Some(Placement::All { .. }) => Placement::One(0),
            None => {
                ids.placement.insert(c.watch_id, place);
                place
            }
        };
    }
    while ids.placement.contains_key(&ids.next_auto) {
        ids.next_auto += 1;
    }
    let chosen = ids.next_auto;
    ids.placement.insert(chosen, place);
    // ID 0 cannot be sent explicitly (0 asks for an automatic ID), but each hub then picks 0 as
    // well: it is free on every shard, since this map knows every live ID of the stream.
    c.watch_id = chosen;
    place
}

/// The merge task's state: see the module doc.
struct Merge {
    api: Api,
    ids: SharedIds,
    answered: Arc<Notify>,
    lags: Vec<Arc<AtomicI64>>,
    credits: Vec<ControlCredits>,
    stream: u64,
    cross: CrossWatchers,
    /// The shards' answers to the oldest progress request, by shard.
    progress: Vec<Option<WireResponse>>,
    /// A folded progress answer, sent after this turn's release.
    answer: Option<WireResponse>,
}

impl Merge {
    async fn run(mut self, mut tagged: Tagged, out: mpsc::Sender<Outgoing>) {
        let tick = self.api.watch_merge_tick;
        loop {
            let first = if self.cross.holding() {
                tokio::select! {
                    item = tagged.next() => Some(item),
                    () = tokio::time::sleep(tick) => None,
                }
            } else {
                Some(tagged.next().await)
            };
            let mut outgoing = Vec::new();
            if let Some(item) = first {
                let Some((s, resp)) = item else { break };
                self.take(s, resp, &mut outgoing);
            }
            // The bound is read before the channels are drained: every event at or below it
            // is then among what the drain finds, for the watchers every shard had created
            // when it was read (`CrossWatchers::arm`). The drain is exempt from tokio's cooperative
            // budget: a receive over budget answers Pending with messages still queued, and the
            // release below would then pass a shard's held-back events with another's later
            // ones (a catching-up stream spends the budget within a few turns). What the drain
            // takes is still bounded: the shards' channels hold `watch_stream_buffer` batches
            // each, within their event budgets.
            self.cross.arm();
            let bound = self.bound();
            while let Some(Some((s, resp))) = tokio::task::unconstrained(tagged.next()).now_or_never() {
                self.take(s, resp, &mut outgoing);
            }
            let shape = Shape {
                batch_events: self.api.watch_catchup_batch,
                max_response_bytes: self.api.watch_max_response_bytes,
            };
            let header = self.api.header().map(|h| ResponseHeader { revision: bound, ..h });
            self.cross.release(bound, header, shape, &mut outgoing);
            if let Some(mut answer) = self.answer.take() {
                answer.cap_revision(bound);
                outgoing.push(answer);
            }
            // What one turn produced goes to the client as one batch, as a hub's round does.
            if !outgoing.is_empty() && out.send(outgoing).await.is_err() {
                return;
            }
        }
    }

    /// The revision up to which every shard has sent this stream everything.
    fn bound(&self) -> i64 {
        let last = self.api.cross_shard_last();
        self.api
            .shards
            .iter()
            .zip(&self.lags)
            .map(|(shard, lag)| shard.published_through(last).min(lag.load(Ordering::SeqCst)))
            .min()
            .unwrap_or(last)
    }

    fn placement(&self, watch_id: i64) -> Option<Placement> {
        lock(&self.ids).placement.get(&watch_id).copied()
    }

    /// Handles one batch of responses from shard `s`.
    fn take(&mut self, s: usize, batch: Outgoing, outgoing: &mut Vec<WireResponse>) {
        for resp in batch {
            self.take_one(s, resp, outgoing);
        }
    }

    fn take_one(&mut self, s: usize, resp: WireResponse, outgoing: &mut Vec<WireResponse>) {
        let shards = self.api.shards.len();
        let cross = match (resp.watch_id >= 0 && s < shards).then(|| self.placement(resp.watch_id)) {
            Some(Some(Placement::All { fragment })) => Some(fragment),
            _ => None,
        };
        if let Some(fragment) = cross {
            self.take_cross(s, resp, fragment, outgoing);
        } else if resp.created {
            self.count_created();
            outgoing.push(resp);
        } else if resp.canceled {
            lock(&self.ids).placement.remove(&resp.watch_id);
            outgoing.push(resp);
        } else if resp.watch_id == -1 && resp.events.is_empty() && s < shards {
            self.take_progress(s, resp);
        } else {
            outgoing.push(resp);
        }
    }

    fn count_created(&self) {
        lock(&self.ids).created += 1;
        self.answered.notify_waiters();
    }

    fn take_progress(&mut self, s: usize, resp: WireResponse) {
        self.progress[s] = Some(resp);
        let mut ids = lock(&self.ids);
        let complete =
            ids.progress_rounds.front().is_none_or(|asked| asked.iter().all(|&a| self.progress[a].is_some()));
        if complete {
            ids.progress_rounds.pop_front();
            // The lowest revision is the one every shard has sent everything up to.
            self.answer = self
                .progress
                .iter_mut()
                .filter_map(Option::take)
                .min_by_key(|r| r.header.as_ref().map_or(0, |h| h.revision));
        }
    }

    fn take_cross(&mut self, s: usize, mut resp: WireResponse, fragment: bool, outgoing: &mut Vec<WireResponse>) {
        let id = resp.watch_id;
        match self.cross.take(s, &mut resp, fragment) {
            Taken::Kept => {}
            Taken::Created => {
                outgoing.push(resp);
                self.count_created();
            }
            Taken::FirstCancel { gone } => {
                if gone {
                    lock(&self.ids).placement.remove(&id);
                }
                if resp.compact_revision > 0 {
                    self.cancel_elsewhere(s, id);
                }
                outgoing.push(resp);
            }
            Taken::Gone => {
                lock(&self.ids).placement.remove(&id);
            }
        }
    }

    /// After one shard canceled a watcher for compaction, cancels it on the others, if they have
    /// credits left now (the merge must not wait); otherwise they keep it until the stream ends,
    /// and the merge drops what they send for it.
    fn cancel_elsewhere(&self, canceled_on: usize, id: i64) {
        for (s, credit) in self.credits.iter().enumerate() {
            if s != canceled_on && credit.try_spend() {
                let _ = self.api.shards[s].send(ShardMsg::WatchCancel(self.stream, id));
            }
        }
    }
}
