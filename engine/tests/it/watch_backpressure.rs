//! Many watch streams registering watchers at once through a nearly full shard mailbox: every
//! stream must open and every watcher must be created (etcd never refuses a stream for load).

use std::time::Duration;

use ballast_engine::server::Engine;
use ballast_proto::etcdserverpb::{
    watch_client::WatchClient, watch_request::RequestUnion, WatchCreateRequest, WatchRequest,
};
use bytes::Bytes;
use tokio_stream::wrappers::ReceiverStream;

const STREAMS: usize = 100;
const PER_STREAM: usize = 100;

#[test]
fn streams_open_and_register_through_a_full_mailbox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = crate::serving::config(dir.path());
    // Far fewer slots than the 10,000 create requests below: senders must wait, not fail.
    cfg.shard.mailbox_capacity = 8;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let engine = Engine::start(&cfg).expect("start engine");
        let served = crate::serving::serve(engine, &cfg).await;
        let channel = served.channel.clone();
        let mut tasks = Vec::new();
        for s in 0..STREAMS {
            let channel = channel.clone();
            tasks.push(tokio::spawn(async move {
                let (tx, rx) = tokio::sync::mpsc::channel(PER_STREAM);
                for w in 0..PER_STREAM {
                    let req = WatchCreateRequest {
                        key: Bytes::from(format!("bp/{s}/{w}")),
                        prev_kv: true,
                        ..Default::default()
                    };
                    tx.send(WatchRequest { request_union: Some(RequestUnion::CreateRequest(req)) })
                        .await
                        .expect("queue create");
                }
                let mut stream =
                    WatchClient::new(channel).watch(ReceiverStream::new(rx)).await.expect("stream opens").into_inner();
                let mut created = 0;
                while created < PER_STREAM {
                    let msg = stream.message().await.expect("stream stays up").expect("stream not ended");
                    assert!(!msg.canceled, "watcher canceled: {}", msg.cancel_reason);
                    created += usize::from(msg.created);
                }
                drop(tx);
                created
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += tokio::time::timeout(Duration::from_secs(60), t).await.expect("bounded").expect("task");
        }
        assert_eq!(total, STREAMS * PER_STREAM);
        served.stop().await;
    });
}
