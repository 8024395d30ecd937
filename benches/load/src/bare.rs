//! `bare-member`: the least a replicated, synced put at one in flight costs on this machine,
//! measured beside the real servers in one run (`benches/cluster-run.sh` with `BARE=1`).
//!
//! Three processes stand in for a 3-member cluster and walk only the chain that any server
//! answering etcd's `KV.Put` with a quorum of 2 must walk: the client's gRPC call reaches the
//! leader (tonic's server, as Ballast's), which sends the request's bytes to both followers
//! over loopback TCP, then appends them to its own log file and fdatasyncs it, and answers once
//! one follower has appended and fdatasynced the same bytes and said so. There is no raft, no
//! storage engine, no key index and no thread hand-off the chain does not force: the leader
//! syncs on the task that took the call, a follower on the thread that reads its connection.
//!
//! Puts are replicated one at a time (a lock around each, no batching), so this is a floor for
//! one put in flight only. It serves `KV.Put` and answers every other call `unimplemented`;
//! a dead follower is not noticed (its acknowledgements just stop), which a benchmark's
//! fresh processes never meet.
//!
//! Each log is a file of [`LOG_BYTES`] written with zeros and synced before the first put,
//! then overwritten in order from the start (wrapping at its end): neither its size nor its
//! extents change with a put, the cheapest fdatasync the filesystem offers (a recycled WAL's).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballast_proto::etcdserverpb::kv_server::{Kv, KvServer};
use ballast_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse,
    RangeRequest, RangeResponse, ResponseHeader, TxnRequest, TxnResponse,
};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Mutex, Notify};
use tonic::{Request, Response, Status};

/// Size of each member's log file: a 10 s run at one in flight writes a few MiB of records,
/// and the file is filled with zeros once at start, so it is kept small enough for that
/// to take well under a second.
const LOG_BYTES: u64 = 16 << 20;

/// How long the leader keeps dialling a follower that is not listening yet: the three
/// processes start together.
const DIAL_FOR: Duration = Duration::from_secs(10);

/// A log file overwritten in order (see the module doc).
struct Log {
    file: File,
    at: u64,
}

impl Log {
    fn create(path: &Path) -> anyhow::Result<Self> {
        let mut file = File::options().read(true).write(true).create(true).truncate(true).open(path)?;
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..LOG_BYTES / zeros.len() as u64 {
            file.write_all(&zeros)?;
        }
        file.sync_all()?;
        Ok(Self { file, at: 0 })
    }

    /// Writes one record as [`framed`] it and fdatasyncs it.
    fn append(&mut self, frame: &[u8]) -> std::io::Result<()> {
        let len = frame.len() as u64;
        if self.at + len > LOG_BYTES {
            self.at = 0;
        }
        self.file.write_all_at(frame, self.at)?;
        self.at += len;
        self.file.sync_data()
    }
}

/// A record as the leader sends it and every member logs it: its length (4 bytes, little
/// endian), then its bytes.
fn framed(record: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + record.len());
    frame.extend_from_slice(&(record.len() as u32).to_le_bytes());
    frame.extend_from_slice(record);
    frame
}

/// A follower: takes the leader's connection, and for each frame appends and syncs it, then
/// acknowledges it with its sequence number (8 bytes). Runs until the process is killed.
pub(crate) fn follower(listener: &TcpListener, dir: &Path) -> anyhow::Result<()> {
    let mut log = Log::create(&dir.join("log"))?;
    for conn in listener.incoming() {
        let mut conn = conn?;
        conn.set_nodelay(true)?;
        let mut seq = 0u64;
        let mut frame = vec![0u8; 4];
        while conn.read_exact(&mut frame[..4]).is_ok() {
            let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
            frame.resize(4 + len, 0);
            conn.read_exact(&mut frame[4..])?;
            log.append(&frame)?;
            seq += 1;
            conn.write_all(&seq.to_le_bytes())?;
        }
    }
    Ok(())
}

/// The leader's side of replication: the followers' connections and its own log, one put at
/// a time.
struct Chain {
    next: Mutex<Next>,
    /// The highest sequence number each follower has acknowledged.
    acked: Vec<Arc<AtomicU64>>,
    /// Woken by every acknowledgement.
    ack: Arc<Notify>,
}

struct Next {
    seq: u64,
    log: Log,
    followers: Vec<OwnedWriteHalf>,
}

impl Chain {
    async fn replicate(&self, record: &[u8]) -> anyhow::Result<u64> {
        let mut next = self.next.lock().await;
        next.seq += 1;
        let seq = next.seq;
        let frame = framed(record);
        // The followers' copies leave before the leader's own sync, as a raft leader's appends do.
        for f in &mut next.followers {
            f.write_all(&frame).await?;
        }
        next.log.append(&frame)?;
        // A quorum of two: the leader and the first follower to acknowledge. A stale wake-up
        // (`notify_one` keeps one permit) only goes round once more.
        while !self.acked.iter().any(|a| a.load(Ordering::Acquire) >= seq) {
            self.ack.notified().await;
        }
        Ok(seq)
    }
}

