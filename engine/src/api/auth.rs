//! The `etcdserverpb.Auth` service, and how every other service learns who a request is from.
//!
//! **Who.** A request's credentials are, as etcd reads them: the `token` gRPC metadata (or
//! `authorization`, which the JSON gateway fills from the `Authorization` header); else, with
//! `--client-cert-auth`, the common name of the client certificate the TLS handshake verified;
//! else none. [`ApiContext::caller`] resolves them to an [`AuthInfo`] against the published
//! store (`crate::auth`): a simple token whose raft index this member has not applied yet waits
//! for it (up to the request timeout), as etcd's does; an unknown or expired one is "invalid
//! auth token". While auth is disabled nothing is resolved and everything is allowed.
//!
//! **What.** The checks are etcd's ([`crate::auth::checks`]): Range needs read on its range;
//! Put write on its key (and read with `prev_kv`); DeleteRange write (and read with `prev_kv`);
//! Txn every compare read and every op as above, nested txns included; Watch read on the range
//! of each create; LeaseRevoke write on every key attached to the lease, LeaseTimeToLive read on
//! them; Defragment, Hash, HashKV, Snapshot and the membership changes need the root role;
//! Compact, Status, Alarm, MoveLeader and MemberList need nothing. The permission checks run on
//! the member that took the request, against its published store, before the request is
//! proposed; the auth management changes are checked again by shard 0's applier, so every
//! member agrees on them.
//!
//! **Changes.** Every auth store change is a write to shard 0 (`RaftCommand::auth`). Passwords
//! are hashed here with bcrypt (`--bcrypt-cost`) on tokio's blocking pool and only the hash is
//! proposed; Authenticate checks the password the same way, then proposes a simple token's
//! random part (or signs a JWT, which needs no entry).
//!
//! Response headers carry the KV revision, as etcd's auth answers do; `AuthStatus` reports the
//! auth revision.

use ballast_proto::authpb::permission::Type as PermType;
use ballast_proto::ballastpb::{auth_command::Request as Cmd, raft_command::Command, AuthCommand, SimpleTokenGrant};
use ballast_proto::etcdserverpb::{
    auth_server::Auth, AuthDisableRequest, AuthDisableResponse, AuthEnableRequest, AuthEnableResponse,
    AuthRoleAddRequest, AuthRoleAddResponse, AuthRoleDeleteRequest, AuthRoleDeleteResponse, AuthRoleGetRequest,
    AuthRoleGetResponse, AuthRoleGrantPermissionRequest, AuthRoleGrantPermissionResponse, AuthRoleListRequest,
    AuthRoleListResponse, AuthRoleRevokePermissionRequest, AuthRoleRevokePermissionResponse, AuthStatusRequest,
    AuthStatusResponse, AuthUserAddRequest, AuthUserAddResponse, AuthUserChangePasswordRequest,
    AuthUserChangePasswordResponse, AuthUserDeleteRequest, AuthUserDeleteResponse, AuthUserGetRequest,
    AuthUserGetResponse, AuthUserGrantRoleRequest, AuthUserGrantRoleResponse, AuthUserListRequest,
    AuthUserListResponse, AuthUserRevokeRoleRequest, AuthUserRevokeRoleResponse, AuthenticateRequest,
    AuthenticateResponse, RangeRequest,
};
use tonic::{Request, Response, Status};

use super::{unexpected, Api, ApiContext};
use crate::auth::{token, AuthInfo, AuthState, TokenKind};
use crate::error::{EngineError, Result};
use crate::shard::{ShardMsg, WriteResponse};

/// A request's credentials as they arrived, before they are resolved.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// The `token` (or `authorization`) metadata.
    pub token: Option<String>,
    /// The verified client certificate's common name (with `--client-cert-auth`).
    pub common_name: Option<String>,
}

impl Credentials {
    /// Reads the credentials of a request with `metadata`, received on a connection whose
    /// information is in `extensions`.
    pub fn of(metadata: &tonic::metadata::MetadataMap, extensions: &http::Extensions, cert_auth: bool) -> Self {
        let token = ["token", "authorization"]
            .iter()
            .find_map(|k| metadata.get(*k))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let common_name = if cert_auth && token.is_none() { common_name(extensions) } else { None };
        Self { token, common_name }
    }
}

