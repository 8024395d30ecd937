//! etcd's gRPC-JSON gateway on the client port: `POST /v3/<service>/<method>` (and `/v3beta/`,
//! which etcd 3.4 still serves) with the request message as JSON (see [`pbjson`](super::pbjson)
//! for the mapping), answered with the response message as JSON.
//!
//! Like etcd's gateway (grpc-gateway, a gRPC client of its own server), each call is made as a
//! gRPC call of the client port's service stack, in process: it takes the same path as a call
//! from etcdctl (auth, learner refusals, `grpc_server_handled_total`, the services' own errors),
//! with the `Authorization` header as `authorization` metadata and each `Grpc-Metadata-<key>`
//! header as `<key>`, as grpc-gateway passes them. A client certificate never names the user of
//! a gateway call.
//!
//! Answers as grpc-gateway v1 (etcd 3.4 and 3.5) writes them:
//! * unary: the response as JSON, or `{"error":..,"message":..,"code":..}` with the HTTP status
//!   grpc-gateway gives the gRPC code;
//! * server and bidirectional streams (`/v3/watch`, `/v3/lease/keepalive`,
//!   `/v3/maintenance/snapshot`, `/v3/election/observe`): one line `{"result":<message>}` per
//!   message, and an error as `{"error":{"grpc_code":..,"http_code":..,"message":..,
//!   "http_status":..}}` (with that HTTP status when it comes before any message). The request
//!   body of a bidirectional stream is read as a sequence of JSON messages, each sent as it is
//!   complete; its end half-closes the call (a watch goes on; keep-alives end).
//!
//! As grpc-gateway does, unknown JSON fields are ignored, the first JSON value of a body is
//! read and anything after it is not, and an empty body is the empty message. A body it cannot
//! read is refused with Go's words for it (see [`gojson`]): 400 and code InvalidArgument, or
//! for the first message of a bidirectional stream 500 and code Unknown.

use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use http_body::Frame;
use http_body_util::BodyExt;
use tonic::body::Body;
use tower::{Service, ServiceExt};

use super::http_response::{plain_error, respond};
use super::{gojson, pbjson, Api};

/// How a method's messages flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// One request, one response.
    Unary,
    /// One request, a stream of responses.
    ServerStream,
    /// A stream each way.
    Bidi,
}

/// One gateway path: the gRPC method it calls and the message types it maps.
#[derive(Debug)]
struct Route {
    /// Under `/v3/`.
    path: &'static str,
    /// `<package>.<Service>/<Method>`.
    method: &'static str,
    /// Request and response types, `<package>.<Message>`.
    request: &'static str,
    response: &'static str,
    shape: Shape,
}

macro_rules! routes {
    ($($path:literal => $pkg:literal $service:literal $method:literal ($req:literal, $resp:literal) $shape:ident;)*) => {
        [$(Route {
            path: $path,
            method: concat!("/", $pkg, ".", $service, "/", $method),
            request: concat!(".", $pkg, ".", $req),
            response: concat!(".", $pkg, ".", $resp),
            shape: Shape::$shape,
        }),*]
    };
}