/// The leader: dials both followers, then serves `KV.Put` on `listener` until killed.
pub(crate) async fn leader(
    listener: tokio::net::TcpListener,
    followers: &[SocketAddr],
    dir: PathBuf,
) -> anyhow::Result<()> {
    let log = tokio::task::spawn_blocking(move || Log::create(&dir.join("log"))).await??;
    let ack = Arc::new(Notify::new());
    let mut acked = Vec::new();
    let mut writers = Vec::new();
    for addr in followers {
        let stream = dial(*addr).await?;
        let (mut rd, wr) = stream.into_split();
        writers.push(wr);
        let seen = Arc::new(AtomicU64::new(0));
        acked.push(seen.clone());
        let ack = ack.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 8];
            while rd.read_exact(&mut buf).await.is_ok() {
                seen.store(u64::from_le_bytes(buf), Ordering::Release);
                ack.notify_one();
            }
        });
    }
    let chain = Arc::new(Chain { next: Mutex::new(Next { seq: 0, log, followers: writers }), acked, ack });
    tonic::transport::Server::builder()
        .add_service(KvServer::new(BareKv { chain }))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await?;
    Ok(())
}

async fn dial(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpStream> {
    let until = Instant::now() + DIAL_FOR;
    loop {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) if Instant::now() >= until => return Err(anyhow::anyhow!("follower {addr}: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

struct BareKv {
    chain: Arc<Chain>,
}

const ONLY_PUT: &str = "the bare-chain probe serves KV.Put only";

#[tonic::async_trait]
impl Kv for BareKv {
    async fn range(&self, _: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        Err(Status::unimplemented(ONLY_PUT))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let record = req.into_inner().encode_to_vec();
        let seq = self.chain.replicate(&record).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let header = ResponseHeader { revision: seq as i64 + 1, ..Default::default() };
        Ok(Response::new(PutResponse { header: Some(header), prev_kv: None }))
    }

    async fn delete_range(&self, _: Request<DeleteRangeRequest>) -> Result<Response<DeleteRangeResponse>, Status> {
        Err(Status::unimplemented(ONLY_PUT))
    }

    async fn txn(&self, _: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        Err(Status::unimplemented(ONLY_PUT))
    }

    async fn compact(&self, _: Request<CompactionRequest>) -> Result<Response<CompactionResponse>, Status> {
        Err(Status::unimplemented(ONLY_PUT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_proto::etcdserverpb::kv_client::KvClient;

    /// The records in a log file, read back as the members wrote them.
    fn records(path: &Path) -> Vec<PutRequest> {
        let bytes = std::fs::read(path).expect("a member's log");
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes")) as usize;
            if len == 0 {
                return out;
            }
            // A follower still writing its copy may be read half-written: it holds only what
            // came before.
            match PutRequest::decode(&bytes[at + 4..at + 4 + len]) {
                Ok(put) => out.push(put),
                Err(_) => return out,
            }
            at += 4 + len;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_put_is_answered_once_the_leader_and_a_follower_hold_it() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut followers = Vec::new();
        for name in ["f1", "f2"] {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            followers.push(listener.local_addr()?);
            let path = dir.path().join(name);
            std::fs::create_dir_all(&path)?;
            std::thread::spawn(move || follower(&listener, &path));
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let leader_dir = dir.path().join("l");
        std::fs::create_dir_all(&leader_dir)?;
        let ldir = leader_dir.clone();
        tokio::spawn(async move { leader(listener, &followers, ldir).await });
        let mut client = KvClient::connect(format!("http://{addr}")).await?;
        let puts: Vec<_> = (0..3u8)
            .map(|i| PutRequest { key: vec![b'k', i].into(), value: vec![i; 300].into(), ..Default::default() })
            .collect();
        for (i, put) in puts.iter().enumerate() {
            let resp = client.put(put.clone()).await?.into_inner();
            assert_eq!(resp.header.map(|h| h.revision), Some(i as i64 + 2));
            // Answered: the leader's log holds it, and so does at least one follower's.
            assert_eq!(records(&leader_dir.join("log")), puts[..=i]);
            let held = ["f1", "f2"].iter().filter(|f| records(&dir.path().join(f).join("log")) == puts[..=i]).count();
            assert!(held >= 1, "put {i} answered before a follower held it");
        }
        let refused = client.range(RangeRequest::default()).await;
        assert_eq!(refused.err().map(|e| e.code()), Some(tonic::Code::Unimplemented));
        Ok(())
    }
}
