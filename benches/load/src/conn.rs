//! Connections of the watch scenarios: a few tonic channels shared by many streams, because one
//! connection serialises on its stream and flow-control limits. The KV scenarios make their calls
//! on h2 directly ([`crate::grpc`]).
//!
//! Each channel's socket is a [`CoalescingStream`]: h2 writes a connection's queued frames once
//! per flush, and without a pause the connection task flushes after every single request (tokio
//! runs the task a request just woke next, before the other request tasks that are ready). One
//! scheduler turn before each flush lets the requests issued at the same moment leave in one
//! `writev`. This is the client's own cost per request and changes nothing on the wire but how
//! frames are grouped into segments, so it applies the same to every server measured.

use std::io;

use ballast_proto::coalesce::CoalescingStream;
use ballast_proto::etcdserverpb::{kv_client::KvClient, watch_client::WatchClient};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Opens `n` channels to `url`.
pub(crate) async fn channels(url: &str, n: usize) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let connector = tower::service_fn(|uri: Uri| async move {
            let host = uri.host().unwrap_or("127.0.0.1");
            let port = uri.port_u16().unwrap_or(2379);
            let tcp = TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            io::Result::Ok(TokioIo::new(CoalescingStream::new(tcp)))
        });
        out.push(Endpoint::from_shared(url.to_string())?.connect_with_connector(connector).await?);
    }
    Ok(out)
}

/// A KV client on channel `i` (round robin).
pub(crate) fn kv(chans: &[Channel], i: usize) -> KvClient<Channel> {
    KvClient::new(chans[i % chans.len()].clone()).max_decoding_message_size(64 << 20)
}

/// A Watch client on channel `i` (round robin).
pub(crate) fn watch(chans: &[Channel], i: usize) -> WatchClient<Channel> {
    WatchClient::new(chans[i % chans.len()].clone()).max_decoding_message_size(64 << 20)
}
