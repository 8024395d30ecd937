//! What a shard spends applying one put in memory, on every member: the key index's lookup and
//! update, the record's encoding, the value cache and the round's overlay and batch, and the
//! event's encoding for the watch ring. No disk: the round's batch is taken as the shard takes it
//! for its log write (`MvccStore::take_round`), so only the in-memory work is timed.
//!
//! ```sh
//! cargo bench -p ballast-engine --bench apply
//! ```
//!
//! Keys are `put/00000000`-shaped as the cluster benchmark's puts, values 256 bytes, rounds of
//! 46 puts (a round's size at 100 in flight). Two cases: puts of keys not in the index yet, and
//! puts to 100,000 live keys picked at random. Prints one JSON line: the median over rounds of
//! the time per put, in nanoseconds.

// A benchmark measures elapsed time.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use ballast_engine::mvcc::MvccStore;
use ballast_engine::storage::MemBackend;
use ballast_engine::watch::wire::EncodedEvent;
use bytes::Bytes;

/// Live keys of the update case, as the cluster benchmark's key space.
const KEYS: u64 = 100_000;
/// Puts per round, as a round at 100 in flight carries.
const PER_ROUND: usize = 46;
/// Timed rounds per case.
const ROUNDS: usize = 2_000;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A fixed pseudo-random sequence (xorshift), the same in every run.
struct Picks(u64);

impl Picks {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn key(i: u64) -> Bytes {
    Bytes::from(format!("put/{i:08}"))
}

/// Applies one round of puts to `keys`; returns the time it took per put.
fn round(store: &mut MvccStore<MemBackend>, keys: &[Bytes], value: &Bytes) -> Duration {
    let start = Instant::now();
    for k in keys {
        let mut txn = store.begin();
        let prev = store.put_with(&mut txn, k.clone(), |_| Ok((value.clone(), 0))).expect("put");
        store.end(txn);
        std::hint::black_box(prev);
    }
    let (batch, events) = store.take_round();
    let encoded: Vec<EncodedEvent> = events.iter().map(EncodedEvent::new).collect();
    std::hint::black_box((batch, encoded));
    start.elapsed() / keys.len() as u32
}

fn main() {
    let (mut store, _) = MvccStore::open(MemBackend::new()).expect("open");
    let value = Bytes::from(vec![b'v'; 256]);
    let mut picks = Picks(0x9e37_79b9_7f4a_7c15);

    // New keys: every put adds a key (the index's and the live set's inserts), as the first
    // 100,000 puts of a run do; keys above the update case's range, spread as random keys are.
    let mut fresh = Vec::new();
    let mut n = 0;
    while n < KEYS {
        let keys: Vec<Bytes> = (0..PER_ROUND as u64).map(|i| key((n + i) * 7_919 % KEYS)).collect();
        n += PER_ROUND as u64;
        fresh.push(round(&mut store, &keys, &value));
    }
    // Updates: random live keys, as the rest of a run does.
    let mut update = Vec::new();
    for _ in 0..ROUNDS {
        let keys: Vec<Bytes> = (0..PER_ROUND).map(|_| key(picks.below(KEYS))).collect();
        update.push(round(&mut store, &keys, &value));
    }
    println!(
        "{{\"bench\":\"apply_put\",\"keys\":{KEYS},\"per_round\":{PER_ROUND},\"new_key_ns\":{},\"update_ns\":{}}}",
        median(fresh).as_nanos(),
        median(update).as_nanos()
    );
}
