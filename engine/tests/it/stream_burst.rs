//! Thousands of watch streams opened at once on one connection, each with its create request
//! queued before the server reads it (a client starting many informers' watches together, or
//! reconnecting them): every stream must open and every watcher be created. HTTP/2 servers count
//! small unread DATA frames against a budget tied to the connection's flow-control window and
//! close the connection (GOAWAY ENHANCE_YOUR_CALM) when it runs out, which took every watch of
//! the connection with it.

use std::time::Duration;

use ballast_engine::server::Engine;
use ballast_proto::etcdserverpb::{
    watch_client::WatchClient, watch_request::RequestUnion, WatchCreateRequest, WatchRequest,
};
use bytes::Bytes;
use tokio_stream::wrappers::ReceiverStream;

/// Well past what a 1 MiB connection window's budget allows (about 2,400 create requests of
/// some 40 bytes each unread at once).
const STREAMS: usize = 8_000;

#[test]
fn a_burst_of_streams_on_one_connection_all_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = crate::serving::config(dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let engine = Engine::start(&cfg).expect("start engine");
        let served = crate::serving::serve(engine, &cfg).await;
        let mut tasks = Vec::new();
        for s in 0..STREAMS {
            let mut client = WatchClient::new(served.channel.clone());
            tasks.push(tokio::spawn(async move {
                let (tx, rx) = tokio::sync::mpsc::channel(1);
                let req = WatchCreateRequest { key: Bytes::from(format!("burst/{s}")), ..Default::default() };
                tx.send(WatchRequest { request_union: Some(RequestUnion::CreateRequest(req)) })
                    .await
                    .expect("queue create");
                let mut stream = client.watch(ReceiverStream::new(rx)).await.map_err(|e| e.to_string())?.into_inner();
                let msg = stream.message().await.map_err(|e| e.to_string())?.ok_or("stream ended")?;
                if !msg.created {
                    return Err(format!("first response is not `created`: {msg:?}"));
                }
                // Hold the stream open until every stream is created.
                Ok::<_, String>((tx, stream))
            }));
        }
        let mut held = Vec::new();
        let mut failed = Vec::new();
        for t in tasks {
            match tokio::time::timeout(Duration::from_secs(120), t).await.expect("bounded").expect("task") {
                Ok(h) => held.push(h),
                Err(e) => failed.push(e),
            }
        }
        assert!(failed.is_empty(), "{} of {STREAMS} streams failed, first: {}", failed.len(), failed[0]);
        drop(held);
        served.stop().await;
    });
}
