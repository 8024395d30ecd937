//! A timeline of the shards' rounds, written to a file when the member is started with
//! `--round-trace-file` (off by default), to see where a round's time goes across the members:
//! `benches/round-trace.sh` starts three members with it and reads their files together.
//!
//! Each line is `<µs since the Unix epoch> <shard> <mark> <count>`. The time is the wall clock's,
//! so that the files of members on one machine line up. A mark is taken by the shard thread
//! itself, in the shard's loop, its raft log store and the raft transport's send, at the points
//! a round passes ([`Mark`]); which shard is the thread's ([`set_shard`]).
//!
//! Off, a mark costs one atomic load. On, lines go to a buffer of [`BUFFER_BYTES`] that is written
//! out when full and when the member stops ([`flush`]); a member killed loses what is buffered.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::OnceLock;

use parking_lot::Mutex;

/// The buffer in front of the file: large enough that a member at tens of thousands of marks a
/// second writes a few times a second rather than per mark.
pub const BUFFER_BYTES: usize = 64 << 10;

/// The point of a round a line marks; the count's meaning is the mark's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// `W`: a client's write reached the shard thread (count: writes already waiting).
    WriteReceived,
    /// `B`: a leader began a round (count: writes waiting).
    RoundStart,
    /// `M`: raft messages from another member reached the shard thread (count: messages).
    RaftReceived,
    /// `T`: the shard handed raft messages to the transport (count: messages).
    RaftSent,
    /// `R0`: a Ready round began.
    ReadyStart,
    /// `R1`: a Ready round ended (count: 1 when it applied entries).
    ReadyEnd,
    /// `P0`: a follower began applying a round before its next append (count: entries).
    ApplyStart,
    /// `P1`: that apply ended (count: entries).
    ApplyEnd,
    /// `S0`: a write to the raft log store began (count: entries).
    LogWriteStart,
    /// `S1`: that write returned (count: 1 when synced).
    LogWriteEnd,
    /// `A`: a leader answered a round's writes (count: writes).
    Answered,
}

impl Mark {
    /// The mark's code in the file.
    pub fn code(self) -> &'static str {
        match self {
            Mark::WriteReceived => "W",
            Mark::RoundStart => "B",
            Mark::RaftReceived => "M",
            Mark::RaftSent => "T",
            Mark::ReadyStart => "R0",
            Mark::ReadyEnd => "R1",
            Mark::ApplyStart => "P0",
            Mark::ApplyEnd => "P1",
            Mark::LogWriteStart => "S0",
            Mark::LogWriteEnd => "S1",
            Mark::Answered => "A",
        }
    }
}

/// A trace file and its buffer.
#[derive(Debug)]
pub struct Trace {
    out: Mutex<BufWriter<File>>,
}

impl Trace {
    /// Creates (or truncates) the file at `path`.
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        Ok(Self { out: Mutex::new(BufWriter::with_capacity(BUFFER_BYTES, File::create(path)?)) })
    }

    /// Writes one line. A failed write is dropped: the trace is a diagnostic and never stops a
    /// shard.
    pub fn mark(&self, at_micros: u64, shard: u32, mark: Mark, count: usize) {
        let _ = writeln!(self.out.lock(), "{at_micros} {shard} {} {count}", mark.code());
    }

    /// Writes out what is buffered.
    pub fn flush(&self) {
        let _ = self.out.lock().flush();
    }
}

static TRACE: OnceLock<Trace> = OnceLock::new();

thread_local! {
    static SHARD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Starts the member's trace into `path`; marks before it, or a second call, write nothing.
///
/// # Errors
/// The file cannot be created.
pub fn open(path: &Path) -> std::io::Result<()> {
    let trace = Trace::create(path)?;
    let _ = TRACE.set(trace);
    Ok(())
}

/// Names the shard the calling thread's marks belong to (each shard thread, at its start).
pub fn set_shard(shard: u32) {
    SHARD.with(|s| s.set(shard));
}

/// Marks a point of a round on the calling shard thread, when the trace is on.
pub fn mark(mark: Mark, count: usize) {
    if let Some(trace) = TRACE.get() {
        trace.mark(crate::clock::unix_micros(), SHARD.with(std::cell::Cell::get), mark, count);
    }
}

/// Writes out what the member's trace has buffered (when the member stops).
pub fn flush() {
    if let Some(trace) = TRACE.get() {
        trace.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_time_shard_mark_and_count_in_order() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("trace");
        let trace = Trace::create(&path).expect("create");
        trace.mark(10, 0, Mark::RoundStart, 16);
        trace.mark(25, 0, Mark::LogWriteEnd, 1);
        trace.mark(30, 3, Mark::Answered, 16);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "", "buffered until flushed");
        trace.flush();
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "10 0 B 16\n25 0 S1 1\n30 3 A 16\n");
    }

    #[test]
    fn every_mark_has_its_own_code() {
        let all = [
            Mark::WriteReceived,
            Mark::RoundStart,
            Mark::RaftReceived,
            Mark::RaftSent,
            Mark::ReadyStart,
            Mark::ReadyEnd,
            Mark::ApplyStart,
            Mark::ApplyEnd,
            Mark::LogWriteStart,
            Mark::LogWriteEnd,
            Mark::Answered,
        ];
        let codes: std::collections::HashSet<_> = all.iter().map(|m| m.code()).collect();
        assert_eq!(codes.len(), all.len());
    }
}
