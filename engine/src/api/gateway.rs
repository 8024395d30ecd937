//! etcd's gRPC-JSON gateway on the client port: `POST /v3/<service>/<method>` with the request
//! message as JSON (see [`pbjson`](super::pbjson) for the mapping), answered with the response
//! message as JSON, or with etcd's gateway error `{"error":..,"message":..,"code":..}` and the
//! HTTP status grpc-gateway gives the gRPC code. `/v3/watch` streams one JSON line
//! `{"result":<WatchResponse>}` per response. Every call goes through the same service code
//! as over gRPC, with the token of the `Authorization` header (or `Grpc-Metadata-Token`) as
//! its `authorization` (`token`) metadata, as grpc-gateway passes them; a client certificate
//! never names the user of a gateway request, as in etcd.

use std::future::Future;

use ballast_proto::etcdserverpb::{
    auth_server::Auth, kv_server::Kv, lease_server::Lease, maintenance_server::Maintenance,
    watch_request::RequestUnion, WatchRequest,
};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http_body_util::BodyExt;
use prost::Message;
use tonic::body::Body;

use super::http::respond;
use super::watch::send_reliably;
use super::{auth::AuthService, kv::KvService, lease::LeaseService, maintenance::MaintenanceService, pbjson, Api};
use crate::shard::ShardMsg;

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

/// etcd's gateway error body.
fn error(code: tonic::Code, message: &str) -> http::Response<Body> {
    let text = serde_json::to_string(message).unwrap_or_else(|_| "\"\"".into());
    let body = format!("{{\"error\":{text},\"message\":{text},\"code\":{}}}", code as i32);
    respond(http_status(code), "application/json", body)
}

fn from_status(s: &tonic::Status) -> http::Response<Body> {
    error(s.code(), s.message())
}

/// Reads the body (up to the request limit) and parses it as JSON; an empty body is `{}`.
async fn read_json(api: &Api, body: Body) -> Result<serde_json::Value, http::Response<Body>> {
    let limited = http_body_util::Limited::new(body, api.max_request_bytes);
    let bytes = match limited.collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return Err(error(tonic::Code::InvalidArgument, "etcdserver: request is too large")),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_slice(&bytes).map_err(|e| error(tonic::Code::InvalidArgument, &e.to_string()))
}

/// Decodes `json` as `Req` (named `req_type`), runs `handler` and writes its answer as
/// `resp_type`.
async fn unary<Req, Resp, F, Fut>(
    json: &serde_json::Value,
    metadata: &tonic::metadata::MetadataMap,
    req_type: &str,
    resp_type: &str,
    handler: F,
) -> http::Response<Body>
where
    Req: Message + Default,
    Resp: Message,
    F: FnOnce(tonic::Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    let req = match pbjson::encode_object(req_type, json).map(|b| Req::decode(b.as_slice())) {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return error(tonic::Code::InvalidArgument, &e.to_string()),
        Err(e) => return error(tonic::Code::InvalidArgument, &e),
    };
    let req = tonic::Request::from_parts(metadata.clone(), http::Extensions::new(), req);
    match handler(req).await {
        Ok(resp) => match pbjson::to_json(resp_type, &resp.into_inner().encode_to_vec()) {
            Ok(text) => {
                let mut r = respond(200, "application/json", text);
                // grpc-gateway passes the gRPC response's metadata on as headers; etcd's answers
                // carry this one.
                r.headers_mut()
                    .insert("grpc-metadata-content-type", http::HeaderValue::from_static("application/grpc"));
                r
            }
            Err(e) => error(tonic::Code::Internal, &e),
        },
        Err(s) => from_status(&s),
    }
}

