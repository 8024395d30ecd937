//! One client watch stream over a member with several shards.
//!
//! The stream is opened on every shard, each with its own channel and control credits, and the
//! client sees the channels merged. A watcher lives on the shard of its keys; a watcher over keys
//! of several shards is refused (created + canceled, as etcd refuses a create), since merging
//! shard event streams in revision order is not built yet (`engine/SHARDING.md`). What the
//! network plane adds so the merge looks like one etcd stream:
//!
//! * **Watch IDs.** Each shard's hub would number its own watchers from 0, so the network plane
//!   chooses automatic IDs (the lowest free one, the hub's rule) and remembers each watcher's
//!   shard, to route cancels and to find a client-chosen ID already taken on another shard.
//! * **Created responses in request order.** Clients match a `created` response to their oldest
//!   pending create (clientv3 does), so a create is forwarded only once the previous one has been
//!   answered; clientv3 sends them one at a time anyway.
//! * **Progress.** A progress request goes to every shard holding a watcher of the stream (a hub
//!   answers nothing on a stream without watchers, as etcd does); the client gets one answer,
//!   once each of them has answered, at the lowest of their revisions (no event at or below it is
//!   still to come on any shard).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use ballast_proto::etcdserverpb::{watch_request::RequestUnion, WatchCreateRequest, WatchRequest, WatchResponse};
use futures::{Stream, StreamExt};
use tokio::sync::Notify;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use super::watch::send_reliably;
use super::{route, Api};
use crate::shard::ShardMsg;
use crate::watch::{self, ControlCredits, Outgoing, WatchSender};

/// The watchers of one client stream, by watch ID, with the shard each lives on.
#[derive(Debug, Default)]
struct Ids {
    shard_of: HashMap<i64, u32>,
    next_auto: i64,
    /// `created` responses the client has been sent (refusals included).
    created: u64,
    /// For each progress request forwarded and not yet answered, the shards asked.
    progress_rounds: VecDeque<BTreeSet<usize>>,
}

type SharedIds = Arc<Mutex<Ids>>;

fn lock(ids: &SharedIds) -> std::sync::MutexGuard<'_, Ids> {
    // A panic while holding this lock cannot leave the map half-updated (single inserts and
    // removes), so a poisoned lock is still usable.
    ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Opens stream `id` on every shard and returns the client's merged response stream, or None
/// when the engine is stopping. The request side runs on its own task.
pub(super) async fn open(
    api: Api,
    id: u64,
    inbound: Streaming<WatchRequest>,
) -> Option<impl Stream<Item = WatchResponse> + Send + 'static> {
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    let mut credits = Vec::new();
    for s in 0..api.shards.len() {
        let (tx, rx, c) = watch::stream_channel(api.watch_stream_buffer);
        if !send_reliably(&api.shards[s], || ShardMsg::WatchOpen(id, tx.clone())).await {
            return None;
        }
        senders.push(tx);
        receivers.push(rx);
        credits.push(c);
    }
    // Refusals the network plane answers itself (watches over several shards) leave through a
    // channel of their own, sized like a shard's.
    let (refusals, refused) = tokio::sync::mpsc::channel::<Outgoing>(api.watch_stream_buffer.max(1));
    let ids: SharedIds = Arc::default();
    let answered = Arc::new(Notify::new());
    let shards = receivers.len();
    let tagged = receivers
        .into_iter()
        .enumerate()
        .map(|(s, rx)| ReceiverStream::new(rx).map(move |r| (s, r)).boxed())
        .chain(std::iter::once(ReceiverStream::new(refused).map(move |r| (shards, r)).boxed()));
    let merged = merge(futures::stream::select_all(tagged), shards, Arc::clone(&ids), Arc::clone(&answered));
    tokio::spawn(serve_requests(api, id, inbound, senders, credits, refusals, ids, answered));
    Some(merged)
}

