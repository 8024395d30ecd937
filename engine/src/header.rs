//! [`HeaderInfo`]: what every etcd response header carries besides the revision.

use ballast_proto::etcdserverpb::ResponseHeader;

/// The identity part of response headers: cluster, answering member, raft term.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderInfo {
    /// The cluster's ID.
    pub cluster_id: u64,
    /// This member's ID.
    pub member_id: u64,
    /// The raft term the member is in.
    pub raft_term: u64,
}

impl HeaderInfo {
    /// Returns a full header at `revision`.
    pub fn at(&self, revision: i64) -> ResponseHeader {
        ResponseHeader { cluster_id: self.cluster_id, member_id: self.member_id, revision, raft_term: self.raft_term }
    }

    /// Fills the identity fields of `header`, keeping its revision (0 if absent).
    pub fn complete(&self, header: Option<ResponseHeader>) -> Option<ResponseHeader> {
        Some(self.at(header.map_or(0, |h| h.revision)))
    }
}