/// Answers `POST /v3/<path>`.
pub(crate) async fn serve(api: Api, path: &str, req: http::Request<Body>) -> http::Response<Body> {
    const KNOWN: [&str; 28] = [
        "kv/range",
        "kv/put",
        "kv/deleterange",
        "kv/txn",
        "kv/compaction",
        "lease/grant",
        "lease/revoke",
        "lease/timetolive",
        "lease/leases",
        "maintenance/status",
        "watch",
        "auth/enable",
        "auth/disable",
        "auth/status",
        "auth/authenticate",
        "auth/user/add",
        "auth/user/get",
        "auth/user/list",
        "auth/user/delete",
        "auth/user/changepw",
        "auth/user/grant",
        "auth/user/revoke",
        "auth/role/add",
        "auth/role/get",
        "auth/role/list",
        "auth/role/delete",
        "auth/role/grant",
        "auth/role/revoke",
    ];
    if !KNOWN.contains(&path) {
        return respond(404, "text/plain; charset=utf-8", "Not Found\n");
    }
    if req.method() != http::Method::POST {
        return respond(405, "text/plain; charset=utf-8", "Method Not Allowed\n");
    }
    let mut metadata = tonic::metadata::MetadataMap::new();
    for (header, key) in [("authorization", "authorization"), ("grpc-metadata-token", "token")] {
        if let Some(v) = req.headers().get(header).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok()) {
            metadata.insert(key, v);
        }
    }
    let json = match read_json(&api, req.into_body()).await {
        Ok(j) => j,
        Err(resp) => return resp,
    };
    let kv = KvService::new(api.clone());
    let lease = LeaseService::new(api.clone());
    let m = MaintenanceService::new(api.clone());
    macro_rules! call {
        ($req:literal, $resp:literal, $f:expr) => {
            unary(&json, &metadata, concat!(".etcdserverpb.", $req), concat!(".etcdserverpb.", $resp), $f).await
        };
    }
    match path {
        "kv/range" => call!("RangeRequest", "RangeResponse", |r| kv.range(r)),
        "kv/put" => call!("PutRequest", "PutResponse", |r| kv.put(r)),
        "kv/deleterange" => call!("DeleteRangeRequest", "DeleteRangeResponse", |r| kv.delete_range(r)),
        "kv/txn" => call!("TxnRequest", "TxnResponse", |r| kv.txn(r)),
        "kv/compaction" => call!("CompactionRequest", "CompactionResponse", |r| kv.compact(r)),
        "lease/grant" => call!("LeaseGrantRequest", "LeaseGrantResponse", |r| lease.lease_grant(r)),
        "lease/revoke" => call!("LeaseRevokeRequest", "LeaseRevokeResponse", |r| lease.lease_revoke(r)),
        "lease/timetolive" => {
            call!("LeaseTimeToLiveRequest", "LeaseTimeToLiveResponse", |r| lease.lease_time_to_live(r))
        }
        "lease/leases" => call!("LeaseLeasesRequest", "LeaseLeasesResponse", |r| lease.lease_leases(r)),
        "maintenance/status" => call!("StatusRequest", "StatusResponse", |r| m.status(r)),
        "watch" => watch(api, &json, &metadata).await,
        _ => auth_call(&AuthService::new(api), path, &json, &metadata).await,
    }
}

