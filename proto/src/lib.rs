//! The etcd v3 wire protocol as Rust types: `etcdserverpb` (requests, responses, the KV, Watch,
//! Lease, Cluster, Maintenance and Auth services, with tonic server and client stubs) and `mvccpb`
//! (`KeyValue`, `Event`).
//!
//! The `.proto` files in `proto/` are written from etcd's published field numbers and service
//! paths; they are the contract with every etcd client and must stay wire-identical to etcd's.
//! `ballastpb` holds the raft log entry format of the engine, which is internal. `coalesce` is
//! the one hand-written part: the connection wrapper both the engine and the load tool put
//! around their HTTP/2 sockets. `bytes` fields are `bytes::Bytes`, so an encoded key or value can be shared between many
//! responses without copying (watch fan-out relies on this).
#![allow(missing_docs, unreachable_pub, clippy::all, missing_debug_implementations)]

pub mod coalesce;

/// The encoded `FileDescriptorSet` of every proto in `proto/`, for code that maps messages by
/// their descriptors (the engine's JSON gateway).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

/// Storage types: `KeyValue` and `Event`.
pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

/// etcd's auth records: `User`, `Role`, `Permission`.
pub mod authpb {
    tonic::include_proto!("authpb");
}

/// Requests, responses and services of the etcd v3 API.
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

/// Ballast's raft log entry format (not part of the etcd API).
pub mod ballastpb {
    tonic::include_proto!("ballastpb");
}

pub mod healthpb {
    tonic::include_proto!("grpc.health.v1");
}

pub mod v3lockpb {
    tonic::include_proto!("v3lockpb");
}

pub mod v3electionpb {
    tonic::include_proto!("v3electionpb");
}