/// Reads the client's requests and forwards each to its shard.
#[allow(clippy::too_many_arguments)] // one call site; the parts are the stream's state
async fn serve_requests(
    api: Api,
    id: u64,
    mut inbound: Streaming<WatchRequest>,
    senders: Vec<WatchSender>,
    credits: Vec<ControlCredits>,
    refusals: tokio::sync::mpsc::Sender<Outgoing>,
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
                while lock(&ids).created < creates_sent {
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
                match route::one_shard(&api.map, "a watch", &c.key, &c.range_end) {
                    Ok(s) => {
                        let s = choose_id(&ids, &mut c, s);
                        credits[s as usize].spend().await
                            && send_reliably(api.shard(s), || ShardMsg::WatchCreate(id, c.clone())).await
                    }
                    Err(e) => {
                        let refusal = refusal(&api, &super::status::code_and_message(&e).1);
                        refusals.send(Box::new(refusal)).await.is_ok()
                    }
                }
            }
            RequestUnion::CancelRequest(c) => {
                // An unknown ID goes to shard 0, which ignores it as etcd does.
                let s = lock(&ids).shard_of.remove(&c.watch_id).unwrap_or(0);
                credits[s as usize].spend().await
                    && send_reliably(api.shard(s), || ShardMsg::WatchCancel(id, c.watch_id)).await
            }
            RequestUnion::ProgressRequest(_) => {
                let asked: BTreeSet<usize> = {
                    let mut ids = lock(&ids);
                    let mut asked: BTreeSet<usize> = ids.shard_of.values().map(|&s| s as usize).collect();
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

/// Gives an automatic create its ID and records the watcher's shard; returns the shard the create
/// goes to. A client-chosen ID already live on another shard goes to that shard, whose hub
/// answers it as a duplicate.
fn choose_id(ids: &SharedIds, c: &mut WatchCreateRequest, key_shard: u32) -> u32 {
    let mut ids = lock(ids);
    if c.watch_id != 0 {
        if let Some(&owner) = ids.shard_of.get(&c.watch_id) {
            return owner;
        }
        ids.shard_of.insert(c.watch_id, key_shard);
        return key_shard;
    }
    while ids.shard_of.contains_key(&ids.next_auto) {
        ids.next_auto += 1;
    }
    let chosen = ids.next_auto;
    ids.shard_of.insert(chosen, key_shard);
    // ID 0 cannot be sent explicitly (0 asks for an automatic ID), but the shard's hub then picks
    // 0 as well: it is free on every shard, since this map knows every live ID of the stream.
    c.watch_id = chosen;
    key_shard
}

/// etcd's answer to a create it will not serve: created and canceled, with watch ID -1.
fn refusal(api: &Api, reason: &str) -> WatchResponse {
    WatchResponse {
        header: api.header(),
        watch_id: -1,
        created: true,
        canceled: true,
        cancel_reason: reason.to_string(),
        ..Default::default()
    }
}

/// Merges the shards' responses into the client's stream: counts `created` answers (creates are
/// forwarded one at a time), forgets watchers the shards cancel, and folds the shards' answers to
/// a progress request into one.
fn merge(
    tagged: impl Stream<Item = (usize, Outgoing)> + Send + 'static,
    shards: usize,
    ids: SharedIds,
    answered: Arc<Notify>,
) -> impl Stream<Item = WatchResponse> + Send + 'static {
    let mut progress: Vec<Option<Box<WatchResponse>>> = (0..shards).map(|_| None).collect();
    tagged.filter_map(move |(s, resp)| {
        let out = if resp.created {
            lock(&ids).created += 1;
            answered.notify_waiters();
            Some(*resp)
        } else if resp.canceled {
            lock(&ids).shard_of.remove(&resp.watch_id);
            Some(*resp)
        } else if resp.watch_id == -1 && resp.events.is_empty() && s < shards {
            progress[s] = Some(resp);
            let mut ids = lock(&ids);
            let complete = ids.progress_rounds.front().is_none_or(|asked| asked.iter().all(|&a| progress[a].is_some()));
            if complete {
                ids.progress_rounds.pop_front();
                // The lowest revision is the one every shard has sent everything up to.
                progress
                    .iter_mut()
                    .filter_map(Option::take)
                    .min_by_key(|r| r.header.as_ref().map_or(0, |h| h.revision))
                    .map(|r| *r)
            } else {
                None
            }
        } else {
            Some(*resp)
        };
        futures::future::ready(out)
    })
}
