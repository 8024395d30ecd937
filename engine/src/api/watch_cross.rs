//! The watchers of one client stream that span several shards, as its merge task keeps them
//! (`api::watch_shards`): each shard's events held until every shard is known to have sent
//! everything up to a revision, then released in revision order.
//!
//! A watcher is released against a bound only once every shard's `created` was taken before
//! that bound was read ([`CrossWatchers::arm`]). A shard that has not yet created the watcher
//! shows no lag for it, so a bound read then can stand above revisions that shard will still
//! send from history; its lag mark covers them only from its `created` on.

use std::collections::{HashMap, VecDeque};

use ballast_proto::etcdserverpb::ResponseHeader;

use crate::watch::wire::{WireEvent, WireResponse};

/// A watcher over several shards, as the merge sees it.
#[derive(Debug)]
struct Cross {
    /// Shards that answered `created`.
    created: usize,
    /// Every shard's `created` had been taken when the turn's bound was read.
    armed: bool,
    /// Shards that answered `canceled`; the client saw the first.
    canceled: usize,
    /// Events received and not yet released, per shard, each in revision order.
    held: Vec<VecDeque<WireEvent>>,
    /// A shard sent a periodic progress notification: one goes to the client at the next
    /// release, at the released revision.
    notify_due: bool,
    /// The last revision sent to the client for this watcher (events or notification).
    sent_upto: i64,
    /// The client asked for responses split at `max_response_bytes`.
    fragment: bool,
}

/// How a response about a watcher over several shards changed it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Taken {
    /// Held, or nothing for the client.
    Kept,
    /// The last shard answered `created`: the client gets this one.
    Created,
    /// The first shard answered `canceled`: the client gets this one; `gone` when it was also
    /// the last.
    FirstCancel { gone: bool },
    /// The last shard answered `canceled`: the watcher is forgotten.
    Gone,
}

/// Limits of the responses a release makes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape {
    /// Events per response at most (a revision is never split).
    pub batch_events: usize,
    /// Fragment size for watchers that asked for fragments.
    pub max_response_bytes: usize,
}

/// The stream's watchers over several shards, by watch ID.
#[derive(Debug)]
pub(super) struct CrossWatchers {
    shards: usize,
    by_id: HashMap<i64, Cross>,
}

impl CrossWatchers {
    pub(super) fn new(shards: usize) -> Self {
        Self { shards, by_id: HashMap::new() }
    }

    /// True while some watcher holds events not yet released.
    pub(super) fn holding(&self) -> bool {
        self.by_id.values().any(|c| c.held.iter().any(|h| !h.is_empty()))
    }

    /// Called just before the turn's bound is read: watchers every shard has created by now may
    /// be released against it.
    pub(super) fn arm(&mut self) {
        let shards = self.shards;
        for w in self.by_id.values_mut() {
            w.armed |= w.created == shards;
        }
    }

    /// Takes shard `s`'s response about watcher `resp.watch_id`.
    pub(super) fn take(&mut self, s: usize, resp: &mut WireResponse, fragment: bool) -> Taken {
        let shards = self.shards;
        let id = resp.watch_id;
        let w = self.by_id.entry(id).or_insert_with(|| Cross {
            created: 0,
            armed: false,
            canceled: 0,
            held: (0..shards).map(|_| VecDeque::new()).collect(),
            notify_due: false,
            sent_upto: 0,
            fragment,
        });
        if resp.created {
            w.created += 1;
            return if w.created == shards { Taken::Created } else { Taken::Kept };
        }
        if resp.canceled {
            w.canceled += 1;
            let (first, last) = (w.canceled == 1, w.canceled == shards);
            if first {
                w.held.iter_mut().for_each(VecDeque::clear);
            }
            if last {
                self.by_id.remove(&id);
            }
            return match (first, last) {
                (true, gone) => Taken::FirstCancel { gone },
                (false, true) => Taken::Gone,
                (false, false) => Taken::Kept,
            };
        }
        if w.canceled == 0 {
            w.notify_due |= resp.events.is_empty();
            w.held[s].extend(std::mem::take(&mut resp.events));
        }
        Taken::Kept
    }

    /// Sends every held event at or below `bound`, in revision order: per watcher, responses of
    /// at most `shape.batch_events` events (a revision is never split), each split further into
    /// fragments when the watcher asked for them and it is larger than `max_response_bytes`, as
    /// a one-shard watcher's catch-up is. `header` is the responses' header, at `bound`.
    pub(super) fn release(
        &mut self,
        bound: i64,
        header: Option<ResponseHeader>,
        shape: Shape,
        outgoing: &mut Vec<WireResponse>,
    ) {
        for (&id, w) in &mut self.by_id {
            if w.canceled > 0 || !w.armed {
                continue;
            }
            let mut events = Vec::new();
            for held in &mut w.held {
                while held.front().is_some_and(|e| e.rev() <= bound) {
                    events.extend(held.pop_front());
                }
            }
            if events.is_empty() {
                // A progress notification reports only what every shard has sent.
                if w.notify_due && bound > w.sent_upto {
                    w.notify_due = false;
                    w.sent_upto = bound;
                    outgoing.push(WireResponse { header, watch_id: id, ..Default::default() });
                }
                continue;
            }
            // One revision's events come from one shard, so a stable sort keeps them together.
            events.sort_by_key(WireEvent::rev);
            w.sent_upto = bound;
            for events in batches(events, shape.batch_events) {
                let resp = WireResponse { header, watch_id: id, events: events.into(), ..Default::default() };
                if w.fragment && resp.encoded_len() > shape.max_response_bytes {
                    outgoing.extend(resp.fragments(shape.max_response_bytes));
                } else {
                    outgoing.push(resp);
                }
            }
        }
    }
}

/// Splits `events` (in revision order) into runs of at most `most` events, cutting only between
/// revisions: a revision with more events than `most` is a run of its own.
fn batches(events: Vec<WireEvent>, most: usize) -> Vec<Vec<WireEvent>> {
    // `cur` is the run being filled; `rev` the events of the revision being read.
    fn close(out: &mut Vec<Vec<WireEvent>>, cur: &mut Vec<WireEvent>, rev: &mut Vec<WireEvent>, most: usize) {
        if !cur.is_empty() && cur.len() + rev.len() > most {
            out.push(std::mem::take(cur));
        }
        cur.append(rev);
    }
    let most = most.max(1);
    let (mut out, mut cur, mut rev) = (Vec::new(), Vec::new(), Vec::new());
    for e in events {
        if rev.first().is_some_and(|f: &WireEvent| f.rev() != e.rev()) {
            close(&mut out, &mut cur, &mut rev, most);
        }
        rev.push(e);
    }
    close(&mut out, &mut cur, &mut rev, most);
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests;
