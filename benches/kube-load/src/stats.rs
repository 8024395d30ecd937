//! The shared result types and `/proc` readings (`ballast-bench-stats`).

pub(crate) use ballast_bench_stats::{status_kb, CpuMark, Outcome, Samples};
