//! Durability: kill -9 under write load, restart, and check that every acknowledged write is
//! there at the revision it was acknowledged with, the revision did not go backwards, and writes
//! continue. Keys are namespaced like kube's, so with several shards the writers' keys spread
//! over shards that share one revision sequence.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::harness::Server;

both_targets!(kill9_keeps_acknowledged_writes);

async fn kill9_keeps_acknowledged_writes(mut s: Server) {
    let acked: Arc<Mutex<Vec<(String, String, i64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    // 16 writers, one request in flight each.
    for w in 0..16 {
        let mut c = s.client().await;
        let acked = acked.clone();
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (k, v) = (format!("/registry/crash/w{w}/{i}"), format!("value-{w}-{i}"));
                match tokio::time::timeout(Duration::from_secs(2), c.put(k.clone(), v.clone(), None)).await {
                    Ok(Ok(r)) => acked.lock().await.push((k, v, r.header().map_or(0, |h| h.revision()))),
                    _ => break, // the server is gone: this write's fate is unknown
                }
                i += 1;
            }
        }));
    }
    let loaded = crate::harness::wait_for(Duration::from_secs(20), async || acked.lock().await.len() >= 300).await;
    assert!(loaded, "writers made no progress");
    s.kill9();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().await.clone();
    let top = acked.iter().map(|a| a.2).max().unwrap_or(0);
    s.restart().await;
    let mut c = s.client().await;
    for (k, v, rev) in &acked {
        let got = c.get(k.as_str(), None).await.expect("get");
        assert_eq!(
            got.kvs().first().map(|kv| (kv.value().to_vec(), kv.mod_revision())),
            Some((v.clone().into_bytes(), *rev)),
            "acknowledged {k} lost or renumbered"
        );
    }
    let after = c.put("/registry/crash/after", "1", None).await.expect("writes continue");
    assert!(after.header().expect("header").revision() > top, "revision went backwards");
}
