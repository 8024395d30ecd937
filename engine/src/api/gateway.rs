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
//! read and anything after it is not, and an empty body is the empty message.

use std::convert::Infallible;

use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use http_body::Frame;
use http_body_util::BodyExt;
use tonic::body::Body;
use tower::{Service, ServiceExt};

use super::http::respond;
use super::{pbjson, Api};

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

/// Reads a unary call's body (up to the request limit) and returns its first JSON value; an
/// empty body is `null`, the empty message.
async fn read_json(limit: usize, body: Body) -> Result<serde_json::Value, http::Response<Body>> {
    let bytes = match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return Err(error(tonic::Code::InvalidArgument, "etcdserver: request is too large")),
    };
    match serde_json::Deserializer::from_slice(&bytes).into_iter::<serde_json::Value>().next() {
        None => Ok(serde_json::Value::Null),
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(error(tonic::Code::InvalidArgument, &e.to_string())),
    }
}

/// The request body of a bidirectional stream as gRPC frames: each JSON value of `body` as it
/// completes, encoded as `type_name`. The stream ends (the call half-closes) at the end of the
/// body, at a value that is not JSON or not the message, or when one value outgrows `limit`.
fn request_frames(
    body: Body,
    limit: usize,
    type_name: &'static str,
) -> impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send {
    struct State {
        body: Body,
        buf: BytesMut,
        ended: bool,
    }
    let start = State { body, buf: BytesMut::new(), ended: false };
    futures::stream::unfold(start, move |mut st| async move {
        loop {
            let mut values = serde_json::Deserializer::from_slice(&st.buf).into_iter::<serde_json::Value>();
            match values.next() {
                Some(Ok(v)) => {
                    let used = values.byte_offset();
                    st.buf.advance(used);
                    let msg = pbjson::encode_object(type_name, &v).ok()?;
                    return Some((Ok(Frame::data(grpc_frame(&msg))), st));
                }
                Some(Err(e)) if !e.is_eof() => return None,
                _ if st.ended || st.buf.len() > limit => return None,
                _ => {}
            }
            match st.body.frame().await {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        st.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(_)) | None => st.ended = true,
            }
        }
    })
}

/// A gRPC response body read message by message.
struct Messages {
    body: Body,
    buf: BytesMut,
    trailers: Option<http::HeaderMap>,
    done: bool,
}

/// What a gRPC response body holds next.
enum Next {
    Message(Bytes),
    /// The end of the call: its status from the trailers.
    End(Result<(), tonic::Status>),
}

impl Messages {
    fn new(body: Body) -> Self {
        Self { body, buf: BytesMut::new(), trailers: None, done: false }
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
            match self.body.frame().await {
                Some(Ok(f)) => match f.into_data() {
                    Ok(data) => self.buf.extend_from_slice(&data),
                    Err(f) => self.trailers = f.into_trailers().ok(),
                },
                Some(Err(s)) => return Next::End(Err(s)),
                None => self.done = true,
            }
        }
    }
}

/// Answers `POST /v3/<path>` by calling `grpc`, the client port's gRPC services.
pub(crate) async fn serve<S>(api: Api, grpc: S, path: &str, req: http::Request<Body>) -> http::Response<Body>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Send + 'static,
    S::Future: Send,
{
    let Some(route) = ROUTES.iter().find(|r| r.path == path) else {
        return respond(404, "text/plain; charset=utf-8", "Not Found\n");
    };
    if req.method() != http::Method::POST {
        return respond(405, "text/plain; charset=utf-8", "Method Not Allowed\n");
    }
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
    *call.body_mut() = if route.shape == Shape::Bidi {
        Body::new(http_body_util::StreamBody::new(request_frames(body, api.max_request_bytes, route.request)))
    } else {
        let json = match read_json(api.max_request_bytes, body).await {
            Ok(j) => j,
            Err(resp) => return resp,
        };
        match pbjson::encode_object(route.request, &json) {
            Ok(msg) => Body::new(http_body_util::Full::new(grpc_frame(&msg))),
            Err(e) => return error(tonic::Code::InvalidArgument, &e),
        }
    };
    let resp = match grpc.oneshot(call).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    // A call refused before any message answers with its status in the headers alone.
    if let Some(s) = tonic::Status::from_header_map(resp.headers()).filter(|s| s.code() != tonic::Code::Ok) {
        return match route.shape {
            Shape::Unary => error(s.code(), s.message()),
            _ => respond(http_status(s.code()), "application/json", stream_error_line(&s)),
        };
    }
    let messages = Messages::new(resp.into_body());
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
    };
    if let Next::End(Err(s)) = messages.next().await {
        return error(s.code(), s.message());
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
        Next::End(Err(s)) => return respond(http_status(s.code()), "application/json", stream_error_line(&s)),
    };
    let rest = futures::stream::unfold(Some(messages), move |state| async move {
        let mut messages = state?;
        match messages.next().await {
            Next::Message(m) => Some((result_line(route, &m), Some(messages))),
            Next::End(Ok(())) => None,
            Next::End(Err(s)) => Some((stream_error_line(&s), None)),
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
            assert!(pbjson::encode_object(r.request, &serde_json::Value::Null).is_ok(), "{}", r.request);
            assert!(pbjson::to_json(r.response, &[]).is_ok(), "{}", r.response);
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
