//! [`HttpLayer`]: the plain HTTP endpoints etcd serves on its client port beside gRPC
//! (`/health`, `/livez`, `/readyz`, `/version`, `/metrics`, and on the client port the JSON
//! gateway under `/v3/`, see [`gateway`](super::gateway)).
//! A request is gRPC when its content type says so; every other request is answered here, over
//! HTTP/1.1 or HTTP/2, before the gRPC services see it.

use std::convert::Infallible;
use std::task::{Context, Poll};

use ballast_proto::etcdserverpb::{
    alarm_request::AlarmAction, kv_server::Kv, maintenance_server::Maintenance, AlarmRequest, AlarmType, RangeRequest,
};
use bytes::Bytes;
use tonic::body::Body;
use tower::{Layer, Service, ServiceExt};

use super::http_response::{is_grpc, plain_error, respond};
use super::unary::BoxFuture;
use super::{Api, ETCD_COMPAT_VERSION};

/// The cluster version `/version` reports: the minor release every member speaks.
const CLUSTER_VERSION: &str = "3.5.0";

/// Answers non-gRPC requests on the client port; the outermost layer.
#[derive(Clone, Debug)]
pub struct HttpLayer {
    api: Api,
}

impl HttpLayer {
    /// Serves `api`'s HTTP endpoints.
    pub fn new(api: Api) -> Self {
        Self { api }
    }
}

impl<S> Layer<S> for HttpLayer {
    type Service = Http<S>;

    fn layer(&self, inner: S) -> Http<S> {
        Http { inner, api: self.api.clone() }
    }
}

/// The service [`HttpLayer`] builds.
#[derive(Clone, Debug)]
pub struct Http<S> {
    inner: S,
    api: Api,
}

fn not_found() -> http::Response<Body> {
    plain_error(404, "404 page not found\n")
}

impl<S> Service<http::Request<Body>> for Http<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The inner service is made ready when a request is handed to it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> BoxFuture {
        if is_grpc(&req) {
            return Box::pin(self.inner.clone().oneshot(req));
        }
        let api = self.api.clone();
        let cors = cors_origin(&api.cors, req.headers());
        let grpc = self.inner.clone();
        Box::pin(async move {
            // As etcd: a preflight is answered 200, empty, on any path.
            let mut resp = if req.method() == http::Method::OPTIONS {
                http::Response::new(Body::empty())
            } else if let Some(path) = super::gateway::gateway_path(req.uri().path()).map(str::to_owned) {
                super::gateway::serve(api, grpc, &path, req).await
            } else {
                serve(api, req).await
            };
            if let Some(origin) = cors {
                let h = resp.headers_mut();
                h.insert("access-control-allow-origin", origin);
                h.insert(
                    "access-control-allow-methods",
                    http::HeaderValue::from_static("POST, GET, OPTIONS, PUT, DELETE"),
                );
                h.insert(
                    "access-control-allow-headers",
                    http::HeaderValue::from_static("accept, content-type, authorization"),
                );
            }
            Ok(resp)
        })
    }
}

/// The `Access-Control-Allow-Origin` etcd sends for `--cors` `allowed`: `*` when every origin
/// is, else the request's `Origin` when it is listed, else none.
fn cors_origin(allowed: &[String], headers: &http::HeaderMap) -> Option<http::HeaderValue> {
    if allowed.is_empty() || allowed.iter().any(|o| o == "*") {
        return Some(http::HeaderValue::from_static("*"));
    }
    let origin = headers.get(http::header::ORIGIN)?;
    allowed.iter().any(|o| o.as_bytes() == origin.as_bytes()).then(|| origin.clone())
}

