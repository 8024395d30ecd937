//! Watch through the etcd-client crate and through raw gRPC (for client-chosen watch IDs,
//! progress requests, and bursts of requests on one stream).

use std::time::Duration;

use ballast_proto::etcdserverpb::{
    watch_client::WatchClient, watch_create_request::FilterType, watch_request::RequestUnion, WatchCancelRequest,
    WatchCreateRequest, WatchProgressRequest, WatchRequest, WatchResponse,
};
use bytes::Bytes;
use etcd_client::{EventType, WatchOptions};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::harness::Server;

all_targets!(watch_events_in_order, watch_history_and_compaction, watch_raw_protocol, watch_request_burst);

/// Receives the next response or fails after 10 s.
async fn next(stream: &mut tonic::Streaming<WatchResponse>) -> WatchResponse {
    tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("a watch response within 10 s")
        .expect("stream ok")
        .expect("stream open")
}

async fn watch_events_in_order(s: Server) {
    let mut c = s.client().await;
    let mut stream = c.watch("w/", Some(WatchOptions::new().with_prefix().with_prev_key())).await.expect("watch");
    let created = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("created")
        .expect("ok")
        .expect("open");
    assert!(created.created());
    c.put("w/a", "1", None).await.expect("put");
    c.put("other", "1", None).await.expect("put");
    c.put("w/a", "2", None).await.expect("put");
    c.delete("w/a", None).await.expect("delete");
    let mut events = Vec::new();
    while events.len() < 3 {
        let r = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("events")
            .expect("ok")
            .expect("open");
        for e in r.events() {
            let kv = e.kv().expect("kv");
            events.push((
                e.event_type(),
                kv.value().to_vec(),
                kv.mod_revision(),
                e.prev_kv().map(|p| p.value().to_vec()),
            ));
        }
    }
    assert_eq!(
        events,
        vec![
            (EventType::Put, b"1".to_vec(), 2, None),
            (EventType::Put, b"2".to_vec(), 4, Some(b"1".to_vec())),
            (EventType::Delete, vec![], 5, Some(b"2".to_vec())),
        ]
    );
}

async fn watch_history_and_compaction(s: Server) {
    let mut c = s.client().await;
    for i in 0..5 {
        c.put("h", format!("{i}"), None).await.expect("put");
    }
    let mut stream = c.watch("h", Some(WatchOptions::new().with_start_revision(3))).await.expect("watch");
    let mut revs = Vec::new();
    while revs.len() < 4 {
        let r = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("events")
            .expect("ok")
            .expect("open");
        revs.extend(r.events().iter().map(|e| e.kv().expect("kv").mod_revision()));
    }
    assert_eq!(revs, vec![3, 4, 5, 6], "history from the start revision, once each");
    c.compact(5, None).await.expect("compact");
    let mut stream = c.watch("h", Some(WatchOptions::new().with_start_revision(2))).await.expect("watch");
    let mut canceled = None;
    for _ in 0..3 {
        let r = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.expect("response").expect("ok");
        match r {
            Some(r) if r.canceled() => {
                canceled = Some(r.compact_revision());
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(canceled, Some(5), "a watch below the compaction is canceled with compact_revision");
}

fn create(key: &str, watch_id: i64, start: i64) -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: Bytes::copy_from_slice(key.as_bytes()),
            watch_id,
            start_revision: start,
            ..Default::default()
        })),
    }
}

async fn watch_raw_protocol(s: Server) {
    let mut c = s.client().await;
    c.put("r", "0", None).await.expect("put");
    let mut wc = WatchClient::connect(s.url()).await.expect("connect");
    let (tx, rx) = mpsc::channel(16);
    // A client-chosen ID is used; reusing it on the stream is refused like etcd does. The first
    // request is queued before the call: etcd (grpc-go) sends response headers only with its
    // first response.
    tx.send(create("r", 7, 0)).await.expect("send");
    let call = tokio::time::timeout(Duration::from_secs(10), wc.watch(ReceiverStream::new(rx)));
    let mut stream = call.await.expect("watch call within 10 s").expect("watch").into_inner();
    let r = next(&mut stream).await;
    assert!(r.created && r.watch_id == 7);
    assert_eq!(r.header.as_ref().map(|h| h.revision), Some(2));
    tx.send(create("r", 7, 0)).await.expect("send");
    let r = next(&mut stream).await;
    assert!(r.created && r.canceled && r.watch_id == -1, "duplicate id: {r:?}");

    // A second watcher with a filter, on the same stream.
    let mut noput = create("r", 8, 0);
    if let Some(RequestUnion::CreateRequest(c)) = &mut noput.request_union {
        c.filters = vec![FilterType::Noput as i32];
    }
    tx.send(noput).await.expect("send");
    assert!(next(&mut stream).await.created);

    // Progress request on a synced stream: watch_id -1, no events, current revision.
    tx.send(WatchRequest { request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})) })
        .await
        .expect("send");
    let r = next(&mut stream).await;
    assert_eq!((r.watch_id, r.events.len(), r.created, r.canceled), (-1, 0, false, false));
    assert_eq!(r.header.as_ref().map(|h| h.revision), Some(2));

    c.put("r", "1", None).await.expect("put");
    c.delete("r", None).await.expect("delete");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let r = next(&mut stream).await;
        for e in &r.events {
            seen.push((r.watch_id, e.r#type, e.kv.as_ref().map(|kv| kv.mod_revision).unwrap_or_default()));
        }
    }
    seen.sort();
    assert_eq!(seen, vec![(7, 0, 3), (7, 1, 4), (8, 1, 4)], "watch 8 filters out puts");

    tx.send(WatchRequest { request_union: Some(RequestUnion::CancelRequest(WatchCancelRequest { watch_id: 7 })) })
        .await
        .expect("send");
    let r = next(&mut stream).await;
    assert!(r.canceled && r.watch_id == 7);
    c.put("r", "2", None).await.expect("put");
    c.delete("r", None).await.expect("delete");
    let r = next(&mut stream).await;
    assert_eq!(r.watch_id, 8, "only the remaining watcher reports");
}

