//! Conversion webhooks of CustomResourceDefinitions: a definition with two versions whose
//! shapes differ (`spec.color` in v1, the storage version; `spec.paint` in v2) and strategy
//! `Webhook`, served with a conversion webhook the test runs in its own process over HTTPS
//! (a certificate of its own CA, the definition's `caBundle`). Objects written in either version
//! are stored in v1 and read, listed, watched and patched in the other; the webhook is named by
//! URL and by Service; a failing or unreachable webhook answers with kube's error. Writes are
//! defaulted and checked by the schema and rules of the version they were sent in.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};

use crate::harness::{both_backends, Backend, Cluster, Credentials, Options};

both_backends!(
    objects_are_converted_by_the_webhook,
    webhook_metadata_is_checked,
    writes_are_checked_in_their_own_version,
    a_list_is_converted_in_one_review_per_page,
    managers_keep_their_fields_in_their_own_version
);

/// A conversion webhook on a free loopback port: `/convert` renames `spec.color` (v1) to
/// `spec.paint` (v2) and back; `/fail` refuses every review; `/rename` and `/relabel` convert
/// but change the name or set an invalid label; `/extra` converts and adds fields neither
/// version's schema knows. Stopped when dropped.
struct ConversionWebhook {
    port: u16,
    ca_pem: String,
    /// The reviews received.
    reviews: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ConversionWebhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One object converted to `desired`.
fn convert(mut obj: Value, desired: &str) -> Value {
    let spec = obj["spec"].as_object_mut().cloned().unwrap_or_default();
    let mut spec = spec;
    let (from, to) = if desired.ends_with("/v2") { ("color", "paint") } else { ("paint", "color") };
    if let Some(v) = spec.remove(from) {
        spec.insert(to.into(), v);
    }
    obj["spec"] = Value::Object(spec);
    obj["apiVersion"] = desired.into();
    obj
}

fn review_answer(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    let result = if path == "/fail" {
        json!({"status": "Failure", "message": "widgets are not convertible today"})
    } else {
        json!({"status": "Success"})
    };
    let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
    let converted: Vec<Value> = request["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|_| path != "/fail")
        .map(|o| {
            let mut out = convert(o.clone(), desired);
            match path {
                "/rename" => out["metadata"]["name"] = json!("renamed"),
                "/relabel" => out["metadata"]["labels"] = json!({"bad key!": "x"}),
                "/extra" => {
                    out["spec"]["extra"] = json!("x");
                    out["bogus"] = json!(1);
                }
                _ => {}
            }
            out
        })
        .collect();
    json!({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
           "response": {"uid": request["uid"], "result": result, "convertedObjects": converted}})
}

impl ConversionWebhook {
    /// Starts the webhook with a certificate of its own CA, or (`self_signed`) with one
    /// self-signed CA certificate that is also the bundle, as `openssl req -x509` makes.
    async fn start(self_signed: bool) -> ConversionWebhook {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let names = vec!["127.0.0.1".to_string(), "paint.default.svc".to_string()];
        let mut ca =
            rcgen::CertificateParams::new(if self_signed { names.clone() } else { Vec::new() }).expect("params");
        ca.distinguished_name.push(rcgen::DnType::CommonName, "conversion-ca");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca, &ca_key);
        let key = rcgen::KeyPair::generate().expect("key");
        let (cert, key) = if self_signed {
            (ca_cert.clone(), ca_key)
        } else {
            (rcgen::CertificateParams::new(names).expect("params").signed_by(&key, &issuer).expect("cert"), key)
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("key"),
            )
            .expect("server config");
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let reviews: Arc<Mutex<Vec<Value>>> = Arc::default();
        let seen = reviews.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let path = req.uri().path().to_string();
                            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            seen.lock().expect("lock").push(review.clone());
                            let answer = review_answer(&path, &review);
                            Ok::<_, std::convert::Infallible>(
                                http::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(answer.to_string())))
                                    .expect("response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        ConversionWebhook { port, ca_pem: ca_cert.pem(), reviews, task }
    }

    fn reviews(&self) -> Vec<Value> {
        self.reviews.lock().expect("lock").clone()
    }
}

/// The Widget definition: v1 (storage, `spec.color`) and v2 (`spec.paint`), converted by
/// the webhook `client_config` names.
fn definition(client_config: &Value) -> Value {
    let version = |name: &str, field: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {field: {"type": "string"}}}}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [version("v1", "color", true), version("v2", "paint", false)],
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client_config,
                "conversionReviewVersions": ["v1", "v1beta1"]}}}})
}

