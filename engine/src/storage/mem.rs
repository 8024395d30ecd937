//! [`KvBackend`] in memory: ordered maps per column family behind one lock.
//!
//! Used by unit and property tests that want the engine's behaviour without disk I/O. `sync` is
//! meaningless here; a "restart" in a test reuses the same handle.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;

use super::{Cf, KvBackend, ScanOrder, StorageError, WriteBatch, WriteOp, WriteOpts};

type Table = BTreeMap<Vec<u8>, Vec<u8>>;

/// An in-memory backend; clones share the same data.
#[derive(Clone, Debug, Default)]
pub struct MemBackend {
    tables: Arc<RwLock<BTreeMap<Cf, Table>>>,
}

impl MemBackend {
    /// Returns an empty backend.
    pub fn new() -> Self {
        Self::default()
    }
}

impl KvBackend for MemBackend {
    fn write(&self, batch: WriteBatch, _opts: WriteOpts) -> Result<(), StorageError> {
        let mut tables = self.tables.write();
        for op in batch.ops {
            match op {
                WriteOp::Put(cf, k, v) => {
                    tables.entry(cf).or_default().insert(k, v);
                }
                WriteOp::Delete(cf, k) => {
                    tables.entry(cf).or_default().remove(&k);
                }
                WriteOp::DeleteRange(cf, s, e) => {
                    if s < e {
                        let t = tables.entry(cf).or_default();
                        let doomed: Vec<Vec<u8>> = t.range(s..e).map(|(k, _)| k.clone()).collect();
                        for k in doomed {
                            t.remove(&k);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.tables.read().get(&cf).and_then(|t| t.get(key).cloned()))
    }

    fn scan(
        &self,
        cf: Cf,
        start: &[u8],
        end: Option<&[u8]>,
        order: ScanOrder,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let tables = self.tables.read();
        let Some(t) = tables.get(&cf) else { return Ok(()) };
        if end.is_some_and(|e| e <= start) {
            return Ok(());
        }
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        let range = t.range::<[u8], _>((Bound::Included(start), upper));
        match order {
            ScanOrder::Forward => {
                for (k, v) in range {
                    if !visit(k, v) {
                        break;
                    }
                }
            }
            ScanOrder::Reverse => {
                for (k, v) in range.rev() {
                    if !visit(k, v) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn compact_all(&self) -> Result<(), StorageError> {
        Ok(())
    }

    fn approximate_size(&self) -> u64 {
        let tables = self.tables.read();
        tables.values().flat_map(|t| t.iter()).map(|(k, v)| (k.len() + v.len()) as u64).sum()
    }

    fn checkpoint(&self, dir: &Path) -> Result<(), StorageError> {
        // A flat dump: length-prefixed (cf, key, value) records. Only tests use it.
        std::fs::create_dir_all(dir)?;
        let mut out = Vec::new();
        for (cf, t) in self.tables.read().iter() {
            for (k, v) in t {
                for part in [cf.name().as_bytes(), k.as_slice(), v.as_slice()] {
                    out.extend_from_slice(&(part.len() as u32).to_be_bytes());
                    out.extend_from_slice(part);
                }
            }
        }
        std::fs::write(dir.join("mem.dump"), out)?;
        Ok(())
    }

    fn open_checkpoint(dir: &Path) -> Result<Self, StorageError> {
        let data = std::fs::read(dir.join("mem.dump"))?;
        let backend = Self::new();
        let mut wb = WriteBatch::new();
        let mut rest = data.as_slice();
        let mut take = || -> Result<Vec<u8>, StorageError> {
            let bad = || StorageError::Corrupt { cf: "mem", what: "checkpoint dump" };
            let len = rest.get(..4).ok_or_else(bad)?;
            let len = u32::from_be_bytes(len.try_into().map_err(|_| bad())?) as usize;
            let part = rest.get(4..4 + len).ok_or_else(bad)?.to_vec();
            rest = &rest[4 + len..];
            Ok(part)
        };
        while let Ok(cf) = take() {
            let (k, v) = (take()?, take()?);
            let cf = Cf::ALL
                .iter()
                .copied()
                .find(|c| c.name().as_bytes() == cf.as_slice())
                .ok_or(StorageError::Corrupt { cf: "mem", what: "column family" })?;
            wb.put(cf, k, v);
        }
        backend.write(wb, WriteOpts { sync: true })?;
        Ok(backend)
    }
}
