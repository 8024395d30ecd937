//! Writes a member sends on to the member leading their shard, on the raft connection to it
//! (`transport`), and their answers coming back on the leader's raft connection to this member.
//!
//! A write through a follower used to take a gRPC stream: the writer's task handed it to a
//! stream task, HTTP/2 carried it, and on the leader a task per stream handed it to the shard
//! and each answer back; every hop a wake-up and HTTP/2's framing on both members. Now the
//! writes forwarded to one leader within one scheduler turn are gathered into one frame, which
//! the first writer's task writes to the leader's raft connection itself when the connection
//! is idle (else the peer's sender thread takes it with the next batch); the leader's reader
//! thread hands each write to the shard thread, which writes the answers of a round, once
//! applied, to the connection back in one frame; this member's reader thread hands each answer
//! to its writer. [`Forwarders`](super::forward_pending::Forwarders) keeps the writers waiting.
//!
//! Failures keep the unary call's meaning, which the caller maps to etcd's errors: a write that
//! was never handed to a connection (unknown peer, a full queue, a queue dropped with a broken
//! connection, a connection the leader had closed: `peer_link::closed_by_peer`) fails worded
//! as a connection failure, safe to retry elsewhere; a write a broken
//! connection may have carried, or whose answer a broken connection back may have lost, fails
//! as "may have been applied". A leader that goes silent without closing its connections is
//! bounded by the writer's deadline.

use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::{ForwardAnswer, ForwardItem, ForwardResponse, RaftCommand};
use tokio::sync::oneshot;
use tonic::{Code, Status};

use super::transport::{Parcel, PeerRouter};

impl PeerRouter {
    /// Sends `write` for shard `shard` to `peer` (which leads it) and waits, at most `timeout`,
    /// for its answer.
    ///
    /// # Errors
    /// The status the leader answered, or one standing for a transport failure (see the module
    /// doc); `DeadlineExceeded` when `timeout` passes first.
    pub async fn forward_write(
        self: &Arc<Self>,
        peer: u64,
        shard: u32,
        write: RaftCommand,
        timeout: Duration,
    ) -> Result<ForwardResponse, Status> {
        let (reply, answer) = oneshot::channel();
        let id = self.forwarders().add(peer, reply);
        // Forgets the write when the writer stops waiting (a deadline, a dropped request).
        let _waiting = Waiting { router: self, id };
        if self.forwarders().gather(peer, ForwardItem { id, shard, write: Some(write) }) {
            // The first write of a frame waits one scheduler turn, in which the writes other
            // requests forward to the same leader (a burst decoded from one read of a client
            // connection) join it: the leader's reader thread and shard thread then wake once
            // for them all instead of once each. The frame leaves when `Flush` drops, also
            // when this writer is dropped meanwhile.
            let flush = Flush { router: self, peer };
            tokio::task::yield_now().await;
            drop(flush);
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(Status::unavailable("the forwarded write was dropped")),
            Err(_) => Err(Status::deadline_exceeded("forwarded write timed out")),
        }
    }

    /// Sends the answers of writes `peer` sent on here (a shard thread, once they are
    /// applied). Dropped when the connection has no room: their writers' deadlines end the
    /// wait, with the answer a timeout gets (the write may have been applied).
    pub fn send_answers(&self, peer: u64, answers: Vec<ForwardAnswer>) {
        let n = answers.len();
        if self.post(peer, Parcel { answers, ..Parcel::default() }).is_err() {
            tracing::debug!(
                peer = format_args!("{peer:x}"),
                answers = n,
                "peer queue full or peer unknown; answers dropped"
            );
        }
    }

    /// Hands the answers that came from `peer` to their writers.
    pub fn take_answers(&self, answers: Vec<ForwardAnswer>) {
        for a in answers {
            let result = match a.response {
                Some(r) => Ok(r),
                None => Err(Status::new(Code::from_i32(a.code), a.message)),
            };
            self.forwarders().answer(a.id, result);
        }
    }

    /// Fails the forwarded writes of `parcel`, which never reached a connection.
    pub(super) fn not_sent(&self, parcel: Parcel, why: &str) {
        for w in parcel.writes {
            self.forwarders().answer(w.id, Err(unsent(why)));
        }
    }

    /// A raft connection to or from `peer` ended: the writes waiting on it may have been
    /// applied, and their answers will not come.
    pub fn connection_lost(&self, peer: u64) {
        // Not worded as a connection failure (the caller would send the write again).
        let status = Status::unavailable("forwarding: the link to the leader broke with the write in flight");
        let n = self.forwarders().fail_peer(peer, &status);
        if n > 0 {
            tracing::debug!(
                peer = format_args!("{peer:x}"),
                writes = n,
                "forwarded writes failed with their connection"
            );
        }
    }
}