async fn apply(c: &Cluster, name: &str, obj: &Value) {
    let path = c.dir.path().join(name);
    std::fs::write(&path, obj.to_string()).expect("write manifest");
    c.must_kubectl(&["apply", "-f", &path.to_string_lossy()]).await;
}

async fn get(c: &Cluster, version: &str, name: &str) -> crate::harness::RawResponse {
    c.request(
        Credentials::Admin,
        "GET",
        &format!("/apis/example.com/{version}/namespaces/default/widgets/{name}"),
        None,
        "",
    )
    .await
}

/// A cluster serving custom resources, a webhook, and the definition converted by its
/// `/convert` (not applied yet).
async fn cluster_and_webhook(backend: Backend) -> (Cluster, ConversionWebhook, Value) {
    let c = Cluster::start_with(Options { backend: Some(backend), crds: true, ..Options::default() }).await;
    let hook = ConversionWebhook::start(false).await;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem);
    let url = json!({"url": format!("https://127.0.0.1:{}/convert", hook.port), "caBundle": ca_bundle});
    let def = definition(&url);
    (c, hook, def)
}

async fn list(c: &Cluster, version: &str) -> crate::harness::RawResponse {
    c.request(Credentials::Admin, "GET", &format!("/apis/example.com/{version}/namespaces/default/widgets"), None, "")
        .await
}

/// Sends `body` with `method` to `path` under the widgets of `version` in `default`.
async fn send(c: &Cluster, method: &str, version: &str, path: &str, body: &Value) -> crate::harness::RawResponse {
    let path = format!("/apis/example.com/{version}/namespaces/default/widgets{path}");
    c.request(Credentials::Admin, method, &path, Some("application/json"), body.to_string()).await
}

async fn stored(c: &Cluster, name: &str) -> Value {
    let bytes = c.storage_get(&format!("/registry/example.com/widgets/default/{name}")).await.expect("stored");
    serde_json::from_slice(&bytes).expect("json")
}

