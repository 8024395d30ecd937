//! `/metrics` scraped while writers keep the shard's mailbox at its cap: every scrape answers
//! with content (the scrape reads atomics and never queues behind the shard), the mailbox-depth
//! series shows the queue, and the server is healthy once the load stops.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballast_engine::server::Engine;
use ballast_proto::etcdserverpb::{kv_client::KvClient, PutRequest};
use bytes::Bytes;

/// Mailbox slots: far fewer than the writers, so the mailbox fills and writers are refused.
const CAPACITY: usize = 16;
/// Concurrent writers, each putting in a loop.
const WRITERS: usize = 128;

/// `curl -s -w '\n%{http_code}' <url>` on the blocking pool: (status, body).
async fn curl(url: String) -> (u16, String) {
    tokio::task::spawn_blocking(move || {
        let out =
            Command::new("curl").args(["-s", "--max-time", "10", "-w", "\n%{http_code}", &url]).output().expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').expect("curl's status line");
        (code.trim().parse().unwrap_or(0), body.to_string())
    })
    .await
    .expect("curl task")
}

fn series(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).and_then(|v| v.parse().ok()))
}

#[test]
fn metrics_answer_while_the_mailbox_is_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = crate::serving::config(dir.path());
    cfg.shard.mailbox_capacity = CAPACITY;
    let url = format!("http://{}", cfg.listen_client[0]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async move {
        let engine = Engine::start(&cfg).expect("start engine");
        let served = crate::serving::serve(engine, &cfg).await;
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let mut kv = KvClient::new(served.channel.clone());
            let (stop, ok, refused) = (stop.clone(), ok.clone(), refused.clone());
            writers.push(tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let put = PutRequest {
                        key: Bytes::from(format!("full/{w}/{}", i % 16)),
                        value: Bytes::from_static(b"v"),
                        ..Default::default()
                    };
                    match kv.put(put).await {
                        Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                        Err(s) => {
                            assert_eq!(
                                (s.code(), s.message()),
                                (tonic::Code::ResourceExhausted, "etcdserver: too many requests"),
                                "a full mailbox refuses as etcd's full queue does"
                            );
                            refused.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                    i += 1;
                }
            }));
        }
        // Scrape until one shows a queued mailbox while writers are being refused (bounded);
        // every scrape must answer, with the series.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut scrapes = 0;
        let mut deepest = 0.0f64;
        loop {
            let (code, text) = curl(format!("{url}/metrics")).await;
            scrapes += 1;
            assert_eq!(code, 200, "scrape {scrapes} under load: {text}");
            assert_eq!(series(&text, "etcd_server_has_leader"), Some(1.0), "scrape {scrapes}");
            let depth = series(&text, "ballast_shard_mailbox_depth{shard=\"0\"}").expect("the mailbox-depth series");
            assert!(depth <= CAPACITY as f64, "depth {depth} over the cap");
            deepest = deepest.max(depth);
            if deepest > 0.0 && refused.load(Ordering::Relaxed) > 0 && scrapes >= 5 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no scrape saw a queued mailbox in {scrapes} scrapes (deepest {deepest}, refused {})",
                refused.load(Ordering::Relaxed)
            );
        }
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            tokio::time::timeout(Duration::from_secs(30), w).await.expect("writer stops").expect("writer");
        }
        assert!(ok.load(Ordering::Relaxed) > 0, "writes went through beside the refusals");
        // Healthy afterwards: /health answers true and a write is taken.
        let (code, body) = curl(format!("{url}/health")).await;
        assert_eq!((code, body.as_str()), (200, "{\"health\":\"true\",\"reason\":\"\"}"));
        let mut kv = KvClient::new(served.channel.clone());
        let put =
            PutRequest { key: Bytes::from_static(b"after"), value: Bytes::from_static(b"v"), ..Default::default() };
        kv.put(put).await.expect("a write after the load");
        served.stop().await;
    });
}
