//! Multi-version concurrency control with etcd's revision model.
//!
//! Reading order: [`revision`] (what a revision is and how history is keyed), [`key_index`] (one
//! key's generations, with a worked example), [`index`] (all keys), [`live_set`] (counting the
//! newest keys), [`key_range`] (etcd's range conventions), [`rev_counter`] (the member's one revision
//! sequence, shared by its shards), [`store`] (the store: reads, write
//! transactions, compaction, history), [`value_cache`] (newest values in memory), [`record_head`]
//! (a history record read without its value), [`rebuild`] (the in-memory state built from
//! history records in order: at start-up, or from a raft snapshot as it arrives).
//! Request-level semantics (txn compares, sorting, limits, leases) live in `kv_apply`.

pub mod index;
pub mod key_index;
pub mod key_range;
pub mod live_set;
pub mod rebuild;
pub mod record_head;
pub mod rev_counter;
pub mod revision;
pub mod store;
pub mod value_cache;

pub use key_range::{prefix_end, KeyRange, RangeEnd};
pub use rebuild::{IndexRebuild, LiveLeases, Rebuilt};
pub use rev_counter::RevisionCounter;
pub use revision::Revision;
pub use store::{MvccStore, WriteTxn, DEFAULT_VALUE_CACHE_BYTES};