fn cancel(watch_id: i64) -> WatchRequest {
    WatchRequest { request_union: Some(RequestUnion::CancelRequest(WatchCancelRequest { watch_id })) }
}

/// Reads until `want` responses matching `keep` arrived, skipping progress answers (etcd 3.4
/// answers a progress request on a stream without watchers; Ballast, like later etcd, does not).
async fn collect_until(
    stream: &mut tonic::Streaming<WatchResponse>,
    want: usize,
    keep: impl Fn(&WatchResponse) -> bool,
) -> Vec<WatchResponse> {
    let mut got = Vec::new();
    while got.len() < want {
        let r = next(stream).await;
        if keep(&r) {
            got.push(r);
        } else {
            assert!(r.watch_id == -1 && !r.created && !r.canceled && r.events.is_empty(), "unexpected {r:?}");
        }
    }
    got
}

/// A client that sends thousands of requests before reading anything: the server reads them
/// only as fast as it writes their answers (its control credits), and requests that nothing
/// answers (cancels of unknown IDs, progress requests without watchers) must not use them up.
async fn watch_request_burst(s: Server) {
    const WATCHERS: i64 = 2_000;
    let mut c = s.client().await;
    c.put("b/0/x", "0", None).await.expect("put");
    let mut wc = WatchClient::connect(s.url()).await.expect("connect");
    let (tx, rx) = mpsc::channel(4_000);
    for i in 0..300 {
        tx.send(cancel(1_000_000 + i)).await.expect("send");
        tx.send(WatchRequest { request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})) })
            .await
            .expect("send");
    }
    for i in 0..WATCHERS {
        let req = WatchCreateRequest {
            key: Bytes::from(format!("b/{i}/")),
            range_end: Bytes::from(format!("b/{i}0")),
            prev_kv: true,
            ..Default::default()
        };
        tx.send(WatchRequest { request_union: Some(RequestUnion::CreateRequest(req)) }).await.expect("send");
    }
    let call = tokio::time::timeout(Duration::from_secs(10), wc.watch(ReceiverStream::new(rx)));
    let mut stream = call.await.expect("watch call within 10 s").expect("watch").into_inner();
    let created = collect_until(&mut stream, WATCHERS as usize, |r| r.created).await;
    let ids: Vec<i64> = created.iter().map(|r| r.watch_id).collect();
    assert_eq!(ids, (0..WATCHERS).collect::<Vec<_>>(), "every created response, in order");
    assert!(created.iter().all(|r| !r.canceled && r.header.as_ref().map(|h| h.revision) == Some(2)));

    // The watchers work: the last one sees its key with the previous value.
    c.put(format!("b/{}/x", WATCHERS - 1), "1", None).await.expect("put");
    c.put(format!("b/{}/x", WATCHERS - 1), "2", None).await.expect("put");
    let events = collect_until(&mut stream, 2, |r| !r.events.is_empty()).await;
    assert!(events.iter().all(|r| r.watch_id == WATCHERS - 1), "{events:?}");
    let prev = events[1].events[0].prev_kv.as_ref().map(|kv| kv.value.clone());
    assert_eq!(prev, Some(Bytes::from_static(b"1")));

    // Cancel half of them in one burst: one canceled response each, in order.
    for id in 0..WATCHERS / 2 {
        tx.send(cancel(id)).await.expect("send");
    }
    let canceled = collect_until(&mut stream, (WATCHERS / 2) as usize, |r| r.canceled).await;
    let ids: Vec<i64> = canceled.iter().map(|r| r.watch_id).collect();
    assert_eq!(ids, (0..WATCHERS / 2).collect::<Vec<_>>());
}
