//! The lease table (etcd's lessor): granted leases, their TTLs, the keys attached to them, and
//! their expiry deadlines.
//!
//! Grants and revocations are raft commands applied here; attached keys follow the KV applier
//! through [`LeaseView`]. Deadlines are leader-local and never persisted: like etcd without
//! checkpointing, a lease's countdown restarts at its full TTL when a member starts or becomes
//! leader. Expired leases are revoked by the shard proposing a revoke, so every member deletes
//! the keys at the same revision.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::apply::LeaseView;
use crate::error::{EngineError, Result};
use crate::storage::{Cf, KvBackend, ScanOrder, StorageError, WriteBatch};

/// etcd's maximum lease TTL in seconds.
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

#[derive(Debug)]
struct Lease {
    granted_ttl: i64,
    deadline: Instant,
    keys: BTreeSet<Bytes>,
}

/// Answer of [`Lessor::time_to_live`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseTtl {
    /// Seconds left before expiry.
    pub remaining: i64,
    /// The TTL the lease was granted with.
    pub granted: i64,
    /// Attached keys, ascending.
    pub keys: Vec<Bytes>,
}

/// All leases of a shard.
#[derive(Debug)]
pub struct Lessor {
    leases: HashMap<i64, Lease>,
    /// Leases for which a revoke has been proposed and not yet applied.
    revoking: HashSet<i64>,
    min_ttl: i64,
}

fn key(id: i64) -> [u8; 8] {
    id.to_be_bytes()
}

impl Lessor {
    /// Loads granted leases from `backend` and attaches `live` keys; every deadline starts at
    /// `now + TTL`.
    ///
    /// # Errors
    /// A storage error, or `Corrupt` for an undecodable record.
    pub fn restore<B: KvBackend>(backend: &B, live: HashMap<Bytes, i64>, min_ttl: i64, now: Instant) -> Result<Self> {
        let mut leases = HashMap::new();
        let mut bad = false;
        backend.scan(Cf::Lease, &[], None, ScanOrder::Forward, &mut |k, v| match (
            <[u8; 8]>::try_from(k),
            <[u8; 8]>::try_from(v),
        ) {
            (Ok(k), Ok(v)) => {
                let ttl = i64::from_be_bytes(v);
                leases.insert(
                    i64::from_be_bytes(k),
                    Lease { granted_ttl: ttl, deadline: now + secs(ttl), keys: BTreeSet::new() },
                );
                true
            }
            _ => {
                bad = true;
                false
            }
        })?;
        if bad {
            return Err(StorageError::Corrupt { cf: "lease", what: "lease record" }.into());
        }
        for (k, id) in live {
            if let Some(l) = leases.get_mut(&id) {
                l.keys.insert(k);
            }
        }
        Ok(Self { leases, revoking: HashSet::new(), min_ttl })
    }

    /// Applies a grant of lease `id` (chosen before proposing) with `ttl` seconds, raised to the
    /// minimum TTL; returns the granted TTL.
    ///
    /// # Errors
    /// `LeaseExist` when `id` is taken.
    pub fn grant(&mut self, id: i64, ttl: i64, now: Instant, batch: &mut WriteBatch) -> Result<i64> {
        if self.leases.contains_key(&id) {
            return Err(EngineError::LeaseExist);
        }
        let ttl = ttl.max(self.min_ttl);
        self.leases.insert(id, Lease { granted_ttl: ttl, deadline: now + secs(ttl), keys: BTreeSet::new() });
        batch.put(Cf::Lease, key(id).to_vec(), ttl.to_be_bytes().to_vec());
        Ok(ttl)
    }

    /// Returns the keys attached to `id`, or None when the lease does not exist.
    pub fn keys(&self, id: i64) -> Option<Vec<Bytes>> {
        self.leases.get(&id).map(|l| l.keys.iter().cloned().collect())
    }

    /// Removes lease `id` (its keys must already be deleted).
    pub fn remove(&mut self, id: i64, batch: &mut WriteBatch) {
        self.leases.remove(&id);
        self.revoking.remove(&id);
        batch.delete(Cf::Lease, key(id).to_vec());
    }

