// These tests measure real threads and deadlines.
#![allow(clippy::disallowed_methods)]

use super::*;
use std::sync::Arc;

#[test]
fn a_round_past_the_threshold_is_reported_once_and_an_idle_shard_never() {
    let epoch = Instant::now();
    let stuck = Arc::new(Heartbeat::new(epoch));
    let idle = Arc::new(Heartbeat::new(epoch));
    let watch =
        StallWatch::spawn(epoch, vec![Arc::downgrade(&stuck), Arc::downgrade(&idle)], Duration::from_millis(40))
            .expect("start the watch");
    stuck.busy();
    idle.idle();
    // Wait for the report rather than for a time: the watch must see the stall.
    let deadline = Instant::now() + Duration::from_secs(20);
    while stuck.stalls() == 0 {
        assert!(Instant::now() < deadline, "a stalled shard was never reported");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Still in the same round: no second report, however many times the watch looks.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(stuck.stalls(), 1);
    // A new round is a new chance to stall.
    stuck.busy();
    let deadline = Instant::now() + Duration::from_secs(20);
    while stuck.stalls() < 2 {
        assert!(Instant::now() < deadline, "a second stall was never reported");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(idle.stalls(), 0, "a shard waiting for messages is not stalled");
    drop((stuck, idle));
    watch.join().expect("the watch ends once every heartbeat is gone");
}
