//! An extension API server for the aggregation tests, run in the test's process on a free
//! loopback port: HTTPS with a serving certificate for `<service>.<namespace>.svc` from a CA
//! of its own (the APIService's `caBundle`), requiring a client certificate that chains to
//! the front-proxy CA it is given, as a real extension server configured with
//! `--requestheader-client-ca-file` does. It serves one group version,
//! `wardle.example.com/v1alpha1` with namespaced `flunders`, and answers each request with the
//! identity headers it received, so tests see what the aggregator forwarded. Every request is
//! also recorded with the connection it came on, and it publishes OpenAPI v3 and v2 documents
//! of Flunder. A flunder named `hang` never gets an answer (a server that stalls). An upgrade
//! request to a flunder's `exec` is answered 101 (with the `X-Remote-User` it got in
//! `X-Seen-User`), then every byte is echoed back, as an exec stream would carry them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};

/// The served group and version.
pub(crate) const GROUP: &str = "wardle.example.com";
pub(crate) const VERSION: &str = "v1alpha1";

/// One request as the server received it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Bytes,
    /// The client's end of the connection it came on (tells connections apart).
    pub(crate) peer: SocketAddr,
}

/// A running extension server; stopped when dropped.
pub(crate) struct ExtensionServer {
    pub(crate) addr: SocketAddr,
    /// Its CA (PEM), for the APIService's `caBundle`.
    pub(crate) ca_pem: String,
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ExtensionServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ExtensionServer {
    /// Starts the server for Service `service` in `namespace`, trusting client certificates
    /// of `front_proxy_ca_pem`.
    pub(crate) async fn start(service: &str, namespace: &str, front_proxy_ca_pem: &str) -> ExtensionServer {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.distinguished_name.push(rcgen::DnType::CommonName, "wardle-ca");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca, &ca_key);
        let key = rcgen::KeyPair::generate().expect("key");
        let serving = rcgen::CertificateParams::new(vec![format!("{service}.{namespace}.svc")]).expect("params");
        let cert = serving.signed_by(&key, &issuer).expect("serving certificate");

        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(front_proxy_ca_pem.as_bytes()) {
            roots.add(c.expect("front-proxy CA PEM")).expect("front-proxy CA");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .expect("client verifier");
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("key"),
            )
            .expect("server config");
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let recorded = seen.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, peer)) = listener.accept().await else { continue };
                let (acceptor, recorded) = (acceptor.clone(), recorded.clone());
                connections.spawn(async move {
                    // A client without the front-proxy certificate fails here.
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |req| answer(req, peer, recorded.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        ExtensionServer { addr, ca_pem: ca_cert.pem(), seen, task }
    }

    /// The requests received so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

fn json_response(code: u16, value: &Value) -> http::Response<Body> {
    http::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(value.to_string())).boxed())
        .expect("response")
}

fn identity(headers: &http::HeaderMap) -> Value {
    let all = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(String::from).collect()
    };
    let extra: serde_json::Map<String, Value> = headers
        .keys()
        .filter_map(|k| k.as_str().strip_prefix("x-remote-extra-").map(|e| (e.to_string(), json!(all(k.as_str())))))
        .collect();
    json!({"user": all("x-remote-user"), "groups": all("x-remote-group"), "uid": all("x-remote-uid"),
           "extra": extra, "authorization": all("authorization"), "impersonate": all("impersonate-user")})
}

fn flunder(namespace: &str, name: &str, headers: &http::HeaderMap) -> Value {
    json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Flunder",
           "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
           "spec": identity(headers)})
}

/// The OpenAPI v3 document of the group version (what `kubectl explain` reads).
fn openapi() -> Value {
    let get = json!({"get": {
        "x-kubernetes-action": "get",
        "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": "Flunder"},
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema":
            {"$ref": "#/components/schemas/com.example.wardle.v1alpha1.Flunder"}}}}},
    }});
    let path = format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/flunders/{{name}}");
    json!({"openapi": "3.0.0", "info": {"title": "Wardle", "version": VERSION}, "paths": {path: get},
    "components": {"schemas": {"com.example.wardle.v1alpha1.Flunder": {
        "type": "object",
        "description": "A Flunder echoes the identity its server received.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "description": "What the server saw of the caller.",
                     "properties": {"user": {"type": "array", "items": {"type": "string"},
                                             "description": "The X-Remote-User values received."}}},
        },
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": "Flunder"}],
    }}}})
}

