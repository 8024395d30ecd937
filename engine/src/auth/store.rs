//! [`AuthState`]: etcd's auth store (users, roles, whether auth is on, the auth revision) and
//! what each change does to it, with etcd's checks and errors.
//!
//! The state lives in shard 0's meta column family under `auth/`, written in the same batch as
//! the round that applied the change, so it is exactly as durable as the raft log entry behind
//! it and a restart (or a raft snapshot, which copies the meta column family) brings it back.
//! Records are etcd's own `authpb.User` and `authpb.Role` encodings.
//!
//! The auth revision counts changes to the store, apart from the KV revision. It starts at 1 and
//! rises by one with each change that succeeds (enabling auth does not count, as in etcd 3.4).
//! A credential checked at an older revision than the store's is refused with "revision of auth
//! store is old".
//!
//! Must not: hash or check passwords (bcrypt is slow; the member taking a request hashes it
//! before proposing and checks passwords off the shard thread), or read the clock.

use std::collections::BTreeMap;

use ballast_proto::authpb::{permission::Type as PermType, Permission, Role, User, UserAddOptions};
use ballast_proto::ballastpb::{auth_command::Request as Cmd, AuthCommand};
use prost::Message;

use crate::error::{EngineError, Result};
use crate::storage::{Cf, KvBackend, ScanOrder, StorageError, WriteBatch};

const ENABLED_KEY: &[u8] = b"auth/enabled";
const REVISION_KEY: &[u8] = b"auth/revision";
const USER_PREFIX: &[u8] = b"auth/user/";
const ROLE_PREFIX: &[u8] = b"auth/role/";

/// The user with every permission; auth cannot be enabled without it.
pub const ROOT_USER: &str = "root";
/// The role that grants every permission and the auth management calls.
pub const ROOT_ROLE: &str = "root";

/// etcd's auth store.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthState {
    /// Whether requests are checked.
    pub enabled: bool,
    /// The auth revision.
    pub revision: u64,
    /// Users by name; each user's roles are sorted.
    pub users: BTreeMap<String, User>,
    /// Roles by name; each role's permissions are sorted by key.
    pub roles: BTreeMap<String, Role>,
}

impl Default for AuthState {
    fn default() -> Self {
        Self { enabled: false, revision: 1, users: BTreeMap::new(), roles: BTreeMap::new() }
    }
}

/// What a change asks besides the store: effects on the member's simple tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenEffect {
    /// Nothing.
    None,
    /// Record a simple token (`prefix`) for `name`.
    Grant {
        /// The user.
        name: String,
        /// The token's random part.
        prefix: String,
    },
    /// Forget every token of this user (deleted, or a new password).
    InvalidateUser(String),
    /// Forget every token (auth disabled).
    InvalidateAll,
}

fn corrupt(what: &'static str) -> EngineError {
    EngineError::Storage(StorageError::Corrupt { cf: "meta", what })
}

