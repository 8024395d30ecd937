//! A shard whose round outlasts the stall threshold is reported while it runs; a shard that waits
//! for messages is idle, not stalled.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use ballast_engine::server::{Engine, EngineConfig};
use ballast_proto::etcdserverpb::{
    kv_client::KvClient, maintenance_client::MaintenanceClient, DefragmentRequest, PutRequest,
};
use bytes::Bytes;

fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

#[test]
fn a_long_round_is_reported_and_waiting_shards_are_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let mut cfg =
        EngineConfig { data_dir: dir.path().join("data"), listen_client: vec![addr], shards: 2, ..Default::default() };
    // Far below what compacting the whole database takes (it rewrites and syncs every file).
    cfg.shard.stall_threshold = Duration::from_millis(20);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let engine = Engine::start(&cfg).expect("start engine");
        let beats = engine.heartbeats().to_vec();
        assert_eq!(beats.len(), 2);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(engine.serve(async move {
            let _ = stop_rx.await;
        }));
        let url = format!("http://{addr}");
        let channel = loop {
            match tonic::transport::Endpoint::from_shared(url.clone()).expect("url").connect().await {
                Ok(c) => break c,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let kv_channel = channel.clone();
        let mut kv = KvClient::new(channel);
        // Keys outside /registry/ live on shard 0.
        let value = Bytes::from(vec![b'v'; 64 << 10]);
        for i in 0..256 {
            let key = Bytes::from(format!("stall/{i:04}"));
            kv.put(PutRequest { key, value: value.clone(), ..Default::default() }).await.expect("put");
        }
        // A defragmentation compacts shard 0's whole RocksDB in one round, as etcd's blocks its
        // backend. Bounded: a detector that never reports fails here rather than hanging.
        let mut maintenance = MaintenanceClient::new(kv_channel);
        let mut defrags = 0;
        while beats[0].stalls() == 0 {
            assert!(defrags < 50, "no stall reported after {defrags} defragmentations of 16 MiB");
            maintenance.defragment(DefragmentRequest {}).await.expect("defragment");
            defrags += 1;
        }
        // Both shards go back to waiting for messages: a loop that did not mark itself idle
        // before it waits would look busy (and, after the threshold, stalled) for good.
        let deadline = Instant::now() + Duration::from_secs(10);
        while beats.iter().any(|b| b.is_busy()) {
            assert!(Instant::now() < deadline, "a shard never marked itself idle");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _ = stop_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
    });
}