/// Answers one HTTP request.
async fn serve(api: Api, req: http::Request<Body>) -> http::Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    match (req.method() == http::Method::GET || req.method() == http::Method::HEAD, path.as_str()) {
        (true, "/health") => health(&api, &query).await,
        (true, "/livez") => match api.stopped_shard() {
            None => respond(200, "text/plain; charset=utf-8", "ok"),
            Some(reason) => respond(503, "text/plain; charset=utf-8", format!("{reason}\n")),
        },
        (true, "/readyz") => match check(&api, &query).await {
            Ok(_) => respond(200, "text/plain; charset=utf-8", "ok"),
            Err(reason) => respond(503, "text/plain; charset=utf-8", format!("{reason}\n")),
        },
        (true, "/version") => respond(
            200,
            "application/json",
            format!("{{\"etcdserver\":\"{ETCD_COMPAT_VERSION}\",\"etcdcluster\":\"{CLUSTER_VERSION}\"}}"),
        ),
        // etcd's scrape handler answers any method.
        (_, "/metrics") => respond(200, "text/plain; version=0.0.4; charset=utf-8", super::metrics::render(&api)),
        (false, "/health" | "/livez" | "/readyz" | "/version") => {
            let mut resp = plain_error(405, "Method Not Allowed\n");
            resp.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("GET"));
            resp
        }
        _ => not_found(),
    }
}

/// How a health check passed.
enum Healthy {
    /// The read of the key `health` was answered.
    Read,
    /// The read was refused for want of a user (auth is on): etcd answers without a reason
    /// field then.
    NoUser,
}

/// etcd's `/health`: `{"health":"true","reason":""}` (`{"health":"true"}` with auth on), or 503
/// with `"false"` and the reason.
async fn health(api: &Api, query: &str) -> http::Response<Body> {
    match check(api, query).await {
        Ok(Healthy::Read) => respond(200, "application/json", "{\"health\":\"true\",\"reason\":\"\"}"),
        Ok(Healthy::NoUser) => respond(200, "application/json", "{\"health\":\"true\"}"),
        Err(reason) => {
            respond(503, "application/json", serde_json::json!({"health": "false", "reason": reason}).to_string())
        }
    }
}

/// What etcd's health check checks: active alarms (but those `?exclude=` names), a leader
/// (unless `?serializable=true`), and a read of the key `health` (serializable when asked).
async fn check(api: &Api, query: &str) -> Result<Healthy, String> {
    if let Some(reason) = api.stopped_shard() {
        return Err(reason);
    }
    let mut exclude = Vec::new();
    let mut serializable = false;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("exclude", v)) => exclude.push(v.to_string()),
            Some(("serializable", v)) => serializable = v == "true",
            _ => {}
        }
    }
    let maintenance = super::maintenance::MaintenanceService::new(api.clone());
    let alarms = maintenance
        .alarm(tonic::Request::new(AlarmRequest {
            action: AlarmAction::Get as i32,
            member_id: 0,
            alarm: AlarmType::None as i32,
        }))
        .await
        .map_err(|s| format!("ALARM ERROR {}", s.message()))?
        .into_inner();
    for a in alarms.alarms {
        let name = AlarmType::try_from(a.alarm).map_or("UNKNOWN", |t| t.as_str_name());
        if !exclude.iter().any(|e| e == name) {
            return Err(format!("ALARM {name}"));
        }
    }
    if !serializable && api.first().leader() == 0 {
        return Err("RAFT NO LEADER".into());
    }
    let kv = super::kv::KvService::new(api.clone());
    let read = RangeRequest { key: Bytes::from_static(b"health"), serializable, ..Default::default() };
    match kv.range(tonic::Request::new(read)).await {
        // The probe carries no user: with auth on, etcd takes this refusal as proof that the
        // read path works.
        Err(s) if s.message() == tonic::Status::from(crate::error::EngineError::UserEmpty).message() => {
            Ok(Healthy::NoUser)
        }
        Err(s) => Err(format!("QGET ERROR {}", s.message())),
        Ok(_) => Ok(Healthy::Read),
    }
}

/// Serves only the HTTP endpoints on `listener` (etcd's `--listen-metrics-urls`), HTTP/1.1 and
/// HTTP/2 alike, until `stop` fires.
pub async fn serve_plain(
    api: Api,
    listener: tokio::net::TcpListener,
    mut stop: tokio::sync::broadcast::Receiver<()>,
) -> Result<(), tonic::transport::Error> {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = stop.recv() => return Ok(()),
        };
        let Ok((tcp, _)) = conn else { continue };
        let api = api.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let api = api.clone();
                async move { Ok::<_, Infallible>(serve(api, req.map(Body::new)).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(tcp), service).await;
        });
    }
}