fn prefixed(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut key = prefix.to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

/// The end of a prefix scan: the prefix with its last byte raised.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

impl AuthState {
    /// Reads the store from `backend` (an empty store when nothing was written).
    ///
    /// # Errors
    /// A storage error, or `Corrupt` for records that do not decode.
    pub fn load(backend: &impl KvBackend) -> Result<Self> {
        let mut state = Self::default();
        if let Some(v) = backend.get(Cf::Meta, ENABLED_KEY)? {
            state.enabled = v.first() == Some(&1);
        }
        if let Some(v) = backend.get(Cf::Meta, REVISION_KEY)? {
            let bytes: [u8; 8] = v.as_slice().try_into().map_err(|_| corrupt("auth revision"))?;
            state.revision = u64::from_be_bytes(bytes);
        }
        let mut bad = false;
        backend.scan(Cf::Meta, USER_PREFIX, Some(&prefix_end(USER_PREFIX)), ScanOrder::Forward, &mut |_, v| {
            match User::decode(v) {
                Ok(u) => {
                    state.users.insert(String::from_utf8_lossy(&u.name).into_owned(), u);
                }
                Err(_) => bad = true,
            }
            true
        })?;
        backend.scan(Cf::Meta, ROLE_PREFIX, Some(&prefix_end(ROLE_PREFIX)), ScanOrder::Forward, &mut |_, v| {
            match Role::decode(v) {
                Ok(r) => {
                    state.roles.insert(String::from_utf8_lossy(&r.name).into_owned(), r);
                }
                Err(_) => bad = true,
            }
            true
        })?;
        if bad {
            return Err(corrupt("auth record"));
        }
        Ok(state)
    }

    /// Returns true when `user` exists and has the root role.
    pub fn is_root(&self, user: &str) -> bool {
        self.users.get(user).is_some_and(has_root_role)
    }

    /// Checks that `user` may call the auth management RPCs: always while auth is off, else
    /// only a user with the root role (etcd's `IsAdminPermitted`).
    ///
    /// # Errors
    /// `UserEmpty` for no user, `UserNotFound`, `PermissionDenied`.
    pub fn check_admin(&self, user: &str) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if user.is_empty() {
            return Err(EngineError::UserEmpty);
        }
        match self.users.get(user) {
            None => Err(EngineError::UserNotFound),
            Some(u) if !has_root_role(u) => Err(EngineError::PermissionDenied),
            Some(_) => Ok(()),
        }
    }

    /// Checks that `user`, whose credentials were checked at auth revision `revision`, may do
    /// `wanted` on `[key, range_end)` (etcd's `isOpPermitted`).
    ///
    /// # Errors
    /// `UserEmpty` without credentials, `AuthOldRevision`, `PermissionDenied`.
    pub fn check_range(&self, user: &str, revision: u64, key: &[u8], range_end: &[u8], wanted: PermType) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if revision == 0 {
            return Err(EngineError::UserEmpty);
        }
        if revision < self.revision {
            return Err(EngineError::AuthOldRevision);
        }
        let Some(u) = self.users.get(user) else { return Err(EngineError::PermissionDenied) };
        if has_root_role(u) || super::perms::permitted(u, |r| self.roles.get(r), key, range_end, wanted) {
            return Ok(());
        }
        Err(EngineError::PermissionDenied)
    }

    /// Applies `cmd` to the state and to `batch` (shard 0's pending write), with etcd's checks:
    /// the management calls need the root role once auth is on. Answers the token effect.
    ///
    /// # Errors
    /// etcd's auth errors; on error nothing changed.
    pub fn apply(&mut self, cmd: &AuthCommand, batch: &mut WriteBatch) -> Result<TokenEffect> {
        let Some(req) = &cmd.request else { return Err(EngineError::InvalidAuthMgmt) };
        if !matches!(req, Cmd::Authenticate(_)) {
            self.check_admin(&cmd.user)?;
        }
        let effect = match req {
            Cmd::Enable(_) => {
                if self.enabled {
                    return Ok(TokenEffect::None);
                }
                let root = self.users.get(ROOT_USER).ok_or(EngineError::RootUserNotExist)?;
                if !has_root_role(root) {
                    return Err(EngineError::RootRoleNotExist);
                }
                self.enabled = true;
                batch.put(Cf::Meta, ENABLED_KEY.to_vec(), vec![1]);
                return Ok(TokenEffect::None); // etcd 3.4 does not count enabling as a change
            }
            Cmd::Disable(_) => {
                if !self.enabled {
                    return Ok(TokenEffect::None);
                }
                self.enabled = false;
                batch.put(Cf::Meta, ENABLED_KEY.to_vec(), vec![0]);
                TokenEffect::InvalidateAll
            }
            Cmd::Authenticate(r) => {
                if !self.enabled {
                    return Err(EngineError::AuthNotEnabled);
                }
                match self.users.get(&r.name) {
                    Some(u) if !u.options.as_ref().is_some_and(|o| o.no_password) => {}
                    _ => return Err(EngineError::AuthFailed),
                }
                // No change to the store: the token lives in memory only, as etcd's do.
                return Ok(TokenEffect::Grant { name: r.name.clone(), prefix: r.prefix.clone() });
            }
            Cmd::UserAdd(r) => {
                if r.name.is_empty() {
                    return Err(EngineError::UserEmpty);
                }
                if self.users.contains_key(&r.name) {
                    return Err(EngineError::UserAlreadyExist);
                }
                let options = r.options.unwrap_or(UserAddOptions { no_password: false });
                let password = if options.no_password { Vec::new() } else { r.hashed_password.clone().into_bytes() };
                let user = User {
                    name: r.name.clone().into_bytes().into(),
                    password: password.into(),
                    roles: Vec::new(),
                    options: Some(options),
                };
                self.put_user(batch, user);
                TokenEffect::None
            }
            Cmd::UserDelete(r) => {
                if self.enabled && r.name == ROOT_USER {
                    return Err(EngineError::InvalidAuthMgmt);
                }
                if self.users.remove(&r.name).is_none() {
                    return Err(EngineError::UserNotFound);
                }
                batch.delete(Cf::Meta, prefixed(USER_PREFIX, &r.name));
                TokenEffect::InvalidateUser(r.name.clone())
            }
            Cmd::UserChangePassword(r) => {
                let mut user = self.users.get(&r.name).cloned().ok_or(EngineError::UserNotFound)?;
                user.password = r.hashed_password.clone().into_bytes().into();
                self.put_user(batch, user);
                TokenEffect::InvalidateUser(r.name.clone())
            }
            Cmd::UserGrantRole(r) => {
                let mut user = self.users.get(&r.user).cloned().ok_or(EngineError::UserNotFound)?;
                if r.role != ROOT_ROLE && !self.roles.contains_key(&r.role) {
                    return Err(EngineError::RoleNotFound);
                }
                match user.roles.binary_search(&r.role) {
                    Ok(_) => return Ok(TokenEffect::None), // granted already: no change
                    Err(at) => user.roles.insert(at, r.role.clone()),
                }
                self.put_user(batch, user);
                TokenEffect::None
            }
            Cmd::UserRevokeRole(r) => {
                if self.enabled && r.name == ROOT_USER && r.role == ROOT_ROLE {
                    return Err(EngineError::InvalidAuthMgmt);
                }
                let mut user = self.users.get(&r.name).cloned().ok_or(EngineError::UserNotFound)?;
                let before = user.roles.len();
                user.roles.retain(|role| role != &r.role);
                if user.roles.len() == before {
                    return Err(EngineError::RoleNotGranted);
                }
                self.put_user(batch, user);
                TokenEffect::None
            }
            Cmd::RoleAdd(r) => {
                if r.name.is_empty() {
                    return Err(EngineError::RoleEmpty);
                }
                if self.roles.contains_key(&r.name) {
                    return Err(EngineError::RoleAlreadyExist);
                }
                self.put_role(batch, Role { name: r.name.clone().into_bytes().into(), key_permission: Vec::new() });
                TokenEffect::None
            }
            Cmd::RoleDelete(r) => {
                if self.enabled && r.role == ROOT_ROLE {
                    return Err(EngineError::InvalidAuthMgmt);
                }
                if self.roles.remove(&r.role).is_none() {
                    return Err(EngineError::RoleNotFound);
                }
                batch.delete(Cf::Meta, prefixed(ROLE_PREFIX, &r.role));
                // The role goes from every user that had it.
                let holders: Vec<User> = self.users.values().filter(|u| u.roles.contains(&r.role)).cloned().collect();
                for mut u in holders {
                    u.roles.retain(|role| role != &r.role);
                    self.put_user(batch, u);
                }
                TokenEffect::None
            }
            Cmd::RoleGrantPermission(r) => {
                let mut role = self.roles.get(&r.name).cloned().ok_or(EngineError::RoleNotFound)?;
                let perm = r.perm.clone().unwrap_or_default();
                let same = role.key_permission.iter_mut().find(|p| p.key == perm.key && p.range_end == perm.range_end);
                match same {
                    Some(p) => p.perm_type = perm.perm_type,
                    None => {
                        role.key_permission.push(Permission {
                            perm_type: perm.perm_type,
                            key: perm.key,
                            range_end: perm.range_end,
                        });
                        role.key_permission.sort_by(|a, b| a.key.cmp(&b.key));
                    }
                }
                self.put_role(batch, role);
                TokenEffect::None
            }
            Cmd::RoleRevokePermission(r) => {
                let mut role = self.roles.get(&r.role).cloned().ok_or(EngineError::RoleNotFound)?;
                let before = role.key_permission.len();
                role.key_permission.retain(|p| !(p.key == r.key && p.range_end == r.range_end));
                if role.key_permission.len() == before {
                    return Err(EngineError::PermissionNotGranted);
                }
                self.put_role(batch, role);
                TokenEffect::None
            }
        };
        self.revision += 1;
        batch.put(Cf::Meta, REVISION_KEY.to_vec(), self.revision.to_be_bytes().to_vec());
        Ok(effect)
    }

    fn put_user(&mut self, batch: &mut WriteBatch, user: User) {
        let name = String::from_utf8_lossy(&user.name).into_owned();
        batch.put(Cf::Meta, prefixed(USER_PREFIX, &name), user.encode_to_vec());
        self.users.insert(name, user);
    }

    fn put_role(&mut self, batch: &mut WriteBatch, role: Role) {
        let name = String::from_utf8_lossy(&role.name).into_owned();
        batch.put(Cf::Meta, prefixed(ROLE_PREFIX, &name), role.encode_to_vec());
        self.roles.insert(name, role);
    }
}

