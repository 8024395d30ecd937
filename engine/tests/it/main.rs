//! Engine integration tests (one binary, as the house style asks).

mod mvcc_model;
mod serving;
mod stall;
mod stream_burst;
mod watch_backpressure;