/// Every path etcd's gateway serves (etcd 3.5's `rpc.proto`, `v3lock.proto` and
/// `v3election.proto` HTTP bindings), with 3.4's `/v3/kv/lease/*` aliases.
static ROUTES: [Route; 50] = routes! {
    "kv/range" => "etcdserverpb" "KV" "Range" ("RangeRequest", "RangeResponse") Unary;
    "kv/put" => "etcdserverpb" "KV" "Put" ("PutRequest", "PutResponse") Unary;
    "kv/deleterange" => "etcdserverpb" "KV" "DeleteRange" ("DeleteRangeRequest", "DeleteRangeResponse") Unary;
    "kv/txn" => "etcdserverpb" "KV" "Txn" ("TxnRequest", "TxnResponse") Unary;
    "kv/compaction" => "etcdserverpb" "KV" "Compact" ("CompactionRequest", "CompactionResponse") Unary;
    "watch" => "etcdserverpb" "Watch" "Watch" ("WatchRequest", "WatchResponse") Bidi;
    "lease/grant" => "etcdserverpb" "Lease" "LeaseGrant" ("LeaseGrantRequest", "LeaseGrantResponse") Unary;
    "lease/revoke" => "etcdserverpb" "Lease" "LeaseRevoke" ("LeaseRevokeRequest", "LeaseRevokeResponse") Unary;
    "kv/lease/revoke" => "etcdserverpb" "Lease" "LeaseRevoke" ("LeaseRevokeRequest", "LeaseRevokeResponse") Unary;
    "lease/keepalive" => "etcdserverpb" "Lease" "LeaseKeepAlive" ("LeaseKeepAliveRequest", "LeaseKeepAliveResponse") Bidi;
    "lease/timetolive" => "etcdserverpb" "Lease" "LeaseTimeToLive" ("LeaseTimeToLiveRequest", "LeaseTimeToLiveResponse") Unary;
    "kv/lease/timetolive" => "etcdserverpb" "Lease" "LeaseTimeToLive" ("LeaseTimeToLiveRequest", "LeaseTimeToLiveResponse") Unary;
    "lease/leases" => "etcdserverpb" "Lease" "LeaseLeases" ("LeaseLeasesRequest", "LeaseLeasesResponse") Unary;
    "kv/lease/leases" => "etcdserverpb" "Lease" "LeaseLeases" ("LeaseLeasesRequest", "LeaseLeasesResponse") Unary;
    "cluster/member/add" => "etcdserverpb" "Cluster" "MemberAdd" ("MemberAddRequest", "MemberAddResponse") Unary;
    "cluster/member/remove" => "etcdserverpb" "Cluster" "MemberRemove" ("MemberRemoveRequest", "MemberRemoveResponse") Unary;
    "cluster/member/update" => "etcdserverpb" "Cluster" "MemberUpdate" ("MemberUpdateRequest", "MemberUpdateResponse") Unary;
    "cluster/member/list" => "etcdserverpb" "Cluster" "MemberList" ("MemberListRequest", "MemberListResponse") Unary;
    "cluster/member/promote" => "etcdserverpb" "Cluster" "MemberPromote" ("MemberPromoteRequest", "MemberPromoteResponse") Unary;
    "maintenance/alarm" => "etcdserverpb" "Maintenance" "Alarm" ("AlarmRequest", "AlarmResponse") Unary;
    "maintenance/status" => "etcdserverpb" "Maintenance" "Status" ("StatusRequest", "StatusResponse") Unary;
    "maintenance/defragment" => "etcdserverpb" "Maintenance" "Defragment" ("DefragmentRequest", "DefragmentResponse") Unary;
    "maintenance/hash" => "etcdserverpb" "Maintenance" "Hash" ("HashRequest", "HashResponse") Unary;
    "maintenance/hashkv" => "etcdserverpb" "Maintenance" "HashKV" ("HashKVRequest", "HashKVResponse") Unary;
    "maintenance/snapshot" => "etcdserverpb" "Maintenance" "Snapshot" ("SnapshotRequest", "SnapshotResponse") ServerStream;
    "maintenance/transfer-leadership" => "etcdserverpb" "Maintenance" "MoveLeader" ("MoveLeaderRequest", "MoveLeaderResponse") Unary;
    "auth/enable" => "etcdserverpb" "Auth" "AuthEnable" ("AuthEnableRequest", "AuthEnableResponse") Unary;
    "auth/disable" => "etcdserverpb" "Auth" "AuthDisable" ("AuthDisableRequest", "AuthDisableResponse") Unary;
    "auth/status" => "etcdserverpb" "Auth" "AuthStatus" ("AuthStatusRequest", "AuthStatusResponse") Unary;
    "auth/authenticate" => "etcdserverpb" "Auth" "Authenticate" ("AuthenticateRequest", "AuthenticateResponse") Unary;
    "auth/user/add" => "etcdserverpb" "Auth" "UserAdd" ("AuthUserAddRequest", "AuthUserAddResponse") Unary;
    "auth/user/get" => "etcdserverpb" "Auth" "UserGet" ("AuthUserGetRequest", "AuthUserGetResponse") Unary;
    "auth/user/list" => "etcdserverpb" "Auth" "UserList" ("AuthUserListRequest", "AuthUserListResponse") Unary;
    "auth/user/delete" => "etcdserverpb" "Auth" "UserDelete" ("AuthUserDeleteRequest", "AuthUserDeleteResponse") Unary;
    "auth/user/changepw" => "etcdserverpb" "Auth" "UserChangePassword" ("AuthUserChangePasswordRequest", "AuthUserChangePasswordResponse") Unary;
    "auth/user/grant" => "etcdserverpb" "Auth" "UserGrantRole" ("AuthUserGrantRoleRequest", "AuthUserGrantRoleResponse") Unary;
    "auth/user/revoke" => "etcdserverpb" "Auth" "UserRevokeRole" ("AuthUserRevokeRoleRequest", "AuthUserRevokeRoleResponse") Unary;
    "auth/role/add" => "etcdserverpb" "Auth" "RoleAdd" ("AuthRoleAddRequest", "AuthRoleAddResponse") Unary;
    "auth/role/get" => "etcdserverpb" "Auth" "RoleGet" ("AuthRoleGetRequest", "AuthRoleGetResponse") Unary;
    "auth/role/list" => "etcdserverpb" "Auth" "RoleList" ("AuthRoleListRequest", "AuthRoleListResponse") Unary;
    "auth/role/delete" => "etcdserverpb" "Auth" "RoleDelete" ("AuthRoleDeleteRequest", "AuthRoleDeleteResponse") Unary;
    "auth/role/grant" => "etcdserverpb" "Auth" "RoleGrantPermission" ("AuthRoleGrantPermissionRequest", "AuthRoleGrantPermissionResponse") Unary;
    "auth/role/revoke" => "etcdserverpb" "Auth" "RoleRevokePermission" ("AuthRoleRevokePermissionRequest", "AuthRoleRevokePermissionResponse") Unary;
    "lock/lock" => "v3lockpb" "Lock" "Lock" ("LockRequest", "LockResponse") Unary;
    "lock/unlock" => "v3lockpb" "Lock" "Unlock" ("UnlockRequest", "UnlockResponse") Unary;
    "election/campaign" => "v3electionpb" "Election" "Campaign" ("CampaignRequest", "CampaignResponse") Unary;
    "election/proclaim" => "v3electionpb" "Election" "Proclaim" ("ProclaimRequest", "ProclaimResponse") Unary;
    "election/leader" => "v3electionpb" "Election" "Leader" ("LeaderRequest", "LeaderResponse") Unary;
    "election/observe" => "v3electionpb" "Election" "Observe" ("LeaderRequest", "LeaderResponse") ServerStream;
    "election/resign" => "v3electionpb" "Election" "Resign" ("ResignRequest", "ResignResponse") Unary;
};