/// Returns the subject common name of the client certificate the handshake verified.
fn common_name(extensions: &http::Extensions) -> Option<String> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo, UdsConnectInfo};
    let certs = match extensions.get::<TlsConnectInfo<TcpConnectInfo>>() {
        Some(tcp) => tcp.peer_certs()?,
        None => extensions.get::<TlsConnectInfo<UdsConnectInfo>>()?.peer_certs()?,
    };
    let (_, cert) = x509_parser::parse_x509_certificate(certs.first()?.as_ref()).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some(cn)
}

impl ApiContext {
    /// Returns who sent `req`, or None while auth is disabled (then nothing is checked).
    ///
    /// # Errors
    /// `InvalidAuthToken` for a token that is unknown, expired or malformed.
    pub async fn caller<T>(&self, req: &Request<T>) -> Result<Option<AuthInfo>> {
        if !self.auth.enabled() || req.extensions().get::<Internal>().is_some() {
            return Ok(None);
        }
        let creds = Credentials::of(req.metadata(), req.extensions(), self.client_cert_auth);
        self.resolve(&creds).await.map(Some)
    }

    /// Resolves `creds` to the user and the auth revision they stand for.
    ///
    /// # Errors
    /// `InvalidAuthToken`.
    pub async fn resolve(&self, creds: &Credentials) -> Result<AuthInfo> {
        let revision = self.auth.state().revision;
        let Some(token) = &creds.token else {
            return Ok(match &creds.common_name {
                Some(cn) => AuthInfo { user: cn.clone(), revision },
                None => AuthInfo::default(),
            });
        };
        match &self.auth.config.token {
            TokenKind::Jwt(jwt) => match jwt.check(token) {
                Some((user, revision)) => Ok(AuthInfo { user, revision }),
                None => Err(EngineError::InvalidAuthToken),
            },
            TokenKind::Simple => {
                let Some((prefix, index)) = token::split_simple(token) else {
                    return Err(EngineError::InvalidAuthToken);
                };
                if self.first().applied() < index {
                    // Granted through a log entry this member has not applied yet.
                    let left = self.request_timeout;
                    self.first().call(left, |tx| ShardMsg::WaitApplied(index, tx)).await.map_err(|e| match e {
                        EngineError::Timeout => EngineError::InvalidAuthToken,
                        other => other,
                    })?;
                }
                match self.auth.tokens.user(prefix) {
                    Some(user) => Ok(AuthInfo { user, revision: self.auth.state().revision }),
                    None => Err(EngineError::InvalidAuthToken),
                }
            }
        }
    }

    /// Runs `check` on the caller of `req` and the published store; passes while auth is
    /// disabled.
    ///
    /// # Errors
    /// The caller's credentials' error, or the check's.
    pub async fn permit<T>(
        &self,
        req: &Request<T>,
        check: impl FnOnce(&AuthState, &AuthInfo) -> Result<()>,
    ) -> Result<()> {
        let Some(info) = self.caller(req).await? else { return Ok(()) };
        check(&self.auth.state(), &info)
    }

    /// Checks that the caller of `req` has the root role (etcd's `IsAdminPermitted`).
    ///
    /// # Errors
    /// `UserEmpty`, `UserNotFound`, `PermissionDenied`, `InvalidAuthToken`.
    pub async fn permit_admin<T>(&self, req: &Request<T>) -> Result<()> {
        self.permit(req, |state, info| state.check_admin(&info.user)).await
    }

    /// Waits until this member has applied every auth change acknowledged before the call
    /// (a linearizable read of shard 0), as etcd serves the auth reads through its log.
    async fn auth_barrier(&self) -> Result<()> {
        let probe = RangeRequest { key: vec![0].into(), count_only: true, ..Default::default() };
        self.range(probe).await.map(|_| ())
    }
}

