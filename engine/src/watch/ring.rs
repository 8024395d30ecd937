//! [`EventRing`]: the most recent events of a shard, in revision order, bounded in count and in
//! bytes.
//!
//! Events carry their previous value (attached once, when the write was applied), so a watcher
//! asking for `prev_kv` costs no extra read, and they are held encoded (see `wire`), so a
//! watcher served from the ring shares their bytes. The ring only ever holds whole revisions: it covers
//! every event with revision `>= first_rev()`, so a watcher resuming at or after that revision
//! is served from memory and older ones read history from the backend.

use std::collections::VecDeque;

use super::wire::EncodedEvent;

/// A bounded window of recent events.
#[derive(Debug)]
pub struct EventRing {
    events: VecDeque<EncodedEvent>,
    first_rev: i64,
    capacity: usize,
    /// Most bytes the events may hold ([`EncodedEvent::held_bytes`]).
    capacity_bytes: usize,
    /// Bytes the events hold.
    bytes: usize,
}

impl EventRing {
    /// Returns an empty ring covering revisions after `current_rev`, holding at most `capacity`
    /// events of at most `capacity_bytes` (more only while a single revision alone exceeds
    /// either).
    pub fn new(current_rev: i64, capacity: usize, capacity_bytes: usize) -> Self {
        Self {
            events: VecDeque::new(),
            first_rev: current_rev + 1,
            capacity: capacity.max(1),
            capacity_bytes,
            bytes: 0,
        }
    }

    /// Returns the lowest revision whose events are all in the ring.
    pub fn first_rev(&self) -> i64 {
        self.first_rev
    }

    /// Appends a round's events (ascending revisions, all above the ring's newest) and evicts
    /// whole revisions from the front while over either capacity.
    pub fn push(&mut self, events: impl IntoIterator<Item = EncodedEvent>, new_rev: i64) {
        for e in events {
            self.bytes += e.held_bytes();
            self.events.push_back(e);
        }
        while self.events.len() > self.capacity || self.bytes > self.capacity_bytes {
            let Some(oldest) = self.events.front().map(EncodedEvent::rev) else { break };
            if self.events.back().map(EncodedEvent::rev) == Some(oldest) {
                break; // never split a revision, even an oversized one
            }
            while self.events.front().is_some_and(|e| e.rev() == oldest) {
                if let Some(e) = self.events.pop_front() {
                    self.bytes -= e.held_bytes();
                }
            }
            self.first_rev = oldest + 1;
        }
        if self.events.is_empty() {
            self.first_rev = new_rev + 1;
        }
    }

    /// Returns the events with revision `>= from`, in order; the caller checks `first_rev()`.
    pub fn since(&self, from: i64) -> impl Iterator<Item = &EncodedEvent> {
        let start = self.events.partition_point(|e| e.rev() < from);
        self.events.range(start..)
    }

    /// Returns the number of events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Returns true when no event is held.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_proto::mvccpb::{Event, KeyValue};

    fn ev(rev: i64) -> EncodedEvent {
        EncodedEvent::new(&Event {
            kv: Some(KeyValue { mod_revision: rev, ..Default::default() }),
            ..Default::default()
        })
    }

    #[test]
    fn evicts_whole_revisions() {
        let mut ring = EventRing::new(1, 3, usize::MAX);
        assert_eq!(ring.first_rev(), 2);
        ring.push([ev(2), ev(2)], 2);
        ring.push([ev(3)], 3);
        assert_eq!((ring.len(), ring.first_rev()), (3, 2));
        ring.push([ev(4), ev(4)], 4);
        // Revision 2 (two events) goes; 3 and 4 stay.
        assert_eq!((ring.len(), ring.first_rev()), (3, 3));
        assert_eq!(ring.since(4).count(), 2);
        ring.push([ev(5), ev(5), ev(5), ev(5)], 5);
        assert_eq!((ring.len(), ring.first_rev()), (4, 5), "an oversized revision is kept whole");
    }

    #[test]
    fn evicts_whole_revisions_over_the_byte_bound() {
        let big = |rev: i64| {
            EncodedEvent::new(&Event {
                kv: Some(KeyValue { mod_revision: rev, value: vec![0; 1_000].into(), ..Default::default() }),
                prev_kv: Some(KeyValue { mod_revision: rev - 1, value: vec![0; 1_000].into(), ..Default::default() }),
                ..Default::default()
            })
        };
        let size = big(2).held_bytes();
        assert!(size > 2_000, "an event holds its value and its previous one");
        // Room for five such events by bytes, for a thousand by count.
        let mut ring = EventRing::new(1, 1_000, 5 * size);
        for rev in 2..=11 {
            ring.push([big(rev)], rev);
        }
        assert_eq!((ring.len(), ring.first_rev()), (5, 7));
        assert_eq!(ring.bytes, 5 * size);
        // A revision larger than the bound alone is kept whole.
        ring.push((0..8).map(|_| big(12)), 12);
        assert_eq!((ring.len(), ring.first_rev(), ring.bytes), (8, 12, 8 * size));
        assert_eq!(ring.since(12).count(), 8);
    }
}
