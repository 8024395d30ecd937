//! etcd's authentication and authorization: users, roles, key-range permissions, tokens.
//!
//! * [`store`]: the auth store ([`AuthState`]) and what each change does to it. Shard 0's state
//!   machine owns it: every change is an entry of shard 0's raft log (`RaftCommand::auth`), so
//!   every member applies the same changes in the same order, and the state is written with the
//!   round that applied it (meta column family, `auth/`), so it survives a restart.
//! * [`perms`]: whether a user's permissions cover a key range; [`checks`]: what each KV
//!   request needs (etcd's rules for Put, DeleteRange, Txn and `prev_kv`).
//! * [`token`]: simple tokens (granted through the log, kept in memory by every member) and JWTs.
//!
//! [`AuthShared`] is what the client port reads: the store as of the last applied round
//! (published by shard 0 after each round that changed it), the member's simple tokens, and the
//! configuration. The API layer (`api::auth` and the checks in each service) resolves a
//! request's credentials to an [`AuthInfo`] and asks the published store; bcrypt runs there too,
//! on tokio's blocking pool, never on a shard thread or an I/O thread.
//!
//! Must not: block (every method here is a lock held for a map lookup or a clone), or read
//! the store from RocksDB after start-up.

pub mod checks;
pub mod perms;
pub mod store;
pub mod token;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

pub use store::{AuthState, TokenEffect, ROOT_ROLE, ROOT_USER};
pub use token::{SimpleTokens, TokenKind};

use crate::clock::Clock;

/// etcd's default bcrypt cost (`--bcrypt-cost`).
pub const DEFAULT_BCRYPT_COST: u32 = 10;

/// How the member authenticates (etcd's `--auth-token`, `--auth-token-ttl`, `--bcrypt-cost`).
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// The tokens it issues.
    pub token: TokenKind,
    /// How long a simple token lives past its last use (etcd's default, 300 s).
    pub simple_ttl: Duration,
    /// bcrypt's cost for new passwords (etcd's default, 10: about 50-100 ms a hash here).
    pub bcrypt_cost: u32,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { token: TokenKind::Simple, simple_ttl: token::DEFAULT_SIMPLE_TTL, bcrypt_cost: DEFAULT_BCRYPT_COST }
    }
}

/// Who a request comes from: the user and the auth revision its credentials were checked at
/// (etcd's `AuthInfo`). The default (no user, revision 0) is a request without credentials.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthInfo {
    /// The user name.
    pub user: String,
    /// The auth revision.
    pub revision: u64,
}

/// The auth store as the client port sees it, with the member's tokens.
#[derive(Debug)]
pub struct AuthShared {
    /// The store as of shard 0's last applied round. Readers clone the `Arc`; shard 0 swaps it.
    state: RwLock<Arc<AuthState>>,
    /// `state.enabled`, read on every request without the lock.
    enabled: AtomicBool,
    /// The simple tokens this member recorded.
    pub tokens: SimpleTokens,
    /// The configuration.
    pub config: AuthConfig,
}

impl AuthShared {
    /// Returns the view of `state` with `config`; `clock` times simple tokens.
    pub fn new(state: AuthState, config: AuthConfig, clock: Arc<dyn Clock>) -> Self {
        let enabled = AtomicBool::new(state.enabled);
        Self {
            state: RwLock::new(Arc::new(state)),
            enabled,
            tokens: SimpleTokens::new(config.simple_ttl, clock),
            config,
        }
    }

    /// Returns true while auth is enabled.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Returns the store as of the last applied round.
    pub fn state(&self) -> Arc<AuthState> {
        Arc::clone(&self.state.read())
    }

    /// Makes `state` the store requests are checked against (shard 0, after a round changed it).
    pub fn publish(&self, state: &AuthState) {
        *self.state.write() = Arc::new(state.clone());
        self.enabled.store(state.enabled, Ordering::Release);
    }

    /// Carries out what an applied change does to the tokens.
    pub fn apply_effect(&self, effect: TokenEffect) {
        match effect {
            TokenEffect::None => {}
            TokenEffect::Grant { name, prefix } => self.tokens.assign(prefix, name),
            TokenEffect::InvalidateUser(name) => self.tokens.invalidate_user(&name),
            TokenEffect::InvalidateAll => self.tokens.clear(),
        }
    }
}