/// Marks a request the member makes of its own services on a caller's behalf (Lock and
/// Election build on KV, Lease and Watch), after checking the caller itself.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Internal;

/// Returns `m` as a request the member makes of itself ([`Internal`]).
pub(crate) fn internal<T>(m: T) -> Request<T> {
    let mut req = Request::new(m);
    req.extensions_mut().insert(Internal);
    req
}

/// Checks read and, when `write`, write on every key under `<name>/` (the keys the Lock and
/// Election services make, read and watch for a lock or election `name`).
pub(crate) fn check_name(state: &AuthState, who: &AuthInfo, name: &[u8], write: bool) -> Result<()> {
    let mut prefix = name.to_vec();
    prefix.push(b'/');
    let mut end = prefix.clone();
    if let Some(last) = end.last_mut() {
        *last += 1; // "/" + 1 = "0": the end of the prefix
    }
    state.check_range(&who.user, who.revision, &prefix, &end, PermType::Read)?;
    if write {
        state.check_range(&who.user, who.revision, &prefix, &end, PermType::Write)?;
    }
    Ok(())
}

/// Serves the Auth RPCs.
#[derive(Debug, Clone)]
pub struct AuthService {
    api: Api,
}

impl AuthService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { api }
    }

    /// Proposes the auth change `request` from the caller of `req` on shard 0.
    async fn change<T>(&self, req: &Request<T>, request: Cmd) -> Result<()> {
        let info = self.api.caller(req).await?.unwrap_or_default();
        let cmd = AuthCommand { request: Some(request), user: info.user, auth_revision: info.revision };
        match self.api.write(0, Command::Auth(cmd)).await? {
            WriteResponse::Auth(_) => Ok(()),
            _ => Err(EngineError::Remote(unexpected("an auth change"))),
        }
    }

    /// Hashes `password` with the configured cost, on the blocking pool.
    async fn hash(&self, password: String) -> Result<String> {
        let cost = self.api.auth.config.bcrypt_cost;
        tokio::task::spawn_blocking(move || bcrypt::hash(password, cost))
            .await
            .map_err(|_| EngineError::Stopped)?
            .map_err(|e| EngineError::Remote(Status::internal(format!("etcdserver: bcrypt: {e}"))))
    }
}

