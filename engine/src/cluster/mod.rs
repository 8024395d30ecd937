//! The member's place in a cluster: who the members are ([`members`]) and how raft messages
//! and forwarded writes reach them ([`transport`] over [`raft_wire`]).
//!
//! Every shard is a raft group over the same members, with the member ID as raft ID (except a
//! member bootstrapped alone, whose groups keep raft ID 1, see [`members::Member::raft_id`]).
//! The peer port carries one raft connection per pair of members, plain frames between two
//! threads ([`raft_wire`], received by `api::peer_raft`; a shard thread may write its frame
//! itself, `peer_link`), which also carries the writes a member sends on to a shard's leader
//! and their answers ([`forwarding`]), and serves `ballastpb.Peer` (`proto/peer.proto`, served
//! by `api::peer`) on its other connections: a hello that checks both are in one cluster, and
//! lease calls and membership changes sent to a shard's leader. With several
//! shards, the shards' leaders spread over the members and take revisions from the revision
//! allocator on shard 0's leader ([`revision_group`], reached through [`allocation`] on one
//! stream per member, [`revision_link`]), which tells
//! every member how far every shard's writes reach ([`resolved`]), or (`spread_leaders` off) one
//! member leads them all (`shard::colocate`). A cluster grown from a member bootstrapped alone
//! without `spread_alone` starts with one member leading and switches to spread leaders at one
//! entry of shard 0's log once it has `spread_at_voters` voters ([`placement`]).

pub mod allocation;
mod forward_pending;
pub mod forwarding;
pub mod members;
mod peer_link;
pub mod placement;
pub mod raft_wire;
pub mod resolved;
pub mod revision_group;
pub mod revision_link;
pub mod transport;

use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::MemberRecord;
use parking_lot::RwLock;
use prost::Message as _;

pub use members::{Member, Membership};
pub use transport::{PeerRouter, PeerTransport};

/// A cluster of several members and several shards whose leaders one member holds
/// (`shard::colocate`), as shard 0's meta records it and `Peer.Members` tells a joining member.
pub const PLACEMENT_TOGETHER: u32 = 1;
/// A cluster of several members and several shards whose leaders spread over the members
/// ([`revision_group`]).
pub const PLACEMENT_SPREAD: u32 = 2;
/// A cluster grown from a member bootstrapped alone: one member leads every shard until the
/// cluster has `ClusterConfig::spread_at_voters` voters, then it switches to
/// [`PLACEMENT_SPREAD`] at one entry of shard 0's log ([`placement`]).
pub const PLACEMENT_GROWING: u32 = 3;

/// What a shard applying a membership change updates: the member's view of the membership
/// (MemberList, forwarding) and its peer connections. Only shard 0 carries membership changes.
#[derive(Clone, Debug)]
pub struct ClusterView {
    /// The membership every part of the member reads.
    pub membership: Arc<RwLock<Membership>>,
    /// The member's peer connections.
    pub router: Arc<PeerRouter>,
    /// This member's ID.
    pub me: u64,
    /// Whether this member is a learner, kept with every change: the client port checks it on
    /// every request, which must not take the membership's lock.
    pub learner: Arc<std::sync::atomic::AtomicBool>,
    /// The cluster's auth store as the client port reads it; shard 0 applies auth changes,
    /// which are cluster-wide records like the membership, and publishes them here.
    pub auth: Arc<crate::auth::AuthShared>,
}

/// A membership change as raft carries it: the conf change's type and node, with the member's
/// record (ID, name, peer URLs, learner or voter) as its context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberChange {
    /// Adds the member, or replaces its record (promotion, new peer URLs).
    Upsert(Member),
    /// Removes the member with this ID.
    Remove(u64),
}

impl ClusterView {
    /// Applies a committed membership change: the membership (whose record the caller writes
    /// with the applied index) and the peer connections. Returns true when this member was
    /// removed.
    pub fn apply(&self, change: &MemberChange) -> bool {
        let mut m = self.membership.write();
        let removed = self.apply_locked(&mut m, change);
        self.note_role(&m);
        removed
    }

    fn note_role(&self, m: &Membership) {
        let learner = m.get(self.me).is_some_and(|x| x.is_learner);
        self.learner.store(learner, std::sync::atomic::Ordering::Relaxed);
    }

    fn apply_locked(&self, m: &mut Membership, change: &MemberChange) -> bool {
        match change {
            MemberChange::Upsert(member) => {
                match m.members.iter_mut().find(|x| x.id == member.id) {
                    Some(x) => *x = member.clone(),
                    None => m.members.push(member.clone()),
                }
                m.members.sort_by_key(|x| x.id);
                if member.id != self.me {
                    if let Some(url) = member.peer_urls.first() {
                        self.router.add_peer(member.raft_id, url);
                    }
                }
                false
            }
            MemberChange::Remove(id) => {
                let raft_id = m.get(*id).map(|x| x.raft_id);
                m.members.retain(|x| x.id != *id);
                if let Some(raft_id) = raft_id {
                    self.router.remove_peer(raft_id);
                }
                *id == self.me
            }
        }
    }
}

