use super::*;
use ballast_proto::mvccpb::{Event, KeyValue};

fn ev(rev: i64, key: &str) -> WireEvent {
    WireEvent::encode(&Event {
        kv: Some(KeyValue { key: key.as_bytes().to_vec().into(), mod_revision: rev, ..Default::default() }),
        ..Default::default()
    })
}

fn shape(runs: &[Vec<WireEvent>]) -> Vec<Vec<i64>> {
    runs.iter().map(|r| r.iter().map(WireEvent::rev).collect()).collect()
}

const SHAPE: Shape = Shape { batch_events: 1000, max_response_bytes: 1 << 20 };

fn created(id: i64) -> WireResponse {
    WireResponse { watch_id: id, created: true, ..Default::default() }
}

fn events(id: i64, revs: &[i64]) -> WireResponse {
    WireResponse { watch_id: id, events: revs.iter().map(|r| ev(*r, "k")).collect(), ..Default::default() }
}

fn released(out: &[WireResponse]) -> Vec<i64> {
    out.iter().flat_map(|r| r.events.iter().map(WireEvent::rev)).collect()
}

#[test]
fn batches_cut_between_revisions_only() {
    // Revisions 1..=5; revision 3 has three events (a txn), the rest one.
    let events = vec![ev(1, "a"), ev(2, "b"), ev(3, "c"), ev(3, "d"), ev(3, "e"), ev(4, "f"), ev(5, "g")];
    assert_eq!(shape(&batches(events.clone(), 2)), vec![vec![1, 2], vec![3, 3, 3], vec![4, 5]]);
    assert_eq!(shape(&batches(events.clone(), 4)), vec![vec![1, 2], vec![3, 3, 3, 4], vec![5]]);
    assert_eq!(shape(&batches(events.clone(), 100)), vec![vec![1, 2, 3, 3, 3, 4, 5]]);
    // Nothing lost, order kept, whatever the limit.
    for most in 0..9 {
        let flat: Vec<WireEvent> = batches(events.clone(), most).into_iter().flatten().collect();
        assert_eq!(flat, events, "limit {most}");
    }
    assert!(batches(Vec::new(), 3).is_empty());
}

/// The merge's turn as it happened once: the bound was read while shard 1 had not yet created
/// the watcher (so it showed no lag), then the drain took shard 1's `created`. Released against
/// that bound, shard 0's later events would go out before shard 1's history below them.
#[test]
fn a_watcher_completed_after_the_bound_was_read_waits_for_the_next_bound() {
    let mut w = CrossWatchers::new(2);
    let mut out = Vec::new();
    assert_eq!(w.take(0, &mut created(0), false), Taken::Kept);
    assert_eq!(w.take(0, &mut events(0, &[5, 7]), false), Taken::Kept);
    // Turn 1: the bound (10) is read, then the drain finds shard 1's `created`.
    w.arm();
    assert_eq!(w.take(1, &mut created(0), false), Taken::Created);
    w.release(10, None, SHAPE, &mut out);
    assert!(out.is_empty(), "released against a bound read before shard 1 created the watcher");
    assert!(w.holding());
    // Turn 2: shard 1's history arrives (its lag mark held the bound below it meanwhile).
    w.arm();
    assert_eq!(w.take(1, &mut events(0, &[6, 8]), false), Taken::Kept);
    w.release(8, None, SHAPE, &mut out);
    assert_eq!(released(&out), vec![5, 6, 7, 8]);
    assert!(!w.holding());
}

/// Held events go out only up to the bound, in revision order over the shards; a cancel from
/// one shard drops what is held and the watcher is forgotten once every shard canceled it.
#[test]
fn release_stops_at_the_bound_and_a_cancel_drops_what_is_held() {
    let mut w = CrossWatchers::new(3);
    let mut out = Vec::new();
    for s in 0..3 {
        w.take(s, &mut created(4), true);
    }
    w.arm();
    w.take(0, &mut events(4, &[3, 9]), true);
    w.take(1, &mut events(4, &[4]), true);
    w.take(2, &mut events(4, &[2, 6]), true);
    w.release(6, None, SHAPE, &mut out);
    assert_eq!(released(&out), vec![2, 3, 4, 6]);
    assert!(out.iter().all(|r| r.watch_id == 4));
    let cancel = || WireResponse { watch_id: 4, canceled: true, ..Default::default() };
    assert_eq!(w.take(1, &mut cancel(), true), Taken::FirstCancel { gone: false });
    assert!(!w.holding(), "the cancel dropped revision 9");
    out.clear();
    w.release(20, None, SHAPE, &mut out);
    assert!(out.is_empty());
    assert_eq!(w.take(0, &mut cancel(), true), Taken::Kept);
    assert_eq!(w.take(2, &mut cancel(), true), Taken::Gone);
}
