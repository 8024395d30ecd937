//! The process's open-file limit (RLIMIT_NOFILE), checked once at start-up.
//!
//! Every client connection, peer connection, RocksDB file (write-ahead logs, SST files of every
//! shard) and watch stream's socket costs a descriptor. Running out does not fail politely:
//! RocksDB cannot open its next log file and the shard that needed it stops. So the soft limit is
//! raised to the hard limit when the hard limit allows more (what Go's runtime does for etcd
//! since Go 1.19), and a limit below [`RECOMMENDED_NOFILE`] is reported at start-up.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// The open-file limit below which start-up warns. 65,536 is the `LimitNOFILE` of etcd's
/// systemd unit and of most container runtimes' defaults; a member serving thousands of
/// clients with a few shards needs thousands of descriptors.
pub const RECOMMENDED_NOFILE: u64 = 65_536;

/// What [`raise_nofile`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NofileLimit {
    /// The soft limit before the call.
    pub was: u64,
    /// The soft limit now.
    pub now: u64,
    /// The hard limit, the most the soft limit may be raised to.
    pub hard: u64,
}

/// Raises the soft open-file limit to the hard limit, logs the outcome, and warns when the limit
/// stays below [`RECOMMENDED_NOFILE`].
///
/// # Errors
/// Reading the limit failed (not expected on Linux).
pub fn raise_nofile() -> nix::Result<NofileLimit> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let mut now = soft;
    if hard > soft {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => now = hard,
            Err(e) => tracing::warn!(soft, hard, error = %e, "cannot raise the open-file limit to its hard limit"),
        }
    }
    if now < RECOMMENDED_NOFILE {
        tracing::warn!(
            limit = now,
            recommended = RECOMMENDED_NOFILE,
            "open-file limit is low: connections, watch streams and RocksDB files share it, and a \
             shard that cannot open its next log file stops the member (raise it with ulimit -n or \
             LimitNOFILE=)"
        );
    } else if now != soft {
        tracing::info!(was = soft, now, "raised the open-file limit");
    }
    Ok(NofileLimit { was: soft, now, hard })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After the call the soft limit is the hard one (raising within the hard limit needs no
    /// privilege), and a second call changes nothing.
    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        let first = raise_nofile().expect("read the limit");
        assert_eq!(first.now, first.hard);
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("read the limit");
        assert_eq!((soft, hard), (first.hard, first.hard));
        let second = raise_nofile().expect("read the limit");
        assert_eq!(second, NofileLimit { was: first.hard, now: first.hard, hard: first.hard });
    }
}
