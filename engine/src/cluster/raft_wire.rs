//! The raft connection between two members on the peer port: plain length-prefixed frames on
//! a socket that a thread at each end owns, without HTTP/2 in between.
//!
//! A round of a shard costs an append to each follower and an answer from each; through gRPC
//! each of those messages was a trip through tokio, h2 (and its window updates) and tonic at
//! both ends, which cost the members more CPU per round than their shard threads. Here the
//! sending member's thread for that peer writes each batch with one `write`, and the receiving
//! member's thread for that connection wakes from its blocking `read` with the batch.
//!
//! The dialling member first sends [`PRELUDE`]; its first byte tells this connection from the
//! peer port's gRPC ones (HTTP/2's preface starts with `P`, a TLS handshake with 0x16), so
//! both share the one peer URL etcd's flags give. With peer TLS, the TLS handshake follows the
//! prelude and the frames run inside it. A frame is a little-endian `u32` length and that many
//! bytes of an encoded `RaftBatch`; an empty frame is a keep-alive, sent when the sender has
//! had nothing to send for `ClusterConfig::keepalive_interval`, so that a receiver that hears
//! nothing for `keepalive_timeout` knows the connection is dead and a sender finds a broken
//! connection at its next write.

use std::io::{self, Read};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::PeerTls;

/// What a raft connection starts with, before TLS if any.
pub const PRELUDE: &[u8; 8] = b"BRAFT/1\n";

/// Bytes a receiver reads at once when no longer frame is due: a round's append of small
/// writes fits, so a batch usually takes one `read`.
const READ_CHUNK: usize = 64 << 10;

/// Free bytes a read gets at least: a partial frame at the buffer's end is moved to its start
/// rather than read a few bytes at a time.
const MIN_ROOM: usize = 4 << 10;

/// Returns `body` framed: its length, then itself, in one buffer (one `write`).
pub fn frame(body: &impl prost::Message) -> Vec<u8> {
    let len = body.encoded_len();
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    body.encode(&mut out).expect("a Vec grows as needed");
    out
}

/// The keep-alive frame: an empty body.
pub const KEEPALIVE: [u8; 4] = [0; 4];

/// Cuts frames out of what a connection delivers. A read that times out or is cut short
/// leaves the bytes read so far in place, so a receiver can poll between reads.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    limit: usize,
}

impl FrameReader {
    /// Returns a reader refusing frames longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self { buf: vec![0; READ_CHUNK], start: 0, end: 0, limit }
    }

    /// Returns the next whole frame's body already read, if any.
    ///
    /// # Errors
    /// The next frame announces more than the limit (a broken or hostile peer).
    pub fn take(&mut self) -> io::Result<Option<&[u8]>> {
        let Some(len) = self.next_len()? else { return Ok(None) };
        if self.end - self.start < 4 + len {
            return Ok(None);
        }
        let body = self.start + 4..self.start + 4 + len;
        self.start = body.end;
        Ok(Some(&self.buf[body]))
    }

    fn next_len(&self) -> io::Result<Option<usize>> {
        if self.end - self.start < 4 {
            return Ok(None);
        }
        let mut len = [0; 4];
        len.copy_from_slice(&self.buf[self.start..self.start + 4]);
        let len = u32::from_le_bytes(len) as usize;
        if len > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a raft frame of {len} bytes is over the limit of {}", self.limit),
            ));
        }
        Ok(Some(len))
    }

    /// Reads more from `r`; answers what `read` answered (0: the peer closed).
    ///
    /// # Errors
    /// What `read` returned (a timeout among them), or a frame over the limit.
    pub fn fill(&mut self, r: &mut impl Read) -> io::Result<usize> {
        let wanted = 4 + self.next_len()?.unwrap_or(0);
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.start > 0 && (self.start + wanted > self.buf.len() || self.buf.len() - self.end < MIN_ROOM) {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let room = (self.start + wanted).max(self.end + MIN_ROOM);
        if self.buf.len() < room {
            self.buf.resize(room, 0);
        }
        let n = r.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }
}

impl PeerTls {
    /// Returns the rustls client configuration of raft connections to peers: this member's
    /// certificate as client certificate, peers checked against the CA bundle (without one, no
    /// peer certificate is trusted, as for the peer port's gRPC connections).
    ///
    /// # Errors
    /// Missing or unusable PEM material.
    pub fn raft_client(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&self.cert_pem).flatten().collect();
        if certs.is_empty() {
            return Err("--peer-cert-file holds no certificate".into());
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem).map_err(|e| format!("--peer-key-file: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in self.ca_pem.iter().flat_map(|ca| CertificateDer::pem_slice_iter(ca).flatten()) {
            roots.add(cert).map_err(|e| format!("--peer-trusted-ca-file: {e}"))?;
        }
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("peer TLS: {e}"))?;
        Ok(Arc::new(cfg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_proto::ballastpb::{RaftBatch, ShardRaftMessage};

    /// A reader that hands out its bytes a few at a time, with a timeout between pieces.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        stall: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.stall = !self.stall;
            if self.stall && self.at < self.data.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = self.step.min(out.len()).min(self.data.len() - self.at);
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn batch(n: usize, size: usize) -> RaftBatch {
        let messages =
            (0..n).map(|i| ShardRaftMessage { shard: i as u32, message: vec![i as u8; size].into() }).collect();
        RaftBatch { cluster_id: 7, from: 1, to: 2, messages, ..Default::default() }
    }

    #[test]
    fn frames_survive_reads_cut_anywhere_and_timeouts_between_them() {
        use prost::Message as _;
        let sent = vec![batch(3, 10), batch(0, 0), batch(2, 200_000), batch(1, 1)];
        let mut wire = Vec::new();
        for b in &sent {
            wire.extend(frame(b));
            wire.extend(KEEPALIVE);
        }
        for step in [1, 3, 4096, 1 << 20] {
            let mut src = Trickle { data: wire.clone(), at: 0, step, stall: false };
            let mut reader = FrameReader::new(1 << 20);
            let mut got = Vec::new();
            loop {
                while let Some(body) = reader.take().expect("within the limit") {
                    if !body.is_empty() {
                        got.push(RaftBatch::decode(body).expect("a batch"));
                    }
                }
                match reader.fill(&mut src) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                }
            }
            // The empty batch encodes to an empty body, which reads as a keep-alive.
            let expected: Vec<_> = sent.iter().filter(|b| b.encoded_len() > 0).cloned().collect();
            assert_eq!(got, expected, "read {step} bytes at a time");
        }
    }

    #[test]
    fn a_frame_over_the_limit_is_refused() {
        let mut reader = FrameReader::new(100);
        let mut src = io::Cursor::new(frame(&batch(1, 200)));
        reader.fill(&mut src).expect("read");
        assert_eq!(reader.take().expect_err("over the limit").kind(), io::ErrorKind::InvalidData);
    }
}