/// Once the connection is handed over after a 101, sends back every byte it reads.
async fn echo(on_upgrade: hyper::upgrade::OnUpgrade) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(upgraded) = on_upgrade.await else { return };
    let mut io = hyper_util::rt::TokioIo::new(upgraded);
    let mut buf = [0u8; 4096];
    loop {
        match io.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if io.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The Swagger 2.0 document (what `/openapi/v2` merges): a Flunder path, a `Status` that
/// differs from the built-in one (renamed when merged), and a path outside `/apis/` with a
/// definition only it uses (both left out when merged).
fn openapi_v2() -> Value {
    let path = format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/flunders/{{name}}");
    json!({"swagger": "2.0", "info": {"title": "Wardle", "version": VERSION},
    "paths": {
        path: {"get": {
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": "Flunder"},
            "responses": {
                "200": {"description": "OK", "schema": {"$ref": "#/definitions/com.example.wardle.v1alpha1.Flunder"}},
                "404": {"description": "Gone", "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}},
            }}},
        "/wardle-health": {"get": {"responses": {"200": {"description": "OK",
            "schema": {"$ref": "#/definitions/com.example.wardle.Health"}}}}},
    },
    "definitions": {
        "com.example.wardle.v1alpha1.Flunder": {
            "type": "object",
            "description": "A Flunder echoes the identity its server received.",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "spec": {"type": "object", "description": "What the server saw of the caller (v2)."},
            },
            "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": "Flunder"}],
        },
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status": {"type": "object", "description": "Wardle's own Status."},
        "com.example.wardle.Health": {"type": "object"},
    }})
}

async fn answer(
    req: http::Request<hyper::body::Incoming>,
    peer: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<http::Response<Body>, std::convert::Infallible> {
    let (mut parts, body) = req.into_parts();
    let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    seen.lock().expect("lock").push(Seen {
        method: parts.method.to_string(),
        path: path.clone(),
        headers: parts.headers.clone(),
        body: body.clone(),
        peer,
    });
    let base = format!("/apis/{GROUP}/{VERSION}");
    let segments: Vec<&str> = path.strip_prefix(&base).unwrap_or("?").split('/').filter(|s| !s.is_empty()).collect();
    let h = &parts.headers;
    Ok(match (parts.method.as_str(), segments.as_slice()) {
        ("GET", []) if path.starts_with(&base) => json_response(
            200,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{VERSION}"),
                    "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": true,
                                   "kind": "Flunder", "verbs": ["get", "list", "watch", "create"],
                                   "shortNames": ["fl"]}]}),
        ),
        ("GET", _) if path == format!("/openapi/v3/apis/{GROUP}/{VERSION}") => json_response(200, &openapi()),
        ("GET", _) if path == "/openapi/v2" => json_response(200, &openapi_v2()),
        ("GET", ["namespaces", ns, "flunders"]) if query.contains("watch=") => {
            // One event now, then the stream stays open as a real watch does.
            let event = format!("{}\n", json!({"type": "ADDED", "object": flunder(ns, "watched", h)}));
            let stream = futures::stream::once(async move { Ok(Frame::data(Bytes::from(event))) })
                .chain(futures::stream::pending());
            http::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(BodyExt::boxed(StreamBody::new(stream)))
                .expect("response")
        }
        ("GET", ["namespaces", ns, "flunders"]) => json_response(
            200,
            &json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "FlunderList",
                    "metadata": {"resourceVersion": "1"}, "items": [flunder(ns, "echo", h)]}),
        ),
        (_, ["namespaces", _, "flunders", _, "exec"]) if h.contains_key("upgrade") => {
            let (Some(on_upgrade), Some(protocol)) = (on_upgrade, h.get("upgrade").cloned()) else {
                return Ok(json_response(400, &json!({"message": "not an upgrade"})));
            };
            tokio::spawn(echo(on_upgrade));
            let user = h.get("x-remote-user").cloned().unwrap_or(http::HeaderValue::from_static(""));
            http::Response::builder()
                .status(101)
                .header("connection", "Upgrade")
                .header("upgrade", protocol)
                .header("x-seen-user", user)
                .body(Full::new(Bytes::new()).boxed())
                .expect("response")
        }
        ("GET", ["namespaces", _, "flunders", "hang"]) => {
            futures::future::pending::<()>().await;
            json_response(500, &json!({}))
        }
        ("GET", ["namespaces", ns, "flunders", name]) => json_response(200, &flunder(ns, name, h)),
        ("POST", ["namespaces", ns, "flunders"]) => {
            let mut created: Value = serde_json::from_slice(&body).unwrap_or_default();
            created["metadata"]["namespace"] = json!(ns);
            created["spec"] = identity(h);
            created["status"] = json!({"receivedBytes": body.len()});
            json_response(201, &created)
        }
        _ => json_response(
            404,
            &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
        ),
    })
}