/// Checks `password` against the bcrypt `hash`, on the blocking pool.
async fn verify(password: String, hash: Vec<u8>) -> bool {
    tokio::task::spawn_blocking(move || {
        let hash = String::from_utf8_lossy(&hash);
        bcrypt::verify(password, &hash).unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

macro_rules! answer {
    ($api:expr, $resp:ident) => {
        Ok(Response::new($resp { header: $api.header() }))
    };
}

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(&self, req: Request<AuthEnableRequest>) -> Result<Response<AuthEnableResponse>, Status> {
        self.change(&req, Cmd::Enable(AuthEnableRequest {})).await?;
        answer!(self.api, AuthEnableResponse)
    }

    async fn auth_disable(&self, req: Request<AuthDisableRequest>) -> Result<Response<AuthDisableResponse>, Status> {
        self.change(&req, Cmd::Disable(AuthDisableRequest {})).await?;
        answer!(self.api, AuthDisableResponse)
    }

    async fn auth_status(&self, _req: Request<AuthStatusRequest>) -> Result<Response<AuthStatusResponse>, Status> {
        self.api.auth_barrier().await?;
        let state = self.api.auth.state();
        Ok(Response::new(AuthStatusResponse {
            header: self.api.header(),
            enabled: state.enabled,
            auth_revision: state.revision,
        }))
    }

    async fn authenticate(&self, req: Request<AuthenticateRequest>) -> Result<Response<AuthenticateResponse>, Status> {
        self.api.auth_barrier().await?;
        let r = req.into_inner();
        let state = self.api.auth.state();
        if !state.enabled {
            return Err(EngineError::AuthNotEnabled.into());
        }
        let user = match state.users.get(&r.name) {
            Some(u) if u.options.as_ref().is_some_and(|o| o.no_password) => {
                return Err(EngineError::NoPasswordUser.into())
            }
            Some(u) => u.clone(),
            None => return Err(EngineError::AuthFailed.into()),
        };
        if !verify(r.password, user.password.to_vec()).await {
            return Err(EngineError::AuthFailed.into());
        }
        let token = match &self.api.auth.config.token {
            TokenKind::Jwt(jwt) => jwt
                .sign(&r.name, state.revision, crate::clock::unix_seconds())
                .ok_or_else(|| Status::internal("etcdserver: auth: token signing attempted with verify-only key"))?,
            TokenKind::Simple => {
                let prefix = token::simple_prefix();
                let grant = SimpleTokenGrant { name: r.name.clone(), prefix: prefix.clone() };
                let cmd =
                    AuthCommand { request: Some(Cmd::Authenticate(grant)), user: String::new(), auth_revision: 0 };
                match self.api.write(0, Command::Auth(cmd)).await? {
                    WriteResponse::Auth(_) => {}
                    _ => return Err(unexpected("authenticate")),
                }
                // Any member that has applied this index knows the token.
                format!("{prefix}.{}", self.api.first().applied())
            }
        };
        Ok(Response::new(AuthenticateResponse { header: self.api.header(), token }))
    }

    async fn user_add(&self, req: Request<AuthUserAddRequest>) -> Result<Response<AuthUserAddResponse>, Status> {
        let no_password = req.get_ref().options.is_some_and(|o| o.no_password);
        let mut r = req.get_ref().clone();
        if r.name.is_empty() {
            return Err(EngineError::UserEmpty.into());
        }
        if !no_password && r.hashed_password.is_empty() {
            r.hashed_password = self.hash(std::mem::take(&mut r.password)).await?;
        }
        r.password.clear();
        self.change(&req, Cmd::UserAdd(r)).await?;
        answer!(self.api, AuthUserAddResponse)
    }

    async fn user_get(&self, req: Request<AuthUserGetRequest>) -> Result<Response<AuthUserGetResponse>, Status> {
        self.api.auth_barrier().await?;
        let info = self.api.caller(&req).await?;
        let state = self.api.auth.state();
        if let Some(info) = info {
            if let Err(e) = state.check_admin(&info.user) {
                if info.user != req.get_ref().name {
                    return Err(e.into());
                }
            }
        }
        let user = state.users.get(&req.get_ref().name).ok_or(EngineError::UserNotFound)?;
        Ok(Response::new(AuthUserGetResponse { header: self.api.header(), roles: user.roles.clone() }))
    }

    async fn user_list(&self, req: Request<AuthUserListRequest>) -> Result<Response<AuthUserListResponse>, Status> {
        self.api.auth_barrier().await?;
        self.api.permit_admin(&req).await?;
        let users = self.api.auth.state().users.keys().cloned().collect();
        Ok(Response::new(AuthUserListResponse { header: self.api.header(), users }))
    }

    async fn user_delete(
        &self,
        req: Request<AuthUserDeleteRequest>,
    ) -> Result<Response<AuthUserDeleteResponse>, Status> {
        self.change(&req, Cmd::UserDelete(req.get_ref().clone())).await?;
        answer!(self.api, AuthUserDeleteResponse)
    }

    async fn user_change_password(
        &self,
        req: Request<AuthUserChangePasswordRequest>,
    ) -> Result<Response<AuthUserChangePasswordResponse>, Status> {
        let mut r = req.get_ref().clone();
        if r.hashed_password.is_empty() {
            r.hashed_password = self.hash(std::mem::take(&mut r.password)).await?;
        }
        r.password.clear();
        self.change(&req, Cmd::UserChangePassword(r)).await?;
        answer!(self.api, AuthUserChangePasswordResponse)
    }

    async fn user_grant_role(
        &self,
        req: Request<AuthUserGrantRoleRequest>,
    ) -> Result<Response<AuthUserGrantRoleResponse>, Status> {
        self.change(&req, Cmd::UserGrantRole(req.get_ref().clone())).await?;
        answer!(self.api, AuthUserGrantRoleResponse)
    }

    async fn user_revoke_role(
        &self,
        req: Request<AuthUserRevokeRoleRequest>,
    ) -> Result<Response<AuthUserRevokeRoleResponse>, Status> {
        self.change(&req, Cmd::UserRevokeRole(req.get_ref().clone())).await?;
        answer!(self.api, AuthUserRevokeRoleResponse)
    }

    async fn role_add(&self, req: Request<AuthRoleAddRequest>) -> Result<Response<AuthRoleAddResponse>, Status> {
        self.change(&req, Cmd::RoleAdd(req.get_ref().clone())).await?;
        answer!(self.api, AuthRoleAddResponse)
    }

    async fn role_get(&self, req: Request<AuthRoleGetRequest>) -> Result<Response<AuthRoleGetResponse>, Status> {
        self.api.auth_barrier().await?;
        let info = self.api.caller(&req).await?;
        let state = self.api.auth.state();
        let wanted = &req.get_ref().role;
        if let Some(info) = info {
            if let Err(e) = state.check_admin(&info.user) {
                let holds = state.users.get(&info.user).is_some_and(|u| u.roles.contains(wanted));
                if !holds {
                    return Err(e.into());
                }
            }
        }
        let role = state.roles.get(wanted).ok_or(EngineError::RoleNotFound)?;
        Ok(Response::new(AuthRoleGetResponse { header: self.api.header(), perm: role.key_permission.clone() }))
    }

    async fn role_list(&self, req: Request<AuthRoleListRequest>) -> Result<Response<AuthRoleListResponse>, Status> {
        self.api.auth_barrier().await?;
        self.api.permit_admin(&req).await?;
        let roles = self.api.auth.state().roles.keys().cloned().collect();
        Ok(Response::new(AuthRoleListResponse { header: self.api.header(), roles }))
    }

    async fn role_delete(
        &self,
        req: Request<AuthRoleDeleteRequest>,
    ) -> Result<Response<AuthRoleDeleteResponse>, Status> {
        self.change(&req, Cmd::RoleDelete(req.get_ref().clone())).await?;
        answer!(self.api, AuthRoleDeleteResponse)
    }

    async fn role_grant_permission(
        &self,
        req: Request<AuthRoleGrantPermissionRequest>,
    ) -> Result<Response<AuthRoleGrantPermissionResponse>, Status> {
        self.change(&req, Cmd::RoleGrantPermission(req.get_ref().clone())).await?;
        answer!(self.api, AuthRoleGrantPermissionResponse)
    }

    async fn role_revoke_permission(
        &self,
        req: Request<AuthRoleRevokePermissionRequest>,
    ) -> Result<Response<AuthRoleRevokePermissionResponse>, Status> {
        self.change(&req, Cmd::RoleRevokePermission(req.get_ref().clone())).await?;
        answer!(self.api, AuthRoleRevokePermissionResponse)
    }
}

/// The read permission a watch create needs, on the range as etcd's watch server normalises it
/// before the check (an empty key is "\0"; a from-key range end "\0" is checked as the key).
pub fn watch_check(state: &AuthState, info: &AuthInfo, key: &[u8], range_end: &[u8]) -> Result<()> {
    let key: &[u8] = if key.is_empty() { &[0] } else { key };
    let range_end: &[u8] = if range_end == [0] { &[] } else { range_end };
    state.check_range(&info.user, info.revision, key, range_end, PermType::Read)
}

/// The reason a refused watch create carries: etcd writes the gRPC error's whole text.
pub fn watch_refusal(e: &EngineError) -> &'static str {
    match e {
        EngineError::InvalidAuthToken => "rpc error: code = Unauthenticated desc = etcdserver: invalid auth token",
        EngineError::AuthOldRevision => {
            "rpc error: code = InvalidArgument desc = etcdserver: revision of auth store is old"
        }
        EngineError::UserEmpty => "rpc error: code = InvalidArgument desc = etcdserver: user name is empty",
        _ => "rpc error: code = PermissionDenied desc = etcdserver: permission denied",
    }
}