/// Returns the path under the gateway's prefix, for a request the gateway answers.
pub(crate) fn gateway_path(path: &str) -> Option<&str> {
    path.strip_prefix("/v3/").or_else(|| path.strip_prefix("/v3beta/"))
}

/// grpc-gateway's HTTP status for a gRPC code (its v1 mapping, which etcd 3.4 and 3.5 use).
fn http_status(code: tonic::Code) -> u16 {
    use tonic::Code as C;
    match code {
        C::Ok => 200,
        C::Cancelled => 408,
        C::InvalidArgument | C::OutOfRange => 400,
        C::DeadlineExceeded => 504,
        C::NotFound => 404,
        C::AlreadyExists | C::Aborted => 409,
        C::PermissionDenied => 403,
        C::Unauthenticated => 401,
        C::ResourceExhausted => 429,
        C::FailedPrecondition => 412,
        C::Unimplemented => 501,
        C::Unavailable => 503,
        C::Unknown | C::Internal | C::DataLoss => 500,
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// etcd's gateway error body for a unary call.
fn error(code: tonic::Code, message: &str) -> http::Response<Body> {
    let text = json_string(message);
    let body = format!("{{\"error\":{text},\"message\":{text},\"code\":{}}}", code as i32);
    respond(http_status(code), "application/json", body)
}

fn error_of(s: &tonic::Status) -> http::Response<Body> {
    error(s.code(), s.message())
}

/// The error line of a stream (no newline after it, as grpc-gateway writes it).
fn stream_error_line(s: &tonic::Status) -> Bytes {
    let status = http_status(s.code());
    let reason = http::StatusCode::from_u16(status).ok().and_then(|c| c.canonical_reason()).unwrap_or("");
    Bytes::from(format!(
        "{{\"error\":{{\"grpc_code\":{},\"http_code\":{status},\"message\":{},\"http_status\":{}}}}}",
        s.code() as i32,
        json_string(s.message()),
        json_string(reason)
    ))
}

/// A message with gRPC's 5-byte prefix (uncompressed, length in big-endian).
fn grpc_frame(msg: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + msg.len());
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    out.freeze()
}

/// A request body read as grpc-gateway's decoder reads it: one JSON value after another, each
/// encoded as the method's request message as soon as it is complete.
struct RequestBody {
    body: Body,
    buf: BytesMut,
    ended: bool,
    /// Most bytes one value may take.
    limit: usize,
    type_name: &'static str,
}

/// What a request body holds next.
enum Read {
    Message(Vec<u8>),
    /// The body ended (or held only spaces) before another value.
    End,
    /// Not JSON, or not the message: Go's text for it.
    Bad(String),
    TooLarge,
}

impl RequestBody {
    fn new(body: Body, limit: usize, type_name: &'static str) -> Self {
        Self { body, buf: BytesMut::new(), ended: false, limit, type_name }
    }

    async fn next(&mut self) -> Read {
        loop {
            match gojson::first_value(&self.buf, self.ended) {
                gojson::First::Value(range) => {
                    let msg = pbjson::encode_json(self.type_name, &self.buf[range.clone()]);
                    self.buf.advance(range.end);
                    return msg.map_or_else(Read::Bad, Read::Message);
                }
                gojson::First::Empty => return Read::End,
                gojson::First::Error(e) => return Read::Bad(e),
                gojson::First::Incomplete if self.buf.len() > self.limit => return Read::TooLarge,
                gojson::First::Incomplete => {}
            }
            match self.body.frame().await {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(_)) | None => self.ended = true,
            }
        }
    }

    /// The rest of the body as gRPC frames; it ends (the call half-closes) at the end of the
    /// body or at a value that is not the message, as grpc-gateway stops sending there.
    fn frames(self) -> impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send {
        futures::stream::unfold(self, |mut body| async move {
            match body.next().await {
                Read::Message(msg) => Some((Ok(Frame::data(grpc_frame(&msg))), body)),
                _ => None,
            }
        })
    }
}

