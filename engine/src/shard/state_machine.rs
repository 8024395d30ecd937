//! [`ShardStateMachine`]: what a committed raft entry does to a shard.
//!
//! Entries carry one [`RaftCommand`] each. A round of committed entries is applied as one batch:
//! history records, lease records, alarms and the applied index go to RocksDB in a single write,
//! so after a crash the state and the applied index always agree and replay resumes exactly
//! after the last applied entry.

// #[PerformanceCriticalPath]
use std::collections::BTreeSet;
use std::sync::Arc;

use ballast_proto::ballastpb::{raft_command::Command, RaftCommand};
use ballast_proto::etcdserverpb::{
    alarm_request::AlarmAction, AlarmMember, AlarmRequest, AlarmResponse, CompactionResponse, LeaseGrantResponse,
    LeaseRevokeResponse, ResponseHeader,
};
use ballast_proto::mvccpb::Event;
use ballast_raft::{Entry, EntryType, RaftError, StateMachine};
use prost::Message;

use super::msg::WriteResponse;
use crate::apply::kv;
use crate::clock::Clock;
use crate::error::{EngineError, Result};
use crate::lease::Lessor;
use crate::mvcc::{KeyRange, MvccStore};
use crate::storage::{Cf, KvBackend, StorageError, WriteOpts};

/// Meta key of the last applied raft index (u64 BE).
pub const META_APPLIED_INDEX: &[u8] = b"applied_index";
const META_ALARM_PREFIX: &[u8] = b"alarm/";

/// What one applied round produced.
#[derive(Debug, Default)]
pub struct ApplyOutput {
    /// Answers for the requests proposed by this member, by request ID.
    pub replies: Vec<(u64, Result<WriteResponse>)>,
    /// The round's events, in revision order.
    pub events: Vec<Event>,
}

/// The replicated state of one shard: MVCC store, leases, alarms, applied index.
#[derive(Debug)]
pub struct ShardStateMachine<B: KvBackend> {
    store: MvccStore<B>,
    lessor: Lessor,
    alarms: BTreeSet<i32>,
    applied_index: u64,
    member_id: u64,
    clock: Arc<dyn Clock>,
}

