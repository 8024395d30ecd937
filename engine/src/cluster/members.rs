//! [`Membership`]: who the members of the cluster are, how their IDs are derived, and how the
//! list is kept in the data directory.
//!
//! IDs are etcd's, so an operator sees the same member and cluster IDs etcd would give the same
//! flags: a member's ID is the first 8 bytes (big-endian) of the SHA-1 of its sorted peer URLs
//! joined without separator, followed by the cluster token; the cluster's ID is the SHA-1 of
//! the sorted member IDs, each 8 bytes big-endian. For example `--initial-cluster
//! m1=http://127.0.0.1:2380` with the default token `etcd-cluster` gives the member ID of
//! SHA-1(`http://127.0.0.1:2380etcd-cluster`).
//!
//! The list is written to shard 0's meta when the cluster is bootstrapped (`--initial-cluster`,
//! or the single member a plain `ballast engine` is); later starts read it and ignore the flag.

use ballast_proto::ballastpb::{MemberRecord, MembershipRecord};
use prost::Message;
use sha1::{Digest, Sha1};

use crate::error::{EngineError, Result};
use crate::storage::{Cf, KvBackend, StorageError, WriteBatch, WriteOpts};

/// Shard 0's meta key of the membership record.
pub(crate) const META_MEMBERSHIP: &[u8] = b"membership";

/// One member as the cluster knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The member ID (also its raft ID in every shard's group).
    pub id: u64,
    /// Its name (`--name`).
    pub name: String,
    /// Where other members reach it.
    pub peer_urls: Vec<String>,
    /// A learner receives the log but does not vote.
    pub is_learner: bool,
    /// Its ID in every shard's raft group: the member ID, except for a member bootstrapped
    /// alone, whose groups have always had raft ID 1 (data directories from before clusters
    /// keep working, and a restored snapshot's log keeps its voter).
    pub raft_id: u64,
}

/// The cluster's members and ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// The cluster ID.
    pub cluster_id: u64,
    /// Every member, sorted by ID.
    pub members: Vec<Member>,
}

/// Returns etcd's member ID for `peer_urls` in the cluster named by `token`.
pub fn member_id(peer_urls: &[String], token: &str) -> u64 {
    added_member_id(peer_urls, token, None)
}

/// Returns etcd's ID for a member added at `now` (Unix seconds) to a running cluster; etcd
/// mixes the time in, so a member removed and added again gets a new ID.
pub fn added_member_id(peer_urls: &[String], token: &str, now: Option<u64>) -> u64 {
    let mut urls = peer_urls.to_vec();
    urls.sort();
    let mut h = Sha1::new();
    h.update(urls.concat().as_bytes());
    h.update(token.as_bytes());
    if let Some(now) = now {
        h.update(now.to_string().as_bytes());
    }
    first_u64(&h.finalize())
}

/// Returns etcd's cluster ID for the member IDs `ids`.
pub fn cluster_id(ids: &[u64]) -> u64 {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    let mut h = Sha1::new();
    for id in sorted {
        h.update(id.to_be_bytes());
    }
    first_u64(&h.finalize())
}

fn first_u64(digest: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(b)
}

/// Parses `--initial-cluster` (`name=url,name=url2,other=url3`: a name may repeat to give a
/// member several URLs) and checks it as etcd checks its bootstrap flags: the local `name` is
/// present, no URL appears twice, and the local member's URLs are the advertised ones.
///
/// # Errors
/// `BadCluster` with etcd's message.
pub fn parse_initial_cluster(text: &str, name: &str, advertised: &[String], token: &str) -> Result<Membership> {
    let by_name = urls_by_name(text)?;
    let mut all: Vec<&String> = by_name.iter().flat_map(|(_, u)| u).collect();
    all.sort();
    if all.windows(2).any(|w| w[0] == w[1]) {
        return Err(EngineError::BadCluster(format!("initial cluster {text} has duplicate url")));
    }
    let Some((_, local)) = by_name.iter().find(|(n, _)| n == name) else {
        return Err(EngineError::BadCluster(format!(
            "couldn't find local name {name:?} in the initial cluster configuration"
        )));
    };
    let (mut l, mut a) = (local.clone(), advertised.to_vec());
    l.sort();
    a.sort();
    if l != a {
        return Err(EngineError::BadCluster(format!(
            "--initial-cluster has {name}={} but missing from --initial-advertise-peer-urls={}",
            local.join(","),
            advertised.join(",")
        )));
    }
    let mut members: Vec<Member> = by_name
        .into_iter()
        .map(|(name, peer_urls)| {
            let id = member_id(&peer_urls, token);
            Member { id, name, peer_urls, is_learner: false, raft_id: id }
        })
        .collect();
    if let [alone] = members.as_mut_slice() {
        alone.raft_id = 1;
    }
    members.sort_by_key(|m| m.id);
    if members.windows(2).any(|w| w[0].id == w[1].id) {
        return Err(EngineError::BadCluster("member exists with identical ID".into()));
    }
    let ids: Vec<u64> = members.iter().map(|m| m.id).collect();
    Ok(Membership { cluster_id: cluster_id(&ids), members })
}

/// Splits `--initial-cluster` into each name with its URLs, in order of first appearance.
///
/// # Errors
/// `BadCluster` for a part without `=` or a URL that is not http or https.
pub fn urls_by_name(text: &str) -> Result<Vec<(String, Vec<String>)>> {
    let mut by_name: Vec<(String, Vec<String>)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((n, url)) = part.split_once('=') else {
            return Err(EngineError::BadCluster(format!("{text:?} is not a valid --initial-cluster (name=url,...)")));
        };
        let url = url.trim().to_string();
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(EngineError::BadCluster(format!("URL scheme must be http or https: {url}")));
        }
        match by_name.iter_mut().find(|(known, _)| known == n) {
            Some((_, urls)) => urls.push(url),
            None => by_name.push((n.to_string(), vec![url])),
        }
    }
    Ok(by_name)
}

