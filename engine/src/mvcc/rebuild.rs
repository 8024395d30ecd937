//! [`IndexRebuild`]: a store's in-memory state built from its history records, taken one by
//! one in key (revision) order.
//!
//! Opening a store reads every record of `kv` once and feeds them here. A follower installing a
//! raft snapshot feeds the same records as they arrive from the leader instead (they pass
//! through the member on their way into its table files), so that after the ingest the state
//! is ready without reading the tables back: the records, their order and the code that takes
//! them are the same, so both give the same state.

use std::collections::HashMap;

use ballast_proto::mvccpb::KeyValue;
use bytes::Bytes;
use prost::Message;

use super::index::TreeIndex;
use super::record_head;
use super::revision::{self, Revision};
use super::value_cache::ValueCache;
use crate::error::Result;
use crate::storage::StorageError;

/// What the rebuild finds besides the index: the lease of every live key.
pub type LiveLeases = HashMap<Bytes, i64>;

/// What a store's history gives its in-memory state: the key index, the newest values within
/// the cache's budget, the lease of every live key and the newest main revision.
#[derive(Debug, PartialEq)]
pub struct Rebuilt {
    pub(super) index: TreeIndex,
    pub(super) cache: ValueCache,
    pub(super) leases: LiveLeases,
    /// The newest main revision of the history (1 when it is empty).
    pub(super) last_main: i64,
}

/// Builds a [`Rebuilt`] from history records given in key order.
#[derive(Debug)]
pub struct IndexRebuild {
    built: Rebuilt,
    /// A record did not decode: the history is damaged and the rest is not looked at.
    bad: bool,
}

impl IndexRebuild {
    /// Starts an empty build that keeps newest values up to `value_cache_bytes`.
    pub fn new(value_cache_bytes: usize) -> Self {
        Self {
            built: Rebuilt {
                index: TreeIndex::default(),
                cache: ValueCache::new(value_cache_bytes),
                leases: LiveLeases::new(),
                last_main: 1,
            },
            bad: false,
        }
    }

    /// Takes the next history record (`kv` key and value, keys ascending); false once a record
    /// did not decode, after which nothing more is taken.
    pub fn feed(&mut self, k: &[u8], v: &[u8]) -> bool {
        if self.bad {
            return false;
        }
        let (Some((rev, tomb)), Some(head)) = (revision::decode_key(k), record_head::decode(v)) else {
            self.bad = true;
            return false;
        };
        let b = &mut self.built;
        b.last_main = b.last_main.max(rev.main);
        if let Some(superseded) = b.index.get(&head.key, i64::MAX) {
            b.cache.remove(&superseded.modified);
        }
        if tomb {
            b.index.tombstone(&head.key, rev);
            b.leases.remove(&head.key);
            return true;
        }
        if head.lease != 0 {
            b.leases.insert(head.key.clone(), head.lease);
        } else {
            b.leases.remove(&head.key);
        }
        b.index.restore_put(head.key, Revision::new(head.create_revision, 0), rev, head.version);
        // Only a value the cache has room for is decoded (copied); the rest are stepped over.
        if b.cache.has_room(v.len()) {
            match KeyValue::decode(v) {
                Ok(kv) => b.cache.insert(rev, kv),
                Err(_) => {
                    self.bad = true;
                    return false;
                }
            }
        }
        true
    }

    /// Returns the state built from every record taken.
    ///
    /// # Errors
    /// `Corrupt` when a record did not decode.
    pub fn finish(self) -> Result<Rebuilt> {
        if self.bad {
            return Err(StorageError::Corrupt { cf: "kv", what: "undecodable history record" }.into());
        }
        Ok(self.built)
    }
}

impl Rebuilt {
    /// Returns the lease of every live key.
    pub fn leases(&self) -> &LiveLeases {
        &self.leases
    }

    /// Returns the number of keys with history.
    pub fn keys(&self) -> usize {
        self.index.len()
    }
}
