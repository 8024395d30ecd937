//! A shard whose round outlasts the stall threshold is reported while it runs; a shard that waits
//! for messages is idle, not stalled.

use std::time::{Duration, Instant};

use ballast_engine::server::Engine;
use ballast_proto::etcdserverpb::{
    kv_client::KvClient, maintenance_client::MaintenanceClient, DefragmentRequest, PutRequest,
};
use bytes::Bytes;

#[test]
fn a_long_round_is_reported_and_waiting_shards_are_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = crate::serving::config(dir.path());
    cfg.shards = 2;
    // Far below what compacting the whole database takes (it rewrites and syncs every file).
    cfg.shard.stall_threshold = Duration::from_millis(20);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let engine = Engine::start(&cfg).expect("start engine");
        let beats = engine.heartbeats().to_vec();
        assert_eq!(beats.len(), 2);
        let served = crate::serving::serve(engine, &cfg).await;
        let channel = served.channel.clone();
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
        served.stop().await;
    });
}
