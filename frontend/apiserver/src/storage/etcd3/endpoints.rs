//! Which of the `--etcd-servers` the storage client sends to.
//!
//! tonic's balanced channel keeps a member it cannot connect to among those it picks from: the
//! member's reconnecting service says it is ready and fails each call at once with the connect
//! error, and with nothing in flight it looks the least loaded. After a member died, about half
//! of the frontend's requests went to it and failed, for as long as it stayed down, where
//! kube-apiserver's etcd client (grpc-go's round robin) stops picking a member whose connection
//! failed. Here a request that could not connect marks the members suspect ([`Endpoints::suspect`]):
//! a task then tries a TCP connection to each and takes those that refuse out of the channel
//! (always leaving one in), and tries the ones out every [`RETRY_OUT_EVERY`] until they answer.
//! Members that are in are never probed while requests reach them (a probe is a connection the
//! server sees; stock etcd logs each one that ends without a TLS handshake).
//!
//! A request that failed to connect never left, so its caller may send it again, a write too
//! (as grpc-go retries a call that was never sent on the wire): [`unsent`].

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};

/// How often a member taken out is tried again. 1 s: a restarted member is back in the
/// rotation within about an election timeout of answering, and a member that stays down costs
/// one refused connection a second.
const RETRY_OUT_EVERY: Duration = Duration::from_secs(1);

/// How long a probe's TCP connection may take. 1 s: far above a connection on a working
/// network; a member that does not answer within it counts as down until its next probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Changes queued for the balancer. A handful covers every member going in or out at once.
const CHANGES: usize = 16;

/// The members the channel balances over, and the task that keeps them.
#[derive(Clone, Debug)]
pub(super) struct Endpoints {
    suspect: Arc<Notify>,
}

impl Endpoints {
    /// Returns a channel balanced over `endpoints` (all in at first) and the handle that
    /// reports connection failures to the task keeping them. Needs a tokio runtime.
    pub(super) fn start(endpoints: Vec<Endpoint>) -> (Channel, Endpoints) {
        let (channel, changes) = Channel::balance_channel(CHANGES);
        let suspect = Arc::new(Notify::new());
        tokio::spawn(keep(endpoints, changes, Arc::clone(&suspect)));
        (channel, Endpoints { suspect })
    }

    /// A request could not connect to the member it was sent to: which one is not known, so
    /// every member in is tried.
    pub(super) fn suspect(&self) {
        self.suspect.notify_one();
    }
}

/// True when `status` stands for a call that never reached a server: its connection could not
/// be made.
pub(super) fn unsent(status: &tonic::Status) -> bool {
    let mut source = status.source();
    while let Some(err) = source {
        if err.is::<tonic::ConnectError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// Keeps the members that accept connections in the channel until the channel is dropped.
async fn keep(endpoints: Vec<Endpoint>, changes: mpsc::Sender<Change<usize, Endpoint>>, suspect: Arc<Notify>) {
    let mut inside = Vec::with_capacity(endpoints.len());
    for (k, e) in endpoints.iter().enumerate() {
        if changes.send(Change::Insert(k, e.clone())).await.is_err() {
            return;
        }
        inside.push(true);
    }
    loop {
        let out = inside.iter().any(|i| !i);
        // After a suspicion every member is tried; when the timer fires, only those out.
        let all = tokio::select! {
            () = suspect.notified() => true,
            () = tokio::time::sleep(RETRY_OUT_EVERY), if out => false,
            () = changes.closed() => return,
        };
        let tried: Vec<usize> = (0..endpoints.len()).filter(|&k| all || !inside[k]).collect();
        let answers = futures::future::join_all(tried.iter().map(|&k| reachable(&endpoints[k]))).await;
        for (&k, up) in tried.iter().zip(answers) {
            let change = match (up, inside[k]) {
                (true, false) => Change::Insert(k, endpoints[k].clone()),
                // The last member in stays: with none, requests would wait instead of failing.
                (false, true) if inside.iter().filter(|i| **i).count() > 1 => Change::Remove(k),
                _ => continue,
            };
            tracing::info!(
                endpoint = %endpoints[k].uri(),
                reachable = up,
                "etcd member {}",
                if up { "back in the rotation" } else { "taken out of the rotation" }
            );
            inside[k] = up;
            if changes.send(change).await.is_err() {
                return;
            }
        }
    }
}

/// True when a TCP connection to `endpoint`'s address succeeds within [`PROBE_TIMEOUT`].
async fn reachable(endpoint: &Endpoint) -> bool {
    let uri = endpoint.uri();
    let Some(host) = uri.host() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
    matches!(tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect((host, port))).await, Ok(Ok(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port nothing listens on: bound, then released.
    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    }

    #[tokio::test]
    async fn a_call_that_could_not_connect_is_unsent_and_one_that_was_answered_is_not() {
        let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{}", closed_port())).expect("uri");
        let mut client = ballast_proto::etcdserverpb::kv_client::KvClient::new(endpoint.connect_lazy());
        let status = client.range(ballast_proto::etcdserverpb::RangeRequest::default()).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(unsent(&status), "{status:?}");
        // The same code from a server that was reached says nothing of where the call went.
        assert!(!unsent(&tonic::Status::unavailable("etcdserver: leader changed")));
    }

    #[tokio::test]
    async fn a_member_that_refuses_connections_leaves_the_rotation_once_suspected_and_comes_back() {
        let port = closed_port();
        let down = Endpoint::from_shared(format!("http://127.0.0.1:{port}")).expect("uri");
        let up = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let live = Endpoint::from_shared(format!("http://{}", up.local_addr().expect("addr"))).expect("uri");
        let (changes_tx, mut changes) = mpsc::channel(CHANGES);
        let suspect = Arc::new(Notify::new());
        let task = tokio::spawn(keep(vec![down.clone(), live], changes_tx, Arc::clone(&suspect)));
        let mut next = async || tokio::time::timeout(Duration::from_secs(5), changes.recv()).await.expect("a change");
        assert!(matches!(next().await, Some(Change::Insert(0, _))));
        assert!(matches!(next().await, Some(Change::Insert(1, _))));
        suspect.notify_one();
        assert!(matches!(next().await, Some(Change::Remove(0))), "the member refusing connections leaves");
        // Tried again until it answers, then back in.
        let back = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind the port again");
        assert!(matches!(next().await, Some(Change::Insert(0, _))));
        // The last member in stays in even when it refuses too.
        drop((back, up));
        suspect.notify_one();
        let removed = next().await;
        assert!(matches!(removed, Some(Change::Remove(_))), "{removed:?}");
        suspect.notify_one();
        let quiet = tokio::time::timeout(Duration::from_millis(1500), changes.recv()).await;
        assert!(quiet.is_err(), "the last member in was taken out");
        drop(changes);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the task ends with its channel")
            .expect("task");
    }
}