impl<B: KvBackend> ShardStateMachine<B> {
    /// Opens the state on `backend`.
    ///
    /// # Errors
    /// A storage error, or `Corrupt` for undecodable records.
    pub fn open(
        backend: B,
        min_lease_ttl: i64,
        value_cache_bytes: usize,
        member_id: u64,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let applied_index = match backend.get(Cf::Meta, META_APPLIED_INDEX)? {
            Some(v) => u64::from_be_bytes(
                v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "applied index" })?,
            ),
            None => 0,
        };
        let mut alarms = BTreeSet::new();
        backend.scan(
            Cf::Meta,
            META_ALARM_PREFIX,
            Some(b"alarm0"),
            crate::storage::ScanOrder::Forward,
            &mut |k, _| {
                if let Some(t) = k.get(META_ALARM_PREFIX.len()..).and_then(|s| <[u8; 4]>::try_from(s).ok()) {
                    alarms.insert(i32::from_be_bytes(t));
                }
                true
            },
        )?;
        let (store, live) = MvccStore::open_with(backend, value_cache_bytes)?;
        let lessor = Lessor::restore(store.backend(), live, min_lease_ttl, clock.now())?;
        Ok(Self { store, lessor, alarms, applied_index, member_id, clock })
    }

    /// Returns the MVCC store.
    pub fn store(&self) -> &MvccStore<B> {
        &self.store
    }

    /// Returns the MVCC store and the lease table, for reads that need both.
    pub fn store_and_leases(&mut self) -> (&mut MvccStore<B>, &mut Lessor) {
        (&mut self.store, &mut self.lessor)
    }

    /// Returns the lease table.
    pub fn lessor_mut(&mut self) -> &mut Lessor {
        &mut self.lessor
    }

    /// Returns the active alarms (etcd `AlarmType` numbers).
    pub fn alarms(&self) -> &BTreeSet<i32> {
        &self.alarms
    }

    fn apply_round(&mut self, entries: &[Entry]) -> Result<ApplyOutput> {
        let mut out = ApplyOutput::default();
        for e in entries {
            self.applied_index = self.applied_index.max(e.index);
            if e.data.is_empty() || e.entry_type != EntryType::EntryNormal as i32 {
                continue; // leader no-ops and conf changes change no shard state
            }
            let cmd = match RaftCommand::decode(e.data.as_slice()) {
                Ok(cmd) => cmd,
                Err(_) => {
                    tracing::error!(index = e.index, "skipping undecodable raft entry");
                    continue;
                }
            };
            let result = match cmd.command {
                Some(c) => self.apply_command(c),
                None => continue,
            };
            // Storage failures are fatal for the whole round: the in-memory state may be ahead
            // of what can be written.
            let result = match result {
                Err(EngineError::Storage(e)) => return Err(EngineError::Storage(e)),
                r => r,
            };
            if cmd.request_id != 0 {
                out.replies.push((cmd.request_id, result));
            }
        }
        self.store.pending_batch().put(
            Cf::Meta,
            META_APPLIED_INDEX.to_vec(),
            self.applied_index.to_be_bytes().to_vec(),
        );
        // Unsynced: the raft log entries behind this round were synced before they committed.
        out.events = self.store.flush(WriteOpts { sync: false })?;
        Ok(out)
    }

    fn apply_command(&mut self, cmd: Command) -> Result<WriteResponse> {
        let header = |revision| Some(ResponseHeader { revision, ..Default::default() });
        match cmd {
            Command::Put(r) => kv::apply_put(&mut self.store, &mut self.lessor, &r).map(WriteResponse::Put),
            Command::DeleteRange(r) => {
                kv::apply_delete(&mut self.store, &mut self.lessor, &r).map(WriteResponse::DeleteRange)
            }
            Command::Txn(r) => kv::apply_txn(&mut self.store, &mut self.lessor, &r).map(WriteResponse::Txn),
            Command::Compaction(r) => {
                self.store.compact(r.revision)?;
                Ok(WriteResponse::Compaction(CompactionResponse { header: header(self.store.current_rev()) }))
            }
            Command::LeaseGrant(r) => {
                let now = self.clock.now();
                let ttl = self.lessor.grant(r.id, r.ttl, now, self.store.pending_batch())?;
                Ok(WriteResponse::LeaseGrant(LeaseGrantResponse {
                    header: header(self.store.current_rev()),
                    id: r.id,
                    ttl,
                    error: String::new(),
                }))
            }
            Command::LeaseRevoke(r) => {
                let keys = self.lessor.keys(r.id).ok_or(EngineError::LeaseNotFound)?;
                // All of a lease's keys go in one revision, as etcd does.
                let mut txn = self.store.begin();
                for k in keys {
                    self.store.delete_range(&mut txn, &KeyRange::single(k))?;
                }
                self.store.end(txn);
                self.lessor.remove(r.id, self.store.pending_batch());
                Ok(WriteResponse::LeaseRevoke(LeaseRevokeResponse { header: header(self.store.current_rev()) }))
            }
            Command::Alarm(r) => Ok(WriteResponse::Alarm(self.apply_alarm(&r))),
        }
    }

    fn apply_alarm(&mut self, r: &AlarmRequest) -> AlarmResponse {
        let mut key = META_ALARM_PREFIX.to_vec();
        key.extend_from_slice(&r.alarm.to_be_bytes());
        let changed = match AlarmAction::try_from(r.action) {
            Ok(AlarmAction::Activate) if r.alarm != 0 && self.alarms.insert(r.alarm) => {
                self.store.pending_batch().put(Cf::Meta, key, Vec::new());
                vec![r.alarm]
            }
            Ok(AlarmAction::Deactivate) if self.alarms.remove(&r.alarm) => {
                self.store.pending_batch().delete(Cf::Meta, key);
                vec![r.alarm]
            }
            _ => vec![],
        };
        let alarms = changed.into_iter().map(|alarm| AlarmMember { member_id: self.member_id, alarm }).collect();
        AlarmResponse {
            header: Some(ResponseHeader { revision: self.store.current_rev(), ..Default::default() }),
            alarms,
        }
    }
}

impl<B: KvBackend> StateMachine for ShardStateMachine<B> {
    type Output = Result<ApplyOutput>;

    fn apply(&mut self, entries: &[Entry]) -> Self::Output {
        self.apply_round(entries)
    }

    fn applied_index(&self) -> u64 {
        self.applied_index
    }

    fn snapshot(&self) -> Result<Vec<u8>, RaftError> {
        // Followers are not built yet; a single-member shard never sends a snapshot.
        Err(RaftError::Store(Box::new(EngineError::NotCapable)))
    }

    fn restore(&mut self, _data: &[u8], _index: u64) -> Result<(), RaftError> {
        Err(RaftError::Store(Box::new(EngineError::NotCapable)))
    }
}