/// A gRPC response body read message by message.
struct Messages {
    body: Body,
    buf: BytesMut,
    trailers: Option<http::HeaderMap>,
    done: bool,
    deadline: Deadline,
}

/// What a gRPC response body holds next.
enum Next {
    Message(Bytes),
    /// The end of the call: its status from the trailers.
    End(Result<(), tonic::Status>),
    /// The call's `Grpc-Timeout` passed.
    Expired,
}

impl Messages {
    fn new(body: Body, deadline: Deadline) -> Self {
        Self { body, buf: BytesMut::new(), trailers: None, done: false, deadline }
    }

    async fn next(&mut self) -> Next {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
                if self.buf.len() >= 5 + len {
                    let mut m = self.buf.split_to(5 + len);
                    m.advance(5);
                    return Next::Message(m.freeze());
                }
            }
            if self.done {
                let status = self.trailers.as_ref().and_then(tonic::Status::from_header_map);
                return Next::End(match status {
                    Some(s) if s.code() != tonic::Code::Ok => Err(s),
                    _ => Ok(()),
                });
            }
            match before(&mut self.deadline, self.body.frame()).await {
                None => return Next::Expired,
                Some(Some(Ok(f))) => match f.into_data() {
                    Ok(data) => self.buf.extend_from_slice(&data),
                    Err(f) => self.trailers = f.into_trailers().ok(),
                },
                Some(Some(Err(s))) => return Next::End(Err(s)),
                Some(None) => self.done = true,
            }
        }
    }
}

/// When a call given a `Grpc-Timeout` must have ended.
type Deadline = Option<Pin<Box<tokio::time::Sleep>>>;

/// Below the timer's resolution a timeout has passed by the time the call would start (as it
/// has in etcd's gateway, whose call setup alone takes longer).
const TIMER_RESOLUTION: Duration = Duration::from_millis(1);

/// grpc-gateway's reading of a `Grpc-Timeout` header, `<integer><unit>` with unit one of
/// `H M S m u n`: `Ok(None)` for zero (no deadline), `Err` for what it refuses. A negative
/// timeout has passed already.
fn grpc_timeout(value: &str) -> Result<Option<Duration>, ()> {
    let value = value.trim();
    let Some(split) = value.len().checked_sub(1).filter(|&n| n > 0 && value.is_char_boundary(n)) else {
        return Err(());
    };
    let (count, unit) = value.split_at(split);
    let per_unit_nanos = super::client_server::timeout_unit_nanos(unit).ok_or(())?;
    let count: i64 = count.parse().map_err(|_| ())?;
    Ok(match count {
        0 => None,
        c if c < 0 => Some(Duration::ZERO),
        c => Some(Duration::from_nanos(per_unit_nanos.saturating_mul(c.unsigned_abs()))),
    })
}