/// `/v3/auth/...`.
async fn auth_call(
    a: &AuthService,
    path: &str,
    json: &serde_json::Value,
    metadata: &tonic::metadata::MetadataMap,
) -> http::Response<Body> {
    macro_rules! call {
        ($req:literal, $resp:literal, $f:expr) => {
            unary(json, metadata, concat!(".etcdserverpb.", $req), concat!(".etcdserverpb.", $resp), $f).await
        };
    }
    match path {
        "auth/enable" => call!("AuthEnableRequest", "AuthEnableResponse", |r| a.auth_enable(r)),
        "auth/disable" => call!("AuthDisableRequest", "AuthDisableResponse", |r| a.auth_disable(r)),
        "auth/status" => call!("AuthStatusRequest", "AuthStatusResponse", |r| a.auth_status(r)),
        "auth/authenticate" => call!("AuthenticateRequest", "AuthenticateResponse", |r| a.authenticate(r)),
        "auth/user/add" => call!("AuthUserAddRequest", "AuthUserAddResponse", |r| a.user_add(r)),
        "auth/user/get" => call!("AuthUserGetRequest", "AuthUserGetResponse", |r| a.user_get(r)),
        "auth/user/list" => call!("AuthUserListRequest", "AuthUserListResponse", |r| a.user_list(r)),
        "auth/user/delete" => call!("AuthUserDeleteRequest", "AuthUserDeleteResponse", |r| a.user_delete(r)),
        "auth/user/changepw" => {
            call!("AuthUserChangePasswordRequest", "AuthUserChangePasswordResponse", |r| a.user_change_password(r))
        }
        "auth/user/grant" => call!("AuthUserGrantRoleRequest", "AuthUserGrantRoleResponse", |r| a.user_grant_role(r)),
        "auth/user/revoke" => {
            call!("AuthUserRevokeRoleRequest", "AuthUserRevokeRoleResponse", |r| a.user_revoke_role(r))
        }
        "auth/role/add" => call!("AuthRoleAddRequest", "AuthRoleAddResponse", |r| a.role_add(r)),
        "auth/role/get" => call!("AuthRoleGetRequest", "AuthRoleGetResponse", |r| a.role_get(r)),
        "auth/role/list" => call!("AuthRoleListRequest", "AuthRoleListResponse", |r| a.role_list(r)),
        "auth/role/delete" => call!("AuthRoleDeleteRequest", "AuthRoleDeleteResponse", |r| a.role_delete(r)),
        "auth/role/grant" => {
            call!("AuthRoleGrantPermissionRequest", "AuthRoleGrantPermissionResponse", |r| a.role_grant_permission(r))
        }
        _ => call!("AuthRoleRevokePermissionRequest", "AuthRoleRevokePermissionResponse", |r| a
            .role_revoke_permission(r)),
    }
}

/// `/v3/watch`: the body's one WatchRequest opens a watcher; every response of the stream is
/// written as a line `{"result":...}` until the client goes away.
async fn watch(api: Api, json: &serde_json::Value, metadata: &tonic::metadata::MetadataMap) -> http::Response<Body> {
    let req =
        match pbjson::encode_object(".etcdserverpb.WatchRequest", json).map(|b| WatchRequest::decode(b.as_slice())) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return error(tonic::Code::InvalidArgument, &e.to_string()),
            Err(e) => return error(tonic::Code::InvalidArgument, &e),
        };
    let Some(RequestUnion::CreateRequest(create)) = req.request_union else {
        return error(tonic::Code::InvalidArgument, "a watch over HTTP starts with a create_request");
    };
    if api.auth.enabled() {
        let creds = super::auth::Credentials::of(metadata, &http::Extensions::new(), false);
        if let Err(reason) = api.watch_permitted(&creds, &create).await {
            let refused = ballast_proto::etcdserverpb::WatchResponse {
                header: api.header(),
                watch_id: -1,
                created: true,
                canceled: true,
                cancel_reason: reason.to_string(),
                ..Default::default()
            };
            let text = pbjson::to_json(".etcdserverpb.WatchResponse", &refused.encode_to_vec()).unwrap_or_default();
            return respond(200, "application/json", format!("{{\"result\":{text}}}\n"));
        }
    }
    let shard = api.shard(api.map.shard_of(&create.key)).clone();
    let id = api.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (tx, rx, credits) = crate::watch::stream_channel(api.watch_stream_buffer);
    if !send_reliably(&shard, || ShardMsg::WatchOpen(id, tx.clone())).await
        || !credits.spend().await
        || !send_reliably(&shard, || ShardMsg::WatchCreate(id, create.clone())).await
    {
        return from_status(&tonic::Status::from(crate::EngineError::Stopped));
    }
    let closer = shard.clone();
    tokio::spawn(async move {
        // The watcher goes when the client does (its response body is dropped).
        tx.closed().await;
        send_reliably(&closer, || ShardMsg::WatchClose(id)).await;
    });
    let lines = rx.flat_map(|batch| {
        futures::stream::iter(batch.into_iter().map(|r| {
            let mut buf = BytesMut::with_capacity(r.encoded_len());
            r.encode(&mut buf);
            let text = pbjson::to_json(".etcdserverpb.WatchResponse", &buf).unwrap_or_else(|_| "{}".into());
            Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(format!("{{\"result\":{text}}}\n"))))
        }))
    });
    let mut resp = http::Response::new(Body::new(http_body_util::StreamBody::new(lines)));
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp
}