fn has_root_role(u: &User) -> bool {
    u.roles.binary_search_by(|r| r.as_str().cmp(ROOT_ROLE)).is_ok()
}

#[cfg(test)]
mod tests {
    use ballast_proto::etcdserverpb::{
        AuthEnableRequest, AuthRoleAddRequest, AuthRoleGrantPermissionRequest, AuthUserAddRequest,
        AuthUserGrantRoleRequest, AuthUserRevokeRoleRequest,
    };

    use super::*;
    use crate::storage::mem::MemBackend;
    use crate::storage::WriteOpts;

    fn cmd(user: &str, request: Cmd) -> AuthCommand {
        AuthCommand { request: Some(request), user: user.into(), auth_revision: 0 }
    }

    fn user_add(name: &str) -> Cmd {
        Cmd::UserAdd(AuthUserAddRequest { name: name.into(), hashed_password: "h".into(), ..Default::default() })
    }

    #[test]
    fn enabling_needs_root_with_the_root_role_then_changes_need_root() {
        let backend = MemBackend::default();
        let mut s = AuthState::default();
        let mut b = WriteBatch::default();
        let enable = || Cmd::Enable(AuthEnableRequest {});
        assert!(matches!(s.apply(&cmd("", enable()), &mut b), Err(EngineError::RootUserNotExist)));
        s.apply(&cmd("", user_add("root")), &mut b).expect("add root");
        assert!(matches!(s.apply(&cmd("", enable()), &mut b), Err(EngineError::RootRoleNotExist)));
        let grant = Cmd::UserGrantRole(AuthUserGrantRoleRequest { user: "root".into(), role: "root".into() });
        s.apply(&cmd("", grant), &mut b).expect("the root role needs no RoleAdd");
        s.apply(&cmd("", enable()), &mut b).expect("enabled");
        let revision = s.revision;
        assert_eq!(revision, 3, "1, then two changes; enabling does not count");
        assert!(matches!(s.apply(&cmd("", user_add("u")), &mut b), Err(EngineError::UserEmpty)));
        assert!(matches!(s.apply(&cmd("nobody", user_add("u")), &mut b), Err(EngineError::UserNotFound)));
        s.apply(&cmd("root", user_add("u")), &mut b).expect("root may");
        assert!(matches!(s.apply(&cmd("u", user_add("v")), &mut b), Err(EngineError::PermissionDenied)));
        let revoke = Cmd::UserRevokeRole(AuthUserRevokeRoleRequest { name: "root".into(), role: "root".into() });
        assert!(matches!(s.apply(&cmd("root", revoke), &mut b), Err(EngineError::InvalidAuthMgmt)));
        backend.write(b, WriteOpts { sync: false }).expect("write");
        assert_eq!(AuthState::load(&backend).expect("load"), s, "the batch holds the whole state");
    }