async fn objects_are_converted_by_the_webhook(backend: Backend) {
    let c = Cluster::start_with(Options { backend: Some(backend), crds: true, ..Options::default() }).await;
    let hook = ConversionWebhook::start(false).await;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem);
    let by_url = |path: &str| json!({"url": format!("https://127.0.0.1:{}{path}", hook.port), "caBundle": ca_bundle});

    // The stanza is checked as kube checks it.
    let mut bare = definition(&by_url("/convert"));
    bare["spec"]["conversion"] = json!({"strategy": "Webhook"});
    let path = c.dir.path().join("bare.json");
    std::fs::write(&path, bare.to_string()).expect("write");
    let out = c.kubectl(&["create", "-f", &path.to_string_lossy()]).await;
    assert!(!out.ok);
    assert!(
        out.stderr
            .contains("spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook")
            && out.stderr.contains("spec.conversion.conversionReviewVersions: Required value"),
        "{}",
        out.stderr
    );

    apply(&c, "widgets.json", &definition(&by_url("/convert"))).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;

    // Written in v1, read in v2.
    apply(
        &c,
        "a.json",
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"},
        "spec": {"color": "red"}}),
    )
    .await;
    let a = get(&c, "v2", "a").await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let a = a.json();
    assert_eq!((a["apiVersion"].as_str(), &a["spec"]), (Some("example.com/v2"), &json!({"paint": "red"})));
    let review = hook.reviews().last().cloned().expect("a review");
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["request"]["desiredAPIVersion"], "example.com/v2");

    // Written in v2: stored in v1, answered in v2, read in v1.
    let b =
        json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "b"}, "spec": {"paint": "blue"}});
    let created = c
        .request(
            Credentials::Admin,
            "POST",
            "/apis/example.com/v2/namespaces/default/widgets",
            Some("application/json"),
            b.to_string(),
        )
        .await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    assert_eq!(created.json()["spec"], json!({"paint": "blue"}));
    let raw = stored(&c, "b").await;
    assert_eq!((raw["apiVersion"].as_str(), &raw["spec"]), (Some("example.com/v1"), &json!({"color": "blue"})));
    assert_eq!(get(&c, "v1", "b").await.json()["spec"], json!({"color": "blue"}));

    // Listed and patched in v2 with kubectl.
    let list: Value =
        serde_json::from_str(&c.must_kubectl(&["get", "widgets.v2.example.com", "-o", "json"]).await).expect("json");
    let paints: Vec<&Value> = list["items"].as_array().expect("items").iter().map(|i| &i["spec"]["paint"]).collect();
    assert_eq!(paints, [&json!("red"), &json!("blue")]);
    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    c.must_kubectl(&["patch", "widgets.v2.example.com", "a", "--type=merge", "-p", r#"{"spec":{"paint":"green"}}"#])
        .await;
    assert_eq!(stored(&c, "a").await["spec"], json!({"color": "green"}));

    // Watched in v2: the change arrives converted.
    let watch = c
        .request(
            Credentials::Admin,
            "GET",
            &format!(
                "/apis/example.com/v2/namespaces/default/widgets?watch=true&resourceVersion={rv}&timeoutSeconds=1"
            ),
            None,
            "",
        )
        .await;
    let text = String::from_utf8_lossy(&watch.body);
    let events: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("{text}"))).collect();
    let a = events.iter().find(|e| e["object"]["metadata"]["name"] == "a").unwrap_or_else(|| panic!("{text}"));
    assert_eq!(a["object"]["apiVersion"], "example.com/v2");
    assert_eq!(a["object"]["spec"], json!({"paint": "green"}));

    // Named by Service: an ExternalName Service to this machine, the certificate's DNS name.
    apply(
        &c,
        "svc.json",
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "paint", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": hook.port}]}}),
    )
    .await;
    let by_service = json!({"service": {"namespace": "default", "name": "paint", "path": "/convert", "port": hook.port},
        "caBundle": ca_bundle});
    apply(&c, "widgets.json", &definition(&by_service)).await;
    let before = hook.reviews().len();
    let mut via_service = None;
    // The definition change reaches the served row within the controller's watch.
    for _ in 0..50 {
        let r = get(&c, "v2", "b").await;
        if r.status == 200 && hook.reviews().len() > before {
            via_service = Some(r.json());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(via_service.expect("converted through the Service")["spec"], json!({"paint": "blue"}));
    c.must_kubectl(&["delete", "service", "paint"]).await;
    let gone = get(&c, "v2", "b").await;
    assert_eq!(gone.status, 500);
    assert_eq!(
        gone.json()["message"],
        format!(
            "conversion webhook for example.com/v1, Kind=Widget failed: Post \"https://paint.default.svc:{}/convert?timeout=30s\": service \"paint\" not found",
            hook.port
        )
    );

    // A self-signed webhook certificate that is its own bundle is trusted, as Go trusts it.
    let self_signed = ConversionWebhook::start(true).await;
    let bundle = base64::engine::general_purpose::STANDARD.encode(&self_signed.ca_pem);
    let url = json!({"url": format!("https://127.0.0.1:{}/convert", self_signed.port), "caBundle": bundle});
    apply(&c, "widgets.json", &definition(&url)).await;
    let mut converted = false;
    for _ in 0..50 {
        let r = get(&c, "v2", "a").await;
        if r.status == 200 && !self_signed.reviews().is_empty() {
            assert_eq!(r.json()["spec"], json!({"paint": "green"}));
            converted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(converted, "no conversion through the self-signed webhook");

    // A webhook that refuses: 500 without a reason, kube's text; the storage version still reads.
    apply(&c, "widgets.json", &definition(&by_url("/fail"))).await;
    let expected = "conversion webhook for example.com/v1, Kind=Widget failed: widgets are not convertible today";
    let mut refused = None;
    for _ in 0..50 {
        let r = get(&c, "v2", "a").await;
        if r.status == 500 && r.json()["message"] == expected {
            refused = Some(r.json());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let refused = refused.expect("the failing webhook's error");
    assert_eq!((refused["code"].as_i64(), refused.get("reason")), (Some(500), None));
    let out = c.kubectl(&["get", "widgets.v2.example.com", "a"]).await;
    assert!(!out.ok);
    assert_eq!(out.stderr.trim(), format!("Error from server: {expected}"));
    assert_eq!(get(&c, "v1", "a").await.status, 200);
}

/// A webhook may change labels and annotations only, and only to valid ones: a webhook that
/// renames the object or sets an invalid label gets kube's texts, and the read fails.
async fn webhook_metadata_is_checked(backend: Backend) {
    let c = Cluster::start_with(Options { backend: Some(backend), crds: true, ..Options::default() }).await;
    let hook = ConversionWebhook::start(false).await;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem);
    let url = json!({"url": format!("https://127.0.0.1:{}/convert", hook.port), "caBundle": ca_bundle});
    let def = definition(&url);
    apply(&c, "widgets.json", &def).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;
    let body =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "v1"}, "spec": {"color": "red"}});
    let created = c
        .request(
            Credentials::Admin,
            "POST",
            "/apis/example.com/v1/namespaces/default/widgets",
            Some("application/json"),
            body.to_string(),
        )
        .await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    assert_eq!(get(&c, "v2", "v1").await.json()["spec"], json!({"paint": "red"}));

    // A webhook may change labels and annotations only, and only to valid ones (kube's texts).
    let failing = |path: &str, what: &str| {
        let mut def = def.clone();
        def["spec"]["conversion"]["webhook"]["clientConfig"]["url"] =
            json!(format!("https://127.0.0.1:{}{path}", hook.port));
        (def, format!("conversion webhook for example.com/v1, Kind=Widget {what}"))
    };
    for (path, what) in [
        ("/rename", "returned invalid object: must have the same name: v1 != renamed".to_string()),
        (
            "/relabel",
            format!("returned invalid metadata: metadata.labels: Invalid value: \"bad key!\": {QUALIFIED_NAME_PART}"),
        ),
    ] {
        let (def, expected) = failing(path, &what);
        apply(&c, "widgets.json", &def).await;
        let mut seen = None;
        for _ in 0..50 {
            let r = get(&c, "v2", "v1").await;
            if r.status == 500 {
                seen = Some(r.json()["message"].clone());
                if seen == Some(json!(expected)) {
                    break;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(seen, Some(json!(expected)));
    }

    // Fields the wanted version's schema does not know are pruned from what the webhook
    // returns, on reads and on writes alike, as kube's codec prunes a converted object.
    let (def, _) = failing("/extra", "");
    apply(&c, "widgets.json", &def).await;
    let mut read = Value::Null;
    for _ in 0..50 {
        let r = get(&c, "v2", "v1").await;
        if r.status == 200 {
            read = r.json();
            if hook.reviews().last().is_some_and(|r| r["request"]["desiredAPIVersion"] == "example.com/v2") {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let converted_here = hook.reviews().iter().any(|r| r["request"]["desiredAPIVersion"] == "example.com/v2");
    assert!(converted_here, "the webhook converted the read");
    assert_eq!(read["spec"], json!({"paint": "red"}), "{read}");
    assert!(read.get("bogus").is_none(), "{read}");
    let body = json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "v2"},
        "spec": {"paint": "blue"}});
    let created = send(&c, "POST", "v2", "", &body).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    let kept = stored(&c, "v2").await;
    assert_eq!(kept["apiVersion"], "example.com/v1");
    assert_eq!(kept["spec"], json!({"color": "blue"}), "{kept}");
    assert!(kept.get("bogus").is_none(), "{kept}");
}

/// Go's text for a label key that is not a qualified name.
const QUALIFIED_NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// The first cause's field and the whole message of a 422 answer.
fn refusal(r: &crate::harness::RawResponse) -> (String, String) {
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let status = r.json();
    assert_eq!(status["reason"], "Invalid", "{status}");
    let field = status["details"]["causes"][0]["field"].as_str().unwrap_or("").to_string();
    (field, status["message"].as_str().unwrap_or("").to_string())
}

/// A write is defaulted and checked by the schema and rules of the version it was sent in,
/// with the stored object converted to that version for transition rules, as kube does:
/// v2 (not the storage version) defaults `spec.paint`, refuses a black paint and makes paint
/// immutable; v1 has its own default and none of the rules.
async fn writes_are_checked_in_their_own_version(backend: Backend) {
    let (c, _hook, mut def) = cluster_and_webhook(backend).await;
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["color"]["default"] =
        json!("grey");
    let v2_spec = &mut def["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    v2_spec["x-kubernetes-validations"] =
        json!([{"rule": "!has(self.paint) || self.paint != 'black'", "message": "v2 widgets are never black"}]);
    v2_spec["properties"]["paint"]["default"] = json!("white");
    v2_spec["properties"]["paint"]["x-kubernetes-validations"] =
        json!([{"rule": "self == oldSelf", "message": "paint is immutable"}]);
    apply(&c, "widgets.json", &def).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;
    let widget = |version: &str, name: &str, spec: Value| {
        json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget", "metadata": {"name": name},
            "spec": spec})
    };

    // v2's rule refuses what v1's schema accepts.
    let refused = send(&c, "POST", "v2", "", &widget("v2", "black", json!({"paint": "black"}))).await;
    let (field, message) = refusal(&refused);
    assert_eq!(field, "spec");
    assert!(message.starts_with("Widget.example.com \"black\" is invalid: spec: "), "{message}");
    assert!(message.contains("v2 widgets are never black"), "{message}");
    assert!(c.storage_get("/registry/example.com/widgets/default/black").await.is_none());
    let created = send(&c, "POST", "v1", "", &widget("v1", "black", json!({"color": "black"}))).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));

    // Each version's own defaults, applied before conversion to the stored v1.
    let created = send(&c, "POST", "v2", "", &widget("v2", "plain", json!({}))).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    assert_eq!(created.json()["spec"], json!({"paint": "white"}));
    let plain = stored(&c, "plain").await;
    assert_eq!(plain["spec"], json!({"color": "white"}));
    // Its manager's entry names the fields it wrote as v2 has them.
    let entry = &plain["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "example.com/v2");
    assert!(entry["fieldsV1"]["f:spec"].get("f:paint").is_some(), "{entry}");
    let created = send(&c, "POST", "v1", "", &widget("v1", "grey", json!({}))).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    assert_eq!(stored(&c, "grey").await["spec"], json!({"color": "grey"}));

    // Immutable in v2 while stored in v1: the stored object is converted to v2 before the
    // transition rule compares, so a change through v2 is refused (PUT, merge patch, apply).
    let created = send(&c, "POST", "v1", "", &widget("v1", "a", json!({"color": "red"}))).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    let mut put = get(&c, "v2", "a").await.json();
    put["spec"]["paint"] = json!("blue");
    let (field, message) = refusal(&send(&c, "PUT", "v2", "/a", &put).await);
    assert_eq!(field, "spec.paint");
    assert!(message.contains("paint is immutable"), "{message}");
    let out = c
        .kubectl(&["patch", "widgets.v2.example.com", "a", "--type=merge", "-p", r#"{"spec":{"paint":"blue"}}"#])
        .await;
    assert!(!out.ok && out.stderr.contains("paint is immutable"), "{}", out.stderr);
    let path = c.dir.path().join("a-v2.json");
    std::fs::write(&path, widget("v2", "a", json!({"paint": "blue"})).to_string()).expect("write");
    let out = c.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &path.to_string_lossy()]).await;
    assert!(!out.ok && out.stderr.contains("paint is immutable"), "{}", out.stderr);
    assert_eq!(stored(&c, "a").await["spec"], json!({"color": "red"}));
    // The same paint through v2 with another change passes; v1 has no such rule.
    put["spec"]["paint"] = json!("red");
    put["metadata"]["labels"] = json!({"checked": "yes"});
    let updated = send(&c, "PUT", "v2", "/a", &put).await;
    assert_eq!(updated.status, 200, "{}", String::from_utf8_lossy(&updated.body));
    assert_eq!(updated.json()["spec"], json!({"paint": "red"}));
    let mut put = get(&c, "v1", "a").await.json();
    put["spec"]["color"] = json!("blue");
    let updated = send(&c, "PUT", "v1", "/a", &put).await;
    assert_eq!(updated.status, 200, "{}", String::from_utf8_lossy(&updated.body));
    let stored_a = stored(&c, "a").await;
    assert_eq!(
        (&stored_a["spec"], &stored_a["metadata"]["labels"]),
        (&json!({"color": "blue"}), &json!({"checked": "yes"}))
    );
}

/// The number of objects in each review the webhook received after the first `skip`.
fn objects_per_review(hook: &ConversionWebhook, skip: usize) -> Vec<usize> {
    let reviews = hook.reviews();
    reviews[skip..].iter().map(|r| r["request"]["objects"].as_array().map_or(0, Vec::len)).collect()
}

/// A LIST (and a watch's initial list) sends the objects of a page to the webhook in one
/// ConversionReview; objects stored in the wanted version are not sent, and a list of objects
/// all in it sends nothing.
async fn a_list_is_converted_in_one_review_per_page(backend: Backend) {
    let (c, hook, mut def) = cluster_and_webhook(backend).await;
    apply(&c, "widgets.json", &def).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;
    let colors = ["red", "green", "blue", "cyan", "plum"];
    for (i, color) in colors.iter().enumerate() {
        let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": format!("w{i}")},
            "spec": {"color": color}});
        let created = send(&c, "POST", "v1", "", &body).await;
        assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    }
    // Written and listed in the storage version: nothing to convert.
    let before = hook.reviews().len();
    let listed = list(&c, "v1").await;
    assert_eq!(listed.json()["items"].as_array().map(Vec::len), Some(5));
    assert_eq!(objects_per_review(&hook, before), Vec::<usize>::new());

    // Five objects listed in v2: one review of five.
    let listed = list(&c, "v2").await;
    assert_eq!(listed.status, 200, "{}", String::from_utf8_lossy(&listed.body));
    let paints: Vec<Value> =
        listed.json()["items"].as_array().expect("items").iter().map(|i| i["spec"]["paint"].clone()).collect();
    assert_eq!(paints, colors.map(Value::from));
    assert_eq!(objects_per_review(&hook, before), [5]);
    let last = hook.reviews().last().cloned().expect("a review");
    assert_eq!(last["request"]["desiredAPIVersion"], "example.com/v2");
    let sent: Vec<&Value> =
        last["request"]["objects"].as_array().expect("objects").iter().map(|o| &o["metadata"]["name"]).collect();
    assert_eq!(sent, ["w0", "w1", "w2", "w3", "w4"]);

    // Pages of two: one review per page.
    let before = hook.reviews().len();
    let mut names = Vec::new();
    let mut token = String::new();
    loop {
        let path = format!("/apis/example.com/v2/namespaces/default/widgets?limit=2&continue={token}");
        let page = c.request(Credentials::Admin, "GET", &path, None, "").await.json();
        names.extend(page["items"].as_array().expect("items").iter().map(|i| i["metadata"]["name"].clone()));
        token = page["metadata"]["continue"].as_str().unwrap_or("").to_string();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(names.len(), 5);
    assert_eq!(objects_per_review(&hook, before), [2, 2, 1]);

    // A watch's initial events: one review of five.
    let before = hook.reviews().len();
    let watch = c
        .request(
            Credentials::Admin,
            "GET",
            "/apis/example.com/v2/namespaces/default/widgets?watch=true&timeoutSeconds=1",
            None,
            "",
        )
        .await;
    let text = String::from_utf8_lossy(&watch.body);
    let added = text.lines().filter(|l| l.contains("\"ADDED\"") && l.contains("\"paint\"")).count();
    assert_eq!(added, 5, "{text}");
    assert_eq!(objects_per_review(&hook, before), [5]);

    // With v2 the storage version, an object written in v2 is stored in v2: a LIST in v2
    // sends only the five stored in v1, one in v1 only the one stored in v2.
    def["spec"]["versions"][0]["storage"] = json!(false);
    def["spec"]["versions"][1]["storage"] = json!(true);
    apply(&c, "widgets.json", &def).await;
    let body = json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w5"}, "spec": {"paint": "teal"}});
    let mut stored_in_v2 = false;
    // The definition change reaches the served row within the controller's watch.
    for attempt in 0..50 {
        let name = format!("w5-{attempt}");
        let mut body = body.clone();
        body["metadata"]["name"] = json!(name);
        let created = send(&c, "POST", "v2", "", &body).await;
        assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
        if stored(&c, &name).await["apiVersion"] == "example.com/v2" {
            stored_in_v2 = true;
            break;
        }
        let deleted = c
            .request(
                Credentials::Admin,
                "DELETE",
                &format!("/apis/example.com/v2/namespaces/default/widgets/{name}"),
                None,
                "",
            )
            .await;
        assert_eq!(deleted.status, 200, "{}", String::from_utf8_lossy(&deleted.body));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(stored_in_v2, "the storage version did not change");
    let before = hook.reviews().len();
    let listed = list(&c, "v2").await;
    assert_eq!(listed.json()["items"].as_array().map(Vec::len), Some(6));
    assert_eq!(objects_per_review(&hook, before), [5]);
    let before = hook.reviews().len();
    let listed = list(&c, "v1").await.json();
    let colors: Vec<&Value> = listed["items"].as_array().expect("items").iter().map(|i| &i["spec"]["color"]).collect();
    assert_eq!(colors.last(), Some(&&json!("teal")));
    assert_eq!(objects_per_review(&hook, before), [1]);
}

/// Applies `spec` to widget `a` through `version` as `manager` with kubectl.
async fn apply_as(c: &Cluster, manager: &str, version: &str, spec: Value) -> crate::harness::KubectlOutput {
    let body = json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget", "metadata": {"name": "a"},
        "spec": spec});
    let path = c.dir.path().join(format!("apply-{manager}-{version}.json"));
    std::fs::write(&path, body.to_string()).expect("write manifest");
    c.kubectl(&["apply", "--server-side", "--field-manager", manager, "-f", &path.to_string_lossy()]).await
}

