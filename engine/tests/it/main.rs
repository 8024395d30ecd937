//! Engine integration tests (one binary, as the house style asks).

mod mvcc_model;
mod serving;
mod stall;
mod watch_backpressure;
