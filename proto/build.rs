//! Generates the etcd v3 message types and both client and server stubs from `proto/`.
//!
//! Every `bytes` field is generated as `bytes::Bytes` so that a watch event's key and value can be
//! shared between many outgoing responses without copying.

fn main() {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .bytes(".")
        .file_descriptor_set_path(
            std::path::PathBuf::from(std::env::var("OUT_DIR").expect("invariant: cargo sets OUT_DIR"))
                .join("descriptors.bin"),
        )
        .compile_protos(
            &[
                "proto/rpc.proto",
                "proto/auth.proto",
                "proto/kv.proto",
                "proto/raftcmd.proto",
                "proto/peer.proto",
                "proto/health.proto",
                "proto/v3lock.proto",
                "proto/v3election.proto",
            ],
            &["proto"],
        )
        .expect("invariant: the etcd v3 protos in proto/ compile");
}
