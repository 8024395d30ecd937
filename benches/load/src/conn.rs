//! Connections: a few HTTP/2 channels shared by many in-flight requests, because one connection
//! serialises on its stream and flow-control limits.

use ballast_proto::etcdserverpb::{kv_client::KvClient, watch_client::WatchClient};
use tonic::transport::{Channel, Endpoint};

/// Opens `n` channels to `url`.
pub(crate) async fn channels(url: &str, n: usize) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        out.push(Endpoint::from_shared(url.to_string())?.tcp_nodelay(true).connect().await?);
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