fn deadline_exceeded() -> tonic::Status {
    tonic::Status::deadline_exceeded("context deadline exceeded")
}

/// Runs `f` unless `deadline` passes first (then `None`).
async fn before<F: std::future::Future>(deadline: &mut Deadline, f: F) -> Option<F::Output> {
    match deadline {
        None => Some(f.await),
        Some(sleep) => tokio::select! {
            biased;
            () = sleep.as_mut() => None,
            out = f => Some(out),
        },
    }
}

/// Answers `POST /v3/<path>` by calling `grpc`, the client port's gRPC services.
pub(crate) async fn serve<S>(api: Api, grpc: S, path: &str, req: http::Request<Body>) -> http::Response<Body>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Send + 'static,
    S::Future: Send,
{
    let Some(route) = ROUTES.iter().find(|r| r.path == path) else {
        return plain_error(404, "Not Found\n");
    };
    if req.method() != http::Method::POST {
        return plain_error(405, "Method Not Allowed\n");
    }
    // As grpc-gateway, the timeout is read before the body, and bounds the whole call.
    let mut deadline: Deadline = match req.headers().get("grpc-timeout") {
        None => None,
        Some(v) => {
            let text = String::from_utf8_lossy(v.as_bytes());
            match grpc_timeout(&text) {
                Err(()) => {
                    return error(tonic::Code::InvalidArgument, &format!("invalid grpc-timeout: {}", text.trim()))
                }
                Ok(None) => None,
                Ok(Some(d)) if d < TIMER_RESOLUTION => return error_of(&deadline_exceeded()),
                Ok(Some(d)) => Some(Box::pin(tokio::time::sleep(d))),
            }
        }
    };
    let (parts, body) = req.into_parts();
    let mut call = http::Request::new(Body::empty());
    *call.method_mut() = http::Method::POST;
    *call.uri_mut() = http::Uri::from_static(route.method);
    let headers = call.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
    headers.insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    for (name, value) in &parts.headers {
        let key = if name == http::header::AUTHORIZATION {
            "authorization"
        } else if let Some(key) = name.as_str().strip_prefix("grpc-metadata-") {
            // A header the call itself sets is not the client's to replace.
            if key.starts_with("grpc-") || key == "content-type" || key == "te" {
                continue;
            }
            key
        } else {
            continue;
        };
        if let Ok(key) = http::HeaderName::from_bytes(key.as_bytes()) {
            headers.append(key, value.clone());
        }
    }
    let mut body = RequestBody::new(body, api.max_request_bytes, route.request);
    let Some(first) = before(&mut deadline, body.next()).await else {
        return error_of(&deadline_exceeded());
    };
    let first = match first {
        Read::Message(msg) => Some(msg),
        Read::End => None,
        Read::TooLarge => return error(tonic::Code::InvalidArgument, "etcdserver: request is too large"),
        // grpc-gateway opens a bidirectional call before it reads the body, so a first message
        // it cannot read is an error of the call (code Unknown), not of the request.
        Read::Bad(e) if route.shape == Shape::Bidi => return error(tonic::Code::Unknown, &e),
        Read::Bad(e) => return error(tonic::Code::InvalidArgument, &e),
    };
    *call.body_mut() = if route.shape == Shape::Bidi {
        let first = futures::stream::iter(first.map(|m| Ok(Frame::data(grpc_frame(&m)))));
        Body::new(http_body_util::StreamBody::new(first.chain(body.frames())))
    } else {
        Body::new(http_body_util::Full::new(grpc_frame(&first.unwrap_or_default())))
    };
    let resp = match before(&mut deadline, grpc.oneshot(call)).await {
        None => return error_of(&deadline_exceeded()),
        Some(Ok(r)) => r,
        Some(Err(never)) => match never {},
    };
    // A call refused before any message answers with its status in the headers alone.
    if let Some(s) = tonic::Status::from_header_map(resp.headers()).filter(|s| s.code() != tonic::Code::Ok) {
        return match route.shape {
            Shape::Unary => error(s.code(), s.message()),
            _ => respond(http_status(s.code()), "application/json", stream_error_line(&s)),
        };
    }
    let messages = Messages::new(resp.into_body(), deadline);
    match route.shape {
        Shape::Unary => unary_answer(route, messages).await,
        _ => stream_answer(route, messages).await,
    }
}