/// The managers of the stored widget `a`: (manager, apiVersion, fields under `spec`).
async fn managers(c: &Cluster) -> Vec<(String, String, Vec<String>)> {
    let stored = stored(c, "a").await;
    let mut out: Vec<(String, String, Vec<String>)> = stored["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let fields = e["fieldsV1"]["f:spec"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
            (e["manager"].as_str().unwrap_or("").into(), e["apiVersion"].as_str().unwrap_or("").into(), fields)
        })
        .collect();
    out.sort();
    out
}

/// Server-side apply through v1 and v2 of a webhook-converted definition: each manager's
/// fields are kept, compared, released and pruned in the version it applied through (the
/// objects converted by the webhook), as kube's field manager does; a failing webhook fails an
/// apply that needs it and leaves an update without managedFields.
async fn managers_keep_their_fields_in_their_own_version(backend: Backend) {
    let (c, hook, mut def) = cluster_and_webhook(backend).await;
    for (i, own) in ["color", "paint"].into_iter().enumerate() {
        def["spec"]["versions"][i]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] =
            json!({own: {"type": "string"}, "size": {"type": "integer"}, "shape": {"type": "string"}});
    }
    apply(&c, "widgets.json", &def).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;
    let fields = |names: &[&str]| names.iter().map(|n| format!("f:{n}")).collect::<Vec<_>>();

    let out = apply_as(&c, "one", "v1", json!({"color": "red", "size": 1})).await;
    assert!(out.ok, "{}", out.stderr);
    let out = apply_as(&c, "two", "v2", json!({"paint": "red", "shape": "round"})).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(
        managers(&c).await,
        [
            ("one".into(), "example.com/v1".into(), fields(&["color", "size"])),
            ("two".into(), "example.com/v2".into(), fields(&["paint", "shape"])),
        ]
    );
    // Changing through v1 the field "two" owns as v2's paint conflicts, named as "two" wrote it.
    let out = apply_as(&c, "one", "v1", json!({"color": "blue", "size": 1})).await;
    assert!(!out.ok);
    assert!(out.stderr.contains(r#"Apply failed with 1 conflict: conflict with "two": .spec.paint"#), "{}", out.stderr);

    // "one" stops sending color: "two" still owns it (as paint), so it stays.
    let out = apply_as(&c, "one", "v1", json!({"size": 1})).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(stored(&c, "a").await["spec"], json!({"color": "red", "size": 1, "shape": "round"}));
    // "two" stops sending paint: nobody owns it any more, so it goes.
    let out = apply_as(&c, "two", "v2", json!({"shape": "round"})).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(stored(&c, "a").await["spec"], json!({"size": 1, "shape": "round"}));
    assert_eq!(
        managers(&c).await,
        [
            ("one".into(), "example.com/v1".into(), fields(&["size"])),
            ("two".into(), "example.com/v2".into(), fields(&["shape"])),
        ]
    );

    // A failing webhook: an apply through v1 (no conversion needed for storage) fails when
    // "two"'s entry must be converted, with kube's text; an update leaves no managedFields.
    def["spec"]["conversion"]["webhook"]["clientConfig"]["url"] =
        json!(format!("https://127.0.0.1:{}/fail", hook.port));
    apply(&c, "widgets.json", &def).await;
    let expected = "failed to convert old object: conversion webhook for example.com/v1, Kind=Widget failed: widgets are not convertible today";
    let mut refused = None;
    // The definition change reaches the served row within the controller's watch.
    for _ in 0..50 {
        let out = apply_as(&c, "one", "v1", json!({"size": 2})).await;
        if !out.ok && out.stderr.contains("not convertible") {
            refused = Some(out.stderr);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let refused = refused.expect("the failing webhook's refusal");
    assert_eq!(refused.trim(), format!("Error from server: {expected}"));
    assert_eq!(stored(&c, "a").await["spec"]["size"], 1);
    // The webhook is asked once: the old object's conversion fails, the new one is not sent.
    let before = hook.reviews().len();
    let out = apply_as(&c, "one", "v1", json!({"size": 2})).await;
    assert!(!out.ok && out.stderr.contains(expected), "{}", out.stderr);
    assert_eq!(objects_per_review(&hook, before), [1]);
    let patched = c
        .request(
            Credentials::Admin,
            "PATCH",
            "/apis/example.com/v1/namespaces/default/widgets/a",
            Some("application/merge-patch+json"),
            r#"{"spec":{"size":3}}"#,
        )
        .await;
    assert_eq!(patched.status, 200, "{}", String::from_utf8_lossy(&patched.body));
    let stored_a = stored(&c, "a").await;
    assert_eq!(stored_a["spec"]["size"], 3);
    assert!(stored_a["metadata"].get("managedFields").is_none(), "{stored_a}");
}
