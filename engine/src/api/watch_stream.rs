//! What the watch service and its merger of several shards' streams share: the type of a
//! client's response stream, and the send into a shard that waits instead of losing a request.

use std::pin::Pin;

use futures::Stream;

use crate::error::EngineError;
use crate::shard::{ShardHandle, ShardMsg};
use crate::watch::Outgoing;

/// A client's stream of response batches.
pub(super) type ResponseStream = Pin<Box<dyn Stream<Item = Outgoing> + Send + 'static>>;

/// Sends `msg`, waiting while the shard's mailbox is full: a watch request must not be lost,
/// and the client's stream is the natural place to apply back-pressure.
pub(super) async fn send_reliably(shard: &ShardHandle, mut make: impl FnMut() -> ShardMsg) -> bool {
    loop {
        match shard.send(make()) {
            Ok(()) => return true,
            Err(EngineError::TooManyRequests) => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
            Err(_) => return false,
        }
    }
}