async fn unary_answer(route: &'static Route, mut messages: Messages) -> http::Response<Body> {
    let msg = match messages.next().await {
        Next::Message(m) => m,
        Next::End(Err(s)) => return error(s.code(), s.message()),
        Next::End(Ok(())) => return error(tonic::Code::Internal, "no response message"),
        Next::Expired => return error_of(&deadline_exceeded()),
    };
    match messages.next().await {
        Next::End(Err(s)) => return error(s.code(), s.message()),
        Next::Expired => return error_of(&deadline_exceeded()),
        _ => {}
    }
    match pbjson::to_json(route.response, &msg) {
        Ok(text) => {
            let mut r = respond(200, "application/json", text);
            // grpc-gateway passes the gRPC response's metadata on as headers; etcd's answers
            // carry this one.
            r.headers_mut().insert("grpc-metadata-content-type", http::HeaderValue::from_static("application/grpc"));
            r
        }
        Err(e) => error(tonic::Code::Internal, &e),
    }
}

fn result_line(route: &Route, msg: &[u8]) -> Bytes {
    let text = pbjson::to_json(route.response, msg).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("{{\"result\":{text}}}\n"))
}

/// Writes a stream's messages as lines; a status before the first message sets the HTTP status.
async fn stream_answer(route: &'static Route, mut messages: Messages) -> http::Response<Body> {
    let first = match messages.next().await {
        Next::Message(m) => result_line(route, &m),
        Next::End(Ok(())) => return respond(200, "application/json", Bytes::new()),
        // A deadline passed before the stream's first message is an error of the call itself.
        Next::Expired => return error_of(&deadline_exceeded()),
        Next::End(Err(s)) => return respond(http_status(s.code()), "application/json", stream_error_line(&s)),
    };
    let rest = futures::stream::unfold(Some(messages), move |state| async move {
        let mut messages = state?;
        match messages.next().await {
            Next::Message(m) => Some((result_line(route, &m), Some(messages))),
            Next::End(Ok(())) => None,
            Next::End(Err(s)) => Some((stream_error_line(&s), None)),
            Next::Expired => Some((stream_error_line(&deadline_exceeded()), None)),
        }
    });
    let lines = futures::stream::iter([first]).chain(rest).map(|b| Ok::<_, Infallible>(Frame::data(b)));
    let mut resp = http::Response::new(Body::new(http_body_util::StreamBody::new(lines)));
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp.headers_mut().insert("grpc-metadata-content-type", http::HeaderValue::from_static("application/grpc"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_names_messages_the_descriptors_know() {
        for r in &ROUTES {
            assert!(pbjson::encode_json(r.request, b"null").is_ok(), "{}", r.request);
            assert!(pbjson::to_json(r.response, &[]).is_ok(), "{}", r.response);
        }
    }

    #[test]
    fn grpc_timeouts_read_as_grpc_gateway_reads_them() {
        assert_eq!(grpc_timeout("5S"), Ok(Some(Duration::from_secs(5))));
        assert_eq!(grpc_timeout(" +250m"), Ok(Some(Duration::from_millis(250))));
        assert_eq!(grpc_timeout("0n"), Ok(None), "zero is no deadline");
        assert_eq!(grpc_timeout("-5S"), Ok(Some(Duration::ZERO)), "negative has passed");
        for bad in ["", "1", "5s", "1.5S", "5x", "99999999999999999999S", "S"] {
            assert_eq!(grpc_timeout(bad), Err(()), "{bad}");
        }
    }

    #[test]
    fn stream_errors_read_as_grpc_gateway_writes_them() {
        let line = stream_error_line(&tonic::Status::permission_denied("etcdserver: permission denied"));
        assert_eq!(
            line,
            "{\"error\":{\"grpc_code\":7,\"http_code\":403,\"message\":\"etcdserver: permission denied\",\"http_status\":\"Forbidden\"}}"
        );
    }
}