impl Membership {
    /// Returns the member named `name`.
    pub fn by_name(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.name == name)
    }

    /// Returns the member with ID `id`.
    pub fn get(&self, id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    /// Returns the member whose raft ID is `raft_id`.
    pub fn by_raft_id(&self, raft_id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.raft_id == raft_id)
    }

    /// Returns the voters' raft IDs.
    pub fn voters(&self) -> Vec<u64> {
        self.members.iter().filter(|m| !m.is_learner).map(|m| m.raft_id).collect()
    }

    /// Returns the learners' raft IDs.
    pub fn learners(&self) -> Vec<u64> {
        self.members.iter().filter(|m| m.is_learner).map(|m| m.raft_id).collect()
    }

    /// Reads the membership kept in `backend` (shard 0), if the cluster was bootstrapped.
    ///
    /// # Errors
    /// A storage error, or `Corrupt` when the record does not decode.
    pub fn load(backend: &impl KvBackend) -> Result<Option<Self>> {
        let Some(v) = backend.get(Cf::Meta, META_MEMBERSHIP)? else { return Ok(None) };
        let rec = MembershipRecord::decode(v.as_slice())
            .map_err(|_| StorageError::Corrupt { cf: "meta", what: "membership" })?;
        Ok(Some(Self::from_record(rec)))
    }

    /// Writes the membership to `backend` (shard 0), synced.
    ///
    /// # Errors
    /// A storage error.
    pub fn save(&self, backend: &impl KvBackend) -> Result<()> {
        let mut wb = WriteBatch::new();
        self.save_in(&mut wb);
        backend.write(wb, WriteOpts { sync: true })?;
        Ok(())
    }

    /// Puts the membership record into `wb` (a round's batch, with the applied index).
    pub fn save_in(&self, wb: &mut WriteBatch) {
        wb.put(Cf::Meta, META_MEMBERSHIP.to_vec(), self.to_record().encode_to_vec());
    }

    /// Returns the stored form.
    pub fn to_record(&self) -> MembershipRecord {
        MembershipRecord {
            cluster_id: self.cluster_id,
            members: self
                .members
                .iter()
                .map(|m| MemberRecord {
                    id: m.id,
                    name: m.name.clone(),
                    peer_urls: m.peer_urls.clone(),
                    is_learner: m.is_learner,
                    raft_id: m.raft_id,
                })
                .collect(),
            shards: 0,
            leader_placement: 0,
        }
    }

    /// Returns the membership a stored record describes.
    pub fn from_record(rec: MembershipRecord) -> Self {
        let members = rec
            .members
            .into_iter()
            .map(|m| Member {
                id: m.id,
                name: m.name,
                peer_urls: m.peer_urls,
                is_learner: m.is_learner,
                raft_id: m.raft_id,
            })
            .collect();
        Self { cluster_id: rec.cluster_id, members }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ids_are_etcds() {
        // etcd 3.4 with --initial-cluster default=http://localhost:2380 and the default token
        // reports member 8e9e05c52164694d and cluster cdf818194e3a8c32 (its documented
        // single-member output).
        let m = member_id(&urls(&["http://localhost:2380"]), "etcd-cluster");
        assert_eq!(format!("{m:x}"), "8e9e05c52164694d");
        assert_eq!(format!("{:x}", cluster_id(&[m])), "cdf818194e3a8c32");
    }

    #[test]
    fn initial_cluster_is_checked_as_etcd_checks_it() {
        let c = "a=http://127.0.0.1:1,b=http://127.0.0.1:2";
        let m = parse_initial_cluster(c, "a", &urls(&["http://127.0.0.1:1"]), "t").expect("valid");
        assert_eq!(m.members.len(), 2);
        assert!(m.members.iter().all(|x| x.raft_id == x.id), "members of a cluster vote with their member IDs");
        let alone = parse_initial_cluster("a=http://h:1", "a", &urls(&["http://h:1"]), "t").expect("valid");
        assert_eq!(alone.members[0].raft_id, 1, "a member bootstrapped alone keeps raft ID 1");
        assert_eq!(m.by_name("b").map(|b| b.peer_urls.clone()), Some(urls(&["http://127.0.0.1:2"])));
        let err = |c: &str, name: &str, adv: &[&str]| match parse_initial_cluster(c, name, &urls(adv), "t") {
            Err(EngineError::BadCluster(msg)) => msg,
            other => panic!("expected BadCluster, got {other:?}"),
        };
        assert_eq!(
            err(c, "x", &["http://127.0.0.1:1"]),
            "couldn't find local name \"x\" in the initial cluster configuration"
        );
        assert!(err("a=http://127.0.0.1:1,b=http://127.0.0.1:1", "a", &["http://127.0.0.1:1"])
            .ends_with("has duplicate url"));
        assert!(err(c, "a", &["http://127.0.0.1:9"]).contains("missing from --initial-advertise-peer-urls"));
        assert!(err("a", "a", &[]).contains("not a valid --initial-cluster"));
    }

    #[test]
    fn membership_round_trips_through_the_store() {
        let b = crate::storage::mem::MemBackend::new();
        assert_eq!(Membership::load(&b).expect("load"), None);
        let m = parse_initial_cluster("a=http://h:1,b=http://h:2", "a", &urls(&["http://h:1"]), "t").expect("ok");
        m.save(&b).expect("save");
        assert_eq!(Membership::load(&b).expect("load"), Some(m));
    }
}
