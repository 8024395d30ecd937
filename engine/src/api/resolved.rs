//! The evaluating member's side of `cluster::resolved`: it sends what it knows about resolved
//! revisions to the other members, and takes theirs when another member evaluates.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::ResolvedRevision;

use super::Api;

/// How long one send may take before it is given up; the next fact follows anyway.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Sends a fact resent unchanged after this many intervals, for a member that missed the last
/// one while no write moved the revision (a restarted member, a dropped message).
const RESEND_EVERY: u32 = 200;

/// Every `interval`, while this member evaluates the writes of a cluster of several shards,
/// sends its resolved revision and applied indexes to every other member when the revision
/// moved (and every `RESEND_EVERY` intervals regardless). One send per peer is in flight at a
/// time: a slow peer misses facts, never queues them (the newest one says everything).
pub async fn announce(api: Api, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sent = 0;
    let mut idle = 0u32;
    let busy: Arc<parking_lot::Mutex<std::collections::HashMap<u64, Arc<AtomicBool>>>> = Arc::default();
    loop {
        ticker.tick().await;
        let group = api.spread_group();
        if let Some(group) = group {
            group.tick();
        }
        let Some(fact) = api.local_fact() else { continue };
        if group.is_some() {
            // The allocator's member holds every revision only once its own shards applied them.
            api.resolution.offer(fact.clone());
        } else {
            api.resolution.raise(fact.revision);
        }
        idle += 1;
        if fact.revision == last_sent && idle < RESEND_EVERY {
            continue;
        }
        idle = 0;
        last_sent = fact.revision;
        if let Some(group) = group {
            group.publish_fact(fact.clone());
        }
        let me = api.member.id;
        let peers: Vec<u64> = api.membership.read().members.iter().filter(|m| m.id != me).map(|m| m.raft_id).collect();
        for peer in peers {
            // A member with a `Revisions` stream open to this one takes the fact from it.
            if group.is_some_and(|g| g.has_fact_stream(peer)) {
                continue;
            }
            let Some(mut client) = api.router.client(peer) else { continue };
            let flag = Arc::clone(busy.lock().entry(peer).or_default());
            if flag.swap(true, Ordering::SeqCst) {
                continue;
            }
            let msg = ResolvedRevision {
                cluster_id: api.member.cluster_id,
                revision: fact.revision,
                applied_index: fact.applied.clone(),
            };
            tokio::spawn(async move {
                let _ = tokio::time::timeout(SEND_TIMEOUT, client.resolved(msg)).await;
                flag.store(false, Ordering::SeqCst);
            });
        }
    }
}