    /// Restarts `id`'s countdown; returns its granted TTL, or None when it does not exist or is
    /// already being revoked.
    pub fn keep_alive(&mut self, id: i64, now: Instant) -> Option<i64> {
        if self.revoking.contains(&id) {
            return None;
        }
        let l = self.leases.get_mut(&id)?;
        l.deadline = now + secs(l.granted_ttl);
        Some(l.granted_ttl)
    }

    /// Returns what `LeaseTimeToLive` reports for `id`.
    pub fn time_to_live(&self, id: i64, now: Instant) -> Option<LeaseTtl> {
        let l = self.leases.get(&id)?;
        Some(LeaseTtl {
            remaining: l.deadline.saturating_duration_since(now).as_secs() as i64,
            granted: l.granted_ttl,
            keys: l.keys.iter().cloned().collect(),
        })
    }

    /// Returns every lease ID, ascending.
    pub fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.leases.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Returns up to `max` expired leases not yet being revoked and marks them as being revoked.
    pub fn take_expired(&mut self, now: Instant, max: usize) -> Vec<i64> {
        let mut out: Vec<i64> = self
            .leases
            .iter()
            .filter(|(id, l)| l.deadline <= now && !self.revoking.contains(id))
            .map(|(id, _)| *id)
            .collect();
        out.sort_unstable();
        out.truncate(max);
        self.revoking.extend(out.iter().copied());
        out
    }

    /// Forgets pending revokes (their proposals may have been lost) and restarts every countdown,
    /// as etcd does when a member becomes leader.
    pub fn promote(&mut self, now: Instant) {
        self.revoking.clear();
        for l in self.leases.values_mut() {
            l.deadline = now + secs(l.granted_ttl);
        }
    }

    /// Returns the minimum TTL grants are raised to.
    pub fn min_ttl(&self) -> i64 {
        self.min_ttl
    }
}

impl LeaseView for Lessor {
    fn exists(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    fn attach(&mut self, id: i64, key: &Bytes) {
        if let Some(l) = self.leases.get_mut(&id) {
            // A copy: the request's key is a slice of its whole gRPC frame (see `MvccStore::put`).
            l.keys.insert(Bytes::copy_from_slice(key));
        }
    }

    fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&id) {
            l.keys.remove(key);
        }
    }
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(s.clamp(0, MAX_LEASE_TTL) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{KvBackend, MemBackend, WriteOpts};

    #[test]
    fn grant_expire_and_restore() {
        let backend = MemBackend::new();
        let t0 = crate::clock::ManualClock::new();
        use crate::clock::Clock;
        let now = t0.now();
        let mut lessor = Lessor::restore(&backend, HashMap::new(), 2, now).expect("restore");
        let mut wb = WriteBatch::new();
        assert_eq!(lessor.grant(7, 1, now, &mut wb).expect("grant"), 2, "raised to the minimum");
        assert!(matches!(lessor.grant(7, 5, now, &mut wb), Err(EngineError::LeaseExist)));
        backend.write(wb, WriteOpts::default()).expect("write");
        lessor.attach(7, &Bytes::from_static(b"k"));
        assert_eq!(lessor.time_to_live(7, now).map(|t| (t.remaining, t.granted, t.keys.len())), Some((2, 2, 1)));
        assert!(lessor.take_expired(now + Duration::from_secs(1), 10).is_empty());
        assert_eq!(lessor.take_expired(now + Duration::from_secs(2), 10), vec![7]);
        assert!(lessor.take_expired(now + Duration::from_secs(3), 10).is_empty(), "already being revoked");
        assert_eq!(lessor.keep_alive(7, now), None, "no keep-alive while revoking");

        let live = HashMap::from([(Bytes::from_static(b"k"), 7)]);
        let later = now + Duration::from_secs(100);
        let restored = Lessor::restore(&backend, live, 2, later).expect("restore");
        assert_eq!(
            restored.time_to_live(7, later).map(|t| (t.remaining, t.keys)),
            Some((2, vec![Bytes::from_static(b"k")]))
        );
        assert_eq!(restored.ids(), vec![7]);
    }
}
