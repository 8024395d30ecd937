//! Black-box tests of the engine with real clients: `etcdctl` (Debian etcd-client 3.4) and the
//! `etcd-client` crate, plus raw gRPC for fields the crate does not expose. Every test body runs
//! twice, against `ballast serve` and against stock etcd (Debian etcd-server), so the
//! expectations are etcd's own. `kubectl_session` drives the whole product, `ballast serve`,
//! with kubectl. `cluster` runs three-member clusters of both, with faults.

// These tests wait on real processes, so they read the real clock.
#![allow(clippy::disallowed_methods)]

#[macro_use]
mod harness;
#[macro_use]
mod cluster_harness;

mod allocator_partition;
mod auth;
mod authority;
mod cluster;
mod cluster_frontend;
mod cluster_growth;
mod cluster_shards;
mod crash;
mod deploy;
mod etcdctl;
mod fatal_storage;
mod fault_proxy;
mod frontend_tls;
mod gateway;
mod health;
mod http;
mod kubectl_session;
mod kv;
mod lease;
mod lock_election;
mod maintenance;
mod partition;
mod security;
mod sharded_model;
mod shards;
mod slow_watcher;
mod snapshot_restore;
mod tls;
mod watch;