/// Sends the writes gathered for one leading member when dropped.
struct Flush<'a> {
    router: &'a PeerRouter,
    peer: u64,
}

impl Drop for Flush<'_> {
    fn drop(&mut self) {
        let writes = self.router.forwarders().take_gathered(self.peer);
        if writes.is_empty() {
            return;
        }
        if let Err(parcel) = self.router.post(self.peer, Parcel { writes, ..Parcel::default() }) {
            self.router.not_sent(parcel, "the raft connection to the leader is closed or full");
        }
    }
}

/// Forgets a forwarded write when dropped.
struct Waiting<'a> {
    router: &'a PeerRouter,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.router.forwarders().forget(self.id);
    }
}

/// A failure before anything was sent: worded as a connection failure, which the caller may
/// retry.
fn unsent(why: &str) -> Status {
    Status::unavailable(format!("forwarding: connect: {why}"))
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::net::{TcpListener, TcpStream};

    use ballast_proto::ballastpb::{forward_response, raft_command::Command, RaftBatch};
    use ballast_proto::etcdserverpb::{PutRequest, PutResponse};
    use prost::Message as _;

    use super::*;
    use crate::cluster::raft_wire::{FrameReader, PRELUDE};
    use crate::cluster::ClusterConfig;

    fn put(key: &[u8]) -> RaftCommand {
        RaftCommand {
            command: Some(Command::Put(PutRequest { key: bytes::Bytes::copy_from_slice(key), ..Default::default() })),
            ..Default::default()
        }
    }

    /// Accepts the router's raft connection.
    fn accept(listener: &TcpListener) -> TcpStream {
        let (mut conn, _) = listener.accept().expect("the sender dials");
        conn.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut prelude = [0; 8];
        conn.read_exact(&mut prelude).expect("the prelude");
        assert_eq!(&prelude, PRELUDE);
        conn
    }

    /// Reads batches from `conn` until one carries writes.
    fn writes_sent(conn: &mut TcpStream) -> RaftBatch {
        let mut reader = FrameReader::new(1 << 20);
        loop {
            while let Some(body) = reader.take().expect("a frame within the limit") {
                if !body.is_empty() {
                    let batch = RaftBatch::decode(body).expect("a batch");
                    if !batch.writes.is_empty() {
                        return batch;
                    }
                }
            }
            assert!(reader.fill(conn).expect("the sender writes within the timeout") > 0, "the sender closed");
        }
    }

    /// Accepts the router's raft connection (on a blocking thread) and reads until a batch
    /// carries writes; the listener closes then.
    async fn first_batch(listener: TcpListener) -> (TcpStream, RaftBatch) {
        tokio::task::spawn_blocking(move || {
            let mut conn = accept(&listener);
            let batch = writes_sent(&mut conn);
            (conn, batch)
        })
        .await
        .expect("reader")
    }

    /// The answer to write `id` that the leader applied at `index`.
    fn applied(id: u64, index: u64) -> ForwardAnswer {
        ForwardAnswer {
            id,
            response: Some(ForwardResponse { applied_index: index, response: None }),
            ..Default::default()
        }
    }

    /// A listener standing for member 2, and member 1's router (started, short keep-alives)
    /// with it as its peer at the returned URL.
    fn listening() -> (TcpListener, Arc<PeerRouter>, String) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let cfg = ClusterConfig {
            keepalive_interval: Duration::from_millis(20),
            reconnect_backoff_min: Duration::from_millis(10),
            ..ClusterConfig::default()
        };
        let router = PeerRouter::new(1, 9, &[(2, url.clone())], cfg);
        router.start();
        (listener, router, url)
    }

    fn spawn_write(
        router: &Arc<PeerRouter>,
        key: &'static [u8],
    ) -> tokio::task::JoinHandle<Result<ForwardResponse, Status>> {
        let router = Arc::clone(router);
        tokio::spawn(async move { router.forward_write(2, 3, put(key), Duration::from_secs(10)).await })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_goes_on_the_raft_connection_and_its_answer_comes_back_by_number() {
        let (listener, router, _) = listening();
        let writer = spawn_write(&router, b"k");
        let (conn, batch) = first_batch(listener).await;
        assert_eq!((batch.cluster_id, batch.from, batch.to), (9, 1, 2));
        let item = &batch.writes[0];
        assert_eq!(item.shard, 3);
        assert_eq!(item.write, Some(put(b"k")));
        // An answer to a number nobody waits for is ignored; the writer's own is taken.
        let answer = |id| ForwardAnswer {
            id,
            response: Some(ForwardResponse {
                applied_index: 17,
                response: Some(forward_response::Response::Put(PutResponse::default())),
            }),
            ..Default::default()
        };
        router.take_answers(vec![answer(item.id + 1000), answer(item.id)]);
        let got = writer.await.expect("writer").expect("answered");
        assert_eq!(got.applied_index, 17);
        assert_eq!(router.forwarders().waiting(), 0, "nothing left waiting");
        drop(conn);
    }

    /// Writes forwarded to one leader in one scheduler turn leave in one frame, even with the
    /// connection up and idle (where each would otherwise be written at once by itself).
    #[tokio::test]
    async fn writes_forwarded_in_one_turn_leave_in_one_frame() {
        let (listener, router, _) = listening();
        let first = spawn_write(&router, b"first");
        let (mut conn, batch) = first_batch(listener).await;
        router.take_answers(vec![applied(batch.writes[0].id, 1)]);
        first.await.expect("writer").expect("answered");
        let writers: Vec<_> = [b"a", b"b", b"c"].into_iter().map(|k| spawn_write(&router, k)).collect();
        let batch = tokio::task::spawn_blocking(move || writes_sent(&mut conn)).await.expect("reader");
        let sent: Vec<RaftCommand> = batch.writes.iter().filter_map(|w| w.write.clone()).collect();
        assert_eq!(sent, vec![put(b"a"), put(b"b"), put(b"c")], "one frame, in the order they were sent");
        router.take_answers(batch.writes.iter().map(|w| applied(w.id, 2)).collect());
        for w in writers {
            assert_eq!(w.await.expect("writer").expect("answered").applied_index, 2);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_error_answer_keeps_etcds_status_and_a_lost_connection_fails_the_write_as_maybe_applied() {
        let (listener, router, _) = listening();
        let first = spawn_write(&router, b"a");
        let (mut conn, batch) = first_batch(listener).await;
        router.take_answers(vec![ForwardAnswer {
            id: batch.writes[0].id,
            code: Code::FailedPrecondition as i32,
            message: "etcdserver: not leader".into(),
            ..Default::default()
        }]);
        let status = first.await.expect("writer").expect_err("refused");
        assert_eq!((status.code(), status.message()), (Code::FailedPrecondition, "etcdserver: not leader"));

        // The next write reaches the leader, whose connection then dies: the sender finds out
        // at a keep-alive and the writer hears the write may have been applied (never a
        // connection failure, which its caller would send again).
        let second = spawn_write(&router, b"b");
        let conn = tokio::task::spawn_blocking(move || {
            writes_sent(&mut conn);
            conn
        })
        .await
        .expect("reader");
        drop(conn);
        let status = second.await.expect("writer").expect_err("lost");
        assert_eq!(status.code(), Code::Unavailable);
        assert!(!status.message().contains("connect"), "worded as possibly applied: {}", status.message());
        assert_eq!(router.forwarders().waiting(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_member_applied_again_keeps_the_write_in_flight() {
        let (listener, router, url) = listening();
        let writer = spawn_write(&router, b"k");
        let (conn, batch) = first_batch(listener).await;
        // A membership record naming the peer at the same URL (a member's attributes applied,
        // a snapshot's membership installed) leaves its connection and its writes alone.
        router.add_peer(2, &url);
        router.take_answers(vec![applied(batch.writes[0].id, 3)]);
        assert_eq!(writer.await.expect("writer").expect("answered").applied_index, 3);
        drop(conn);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_to_a_leader_that_closed_its_connection_fails_as_never_sent() {
        let (listener, router, _) = listening();
        let first = spawn_write(&router, b"a");
        let (conn, batch) = first_batch(listener).await;
        router.take_answers(vec![applied(batch.writes[0].id, 1)]);
        first.await.expect("writer").expect("answered");
        // The leader's process dies: its kernel closes the connection (and nothing listens any
        // more). A write sent after that never left, whether the writer or the sender thread
        // (which may have found the connection broken meanwhile) handles it: the caller may
        // send it again.
        drop(conn);
        std::thread::sleep(Duration::from_millis(20)); // the close reaches this end of loopback
        let status = spawn_write(&router, b"b").await.expect("writer").expect_err("not sent");
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.message().contains("connect"), "worded as a connection failure: {}", status.message());
        assert_eq!(router.forwarders().waiting(), 0);
    }

    #[tokio::test]
    async fn a_write_for_an_unknown_member_fails_as_never_sent() {
        let router = PeerRouter::new(1, 9, &[], ClusterConfig::default());
        let status = router.forward_write(5, 0, put(b"k"), Duration::from_secs(10)).await.expect_err("no such peer");
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.message().contains("connect"), "worded as a connection failure: {}", status.message());
        assert_eq!(router.forwarders().waiting(), 0);
    }
}