impl ClusterView {
    /// Replaces the membership with an installed snapshot's, connecting to its members.
    pub fn replace(&self, membership: Membership) {
        let mut m = self.membership.write();
        for old in &m.members {
            if membership.get(old.id).is_none() {
                self.router.remove_peer(old.raft_id);
            }
        }
        for member in membership.members.iter().filter(|x| x.id != self.me) {
            if let Some(url) = member.peer_urls.first() {
                self.router.add_peer(member.raft_id, url);
            }
        }
        *m = membership;
        self.note_role(&m);
    }
}

/// Encodes a member for a conf change's context.
pub fn member_context(m: &Member) -> Vec<u8> {
    MemberRecord {
        id: m.id,
        name: m.name.clone(),
        peer_urls: m.peer_urls.clone(),
        is_learner: m.is_learner,
        raft_id: m.raft_id,
    }
    .encode_to_vec()
}

/// Decodes a conf change's context.
///
/// # Errors
/// The context is not a member record.
pub fn member_of_context(context: &[u8]) -> Result<Member, prost::DecodeError> {
    let r = MemberRecord::decode(context)?;
    Ok(Member { id: r.id, name: r.name, peer_urls: r.peer_urls, is_learner: r.is_learner, raft_id: r.raft_id })
}

/// TLS between members (etcd's `--peer-*` flags): files read at start.
#[derive(Clone, Debug)]
pub struct PeerTls {
    /// This member's certificate (PEM), presented to peers as server and as client.
    pub cert_pem: Vec<u8>,
    /// Its private key (PEM).
    pub key_pem: Vec<u8>,
    /// The CA bundle (PEM) peer certificates are checked against; None: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Peers must present a certificate the CA signed (`--peer-client-cert-auth`).
    pub client_cert_auth: bool,
}

impl PeerTls {
    /// Returns the server side of the peer port's TLS.
    pub fn server(&self) -> tonic::transport::ServerTlsConfig {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let mut cfg = ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        if let Some(ca) = &self.ca_pem {
            cfg = cfg.client_ca_root(Certificate::from_pem(ca)).client_auth_optional(!self.client_cert_auth);
        }
        cfg
    }

    /// Returns the client side, for connections to peers.
    pub fn client(&self) -> tonic::transport::ClientTlsConfig {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut cfg = ClientTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        if let Some(ca) = &self.ca_pem {
            cfg = cfg.ca_certificate(Certificate::from_pem(ca));
        }
        cfg
    }
}