    #[test]
    fn a_prefix_grant_lets_a_user_read_and_write_under_it_only() {
        let mut s = AuthState::default();
        let mut b = WriteBatch::default();
        for c in [
            user_add("root"),
            Cmd::UserGrantRole(AuthUserGrantRoleRequest { user: "root".into(), role: "root".into() }),
            user_add("u"),
            Cmd::RoleAdd(AuthRoleAddRequest { name: "r".into() }),
            Cmd::RoleGrantPermission(AuthRoleGrantPermissionRequest {
                name: "r".into(),
                perm: Some(Permission {
                    perm_type: PermType::Readwrite as i32,
                    key: "/a/".into(),
                    range_end: "/a0".into(),
                }),
            }),
            Cmd::UserGrantRole(AuthUserGrantRoleRequest { user: "u".into(), role: "r".into() }),
            Cmd::Enable(AuthEnableRequest {}),
        ] {
            s.apply(&cmd("", c), &mut b).expect("applies");
        }
        let rev = s.revision;
        s.check_range("u", rev, b"/a/x", b"", PermType::Write).expect("under the prefix");
        s.check_range("u", rev, b"/a/", b"/a0", PermType::Read).expect("the prefix itself");
        assert!(matches!(s.check_range("u", rev, b"/b", b"", PermType::Read), Err(EngineError::PermissionDenied)));
        assert!(matches!(s.check_range("u", 0, b"/a/x", b"", PermType::Read), Err(EngineError::UserEmpty)));
        assert!(matches!(s.check_range("u", rev - 1, b"/a/x", b"", PermType::Read), Err(EngineError::AuthOldRevision)));
        s.check_range("root", rev, b"", b"\0", PermType::Write).expect("root may do anything");
    }
}
