//! Engine integration tests (one binary, as the house style asks).

// These tests wait on real servers and threads, so they read the real clock.
#![allow(clippy::disallowed_methods)]

mod metrics_full_mailbox;
mod mvcc_model;
mod serving;
mod stall;
mod stream_burst;
mod watch_backpressure;