/// Tunables of the peer connections.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Parcels (one shard's messages of one Ready round, a forwarded write, or a round's answers
    /// to forwarded writes) queued per peer before more are refused. 4,096 is a few hundred
    /// rounds of every shard: a peer that is that far behind is better caught up by raft's
    /// probing than by a backlog, and a write refused here fails as not sent.
    pub peer_queue: usize,
    /// Raft messages per batch on the wire. 4,096 keeps one batch around a few MiB with
    /// etcd-sized appends while carrying every shard's heartbeats at once.
    pub max_batch_messages: usize,
    /// Encoded bytes per batch before it is cut. 8 MiB carries a round's entry of
    /// `ShardConfig::max_round_entry_bytes` with room to spare and stays far below the peer
    /// port's message limit.
    pub max_batch_bytes: usize,
    /// Batches handed to a gRPC stream fed through a channel (the revision link's) ahead of
    /// what HTTP/2 has sent. 16 keeps the stream busy without hiding back-pressure from the
    /// queue. (The raft connection's thread cuts a batch from its queue per write.)
    pub stream_window: usize,
    /// Requests, releases and reports queued per allocator member on this member's
    /// `Revisions` stream ([`revision_link`]) before a request is refused (its round asks
    /// again). Each shard has at most one request and one release outstanding, plus a report a
    /// tick; 1,024 leaves room for reads and snapshots asking where the cluster stands.
    pub revision_queue: usize,
    /// Requests, releases and reports per message on the `Revisions` stream. 1,024 of them are
    /// a few tens of KiB, and far more than the shards of one member have outstanding.
    pub max_revision_batch: usize,
    /// First wait before reconnecting to a peer. 100 ms is etcd's heartbeat interval: a peer
    /// restarting is back within a few heartbeats.
    pub reconnect_backoff_min: Duration,
    /// Longest wait between reconnects. 1 s is etcd's election timeout, so a returning peer
    /// is reached within one election.
    pub reconnect_backoff_max: Duration,
    /// TCP connect timeout to a peer, and the time a raft connection's TLS handshake may take. 1 s,
    /// as etcd's peer dial timeout.
    pub dial_timeout: Duration,
    /// HTTP/2 pings on a peer's gRPC connection, and a keep-alive frame on an idle raft
    /// connection (which the receiver also polls for the server's stop at). A peer that stops
    /// answering without closing (a partition that drops packets) would otherwise hold the
    /// connection until TCP gives up, minutes later; 1 s is etcd's heartbeat scale.
    pub keepalive_interval: Duration,
    /// How long a ping may go unanswered, a raft connection's write may block, or its receiver
    /// hear nothing, before the connection is dropped and dialled again. 3 s is three election
    /// timeouts: a slow peer is not cut off, a silent one soon is.
    pub keepalive_timeout: Duration,
    /// TLS on peer connections (`https://` peer URLs); None: plain TCP.
    pub tls: Option<PeerTls>,
    /// Let a shard thread write its round's raft messages to a plain raft connection itself
    /// when nothing else is being written or queued there (`peer_link`), instead of waking the
    /// peer's sender thread for every message. On by default; off sends everything through
    /// the thread (kept for comparing the two).
    pub direct_writes: bool,
    /// How often the member that evaluates a cluster's writes tells the others up to which
    /// revision every shard holds every write ([`resolved`]), when that moved. It is the delay
    /// a watch over several shards on another member adds to an event: 5 ms stays below a
    /// round's log sync on most disks, at a few hundred small messages a second per peer.
    pub resolved_interval: Duration,
    /// Facts of [`resolved`] a member keeps while its shards apply up to them. 1,024 is several
    /// seconds of facts at `resolved_interval`; a member further behind keeps the newest.
    pub resolved_facts: usize,
    /// The revision allocator of a cluster whose shard leaders are spread (see
    /// [`revision_group`]).
    pub allocator: revision_group::AllocatorConfig,
    /// Spread the shards' leaders over the members of a new cluster of several shards (see
    /// [`revision_group`]); off: one member leads every shard (`shard::colocate`). Every member
    /// must place leaders alike, so the choice is recorded in the data directory when the
    /// member is bootstrapped, a restart keeps the recorded one, and a joining member takes the
    /// cluster's.
    pub spread_leaders: bool,
    /// Spread also on a member started alone with several shards (asked for explicitly with
    /// `--spread-shard-leaders`): it records the spread placement, so members added later take
    /// leaderships. Off by default because a lone member then takes every round's revisions
    /// from its own allocator, one round of one shard at a time, where its shards otherwise
    /// evaluate in parallel from one counter.
    pub spread_alone: bool,
    /// The voters a cluster grown from a member bootstrapped alone (without `spread_alone` and
    /// with `spread_leaders` on) needs before it switches to spread leaders ([`placement`]).
    /// Three, etcd's smallest cluster that survives a failure: a cluster grown one member at a
    /// time (1, 2, 3) switches once, when it reaches the size it is usually run at, and not at
    /// two voters, where every member is needed for a quorum anyway and the switch's revision
    /// gap and pause would buy little.
    pub spread_at_voters: usize,
    /// How often a linearizable read on a cluster with spread shard leaders looks whether this
    /// member's shards hold the revision the allocator gave it. They reach it within about a
    /// round of each shard; 1 ms adds little to that without spinning.
    pub read_poll: Duration,
}

impl ClusterConfig {
    /// Returns the endpoint of a peer URL, with the member's TLS when it has one.
    ///
    /// # Errors
    /// A malformed URL, or TLS that cannot be set up.
    pub fn endpoint(&self, url: &str) -> Result<tonic::transport::Endpoint, tonic::transport::Error> {
        let ep = tonic::transport::Endpoint::from_shared(url.to_string())?;
        match &self.tls {
            Some(tls) => ep.tls_config(tls.client()),
            None => Ok(ep),
        }
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            peer_queue: 4_096,
            max_batch_messages: 4_096,
            max_batch_bytes: 8 << 20,
            stream_window: 16,
            max_revision_batch: 1_024,
            revision_queue: 1_024,
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(1),
            dial_timeout: Duration::from_secs(1),
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(3),
            tls: None,
            direct_writes: true,
            resolved_interval: Duration::from_millis(5),
            resolved_facts: 1_024,
            allocator: revision_group::AllocatorConfig::default(),
            read_poll: Duration::from_millis(1),
            spread_leaders: true,
            spread_alone: false,
            spread_at_voters: 3,
        }
    }
}
