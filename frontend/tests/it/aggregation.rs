//! API aggregation end to end: Local APIServices for the built-in and custom resource group
//! versions, and an extension API server (`extension_server`) registered with an APIService
//! behind an ExternalName Service, reached through the aggregator with the front-proxy client
//! certificate and identity headers, as kubectl and raw clients see it.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::extension_server::{ExtensionServer, GROUP, VERSION};
use crate::harness::{both_backends, wait_for, Backend, Cluster, Credentials, Options, ALICE_TOKEN, BOB_TOKEN};

both_backends!(aggregation);

const NS: &str = "wardle";
const SERVICE: &str = "api";
const APISERVICE: &str = "v1alpha1.wardle.example.com";

pub(crate) fn config(dir: &std::path::Path) -> ballast_aggregator::AggregatorConfig {
    let files = ballast_aggregator::front_proxy::ensure(&dir.join("front-proxy")).expect("front-proxy certificates");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).expect("front-proxy file");
    ballast_aggregator::AggregatorConfig {
        proxy_client_cert_pem: Some(read(&files.client_cert)),
        proxy_client_key_pem: Some(read(&files.client_key)),
        // Longer than the test: every check it waits for is triggered by a change (of an
        // APIService or a Service), as the controller promises.
        availability_interval: Duration::from_secs(3600),
        response_header_timeout: Duration::from_secs(2),
        ..ballast_aggregator::AggregatorConfig::default()
    }
}

/// The APIService's Available condition, read in-process (a poll: kubectl's reading of
/// APIServices is checked where the test lists them).
async fn condition(c: &Cluster, name: &str) -> Value {
    let r = c.request(Credentials::Admin, "GET", &apiservice_path(name), None, "").await;
    if r.status != 200 {
        return Value::Null;
    }
    r.json()["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned()
        .unwrap_or_default()
}

async fn wait_condition(c: &Cluster, name: &str, status: &str, reason: &str) -> Value {
    let mut last = Value::Null;
    let held = wait_for(Duration::from_secs(30), async || {
        last = condition(c, name).await;
        last["status"] == status && last["reason"] == reason
    })
    .await;
    assert!(held, "{name}: wanted Available={status} ({reason}), last {last}");
    last
}

/// Waits until a proxied GET of the flunders gets `status` (and `body`, when given). The
/// condition is read from storage, while the proxy answers from the APIServices its informer
/// has seen: a step that proxies right after a condition was written waits for the informer.
async fn wait_proxied(c: &Cluster, status: u16, body: Option<&str>) {
    let mut last = (0, String::new());
    let seen = wait_for(Duration::from_secs(30), async || {
        let r = c.request(Credentials::Admin, "GET", &flunders("default"), None, "").await;
        last = (r.status, String::from_utf8_lossy(&r.body).into_owned());
        last.0 == status && body.is_none_or(|b| last.1 == b)
    })
    .await;
    assert!(seen, "wanted {status} {body:?} from the proxy, last {last:?}");
}

fn apiservice_path(name: &str) -> String {
    format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}")
}

fn registration(port: u16, ca_pem: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: {SERVICE}\n  namespace: {NS}\nspec:\n  type: ExternalName\n  externalName: localhost\n---\n\
         apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {APISERVICE}\nspec:\n  group: {GROUP}\n  version: {VERSION}\n  \
         groupPriorityMinimum: 1000\n  versionPriority: 15\n  caBundle: {ca}\n  service:\n    namespace: {NS}\n    name: {SERVICE}\n    port: {port}\n"
    )
}

async fn apply(c: &Cluster, yaml: &str) -> crate::harness::KubectlOutput {
    let file = c.dir.path().join(format!("apply-{}.yaml", rand_suffix()));
    std::fs::write(&file, yaml).expect("manifest");
    c.kubectl(&["apply", "-f", file.to_str().expect("path")]).await
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn flunders(ns: &str) -> String {
    format!("/apis/{GROUP}/{VERSION}/namespaces/{ns}/flunders")
}

/// Reads a response's head (up to the blank line), bounded by 10 s.
async fn read_head(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(0) | Err(_) => break,
                Ok(_) => head.push(byte[0]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    String::from_utf8_lossy(&head).into_owned()
}

/// Writes `message` on an upgraded stream and reads as many bytes back (bounded by 10 s).
async fn echo(stream: &mut (impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin), message: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(message).await.expect("write");
    stream.flush().await.expect("flush");
    let mut back = vec![0u8; message.len()];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut back))
        .await
        .expect("the echo within 10 s")
        .expect("read the echo");
    back
}

async fn aggregation(backend: Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let aggregator = config(dir.path());
    let c = Cluster::start_with(Options { backend: Some(backend), aggregator: Some(aggregator), ..Options::default() })
        .await;

    // Local APIServices for the built-in group versions, listed as kube lists them.
    let mut listed = String::new();
    let all_local = wait_for(Duration::from_secs(30), async || {
        listed = c.kubectl(&["get", "apiservices"]).await.stdout;
        ["v1.", "v1.apps", "v1.apiextensions.k8s.io", "v2.autoscaling"]
            .iter()
            .all(|n| listed.lines().any(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == [*n, "Local", "True"]))
    })
    .await;
    assert!(all_local, "{listed}");
    assert!(listed.starts_with("NAME") && listed.lines().next().is_some_and(|h| h.contains("SERVICE")), "{listed}");
    let apps = c.must_kubectl(&["get", "apiservice", "v1.apps", "-o", "json"]).await;
    let apps: Value = serde_json::from_str(&apps).expect("json");
    assert_eq!(apps["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "onstart");
    assert_eq!(apps["spec"]["groupPriorityMinimum"], 17800);
    assert_eq!(apps["status"]["conditions"][0]["message"], "Local APIServices are always available");

    // A CustomResourceDefinition's group version gets one while it exists.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.org\nspec:\n  group: example.org\n  scope: Namespaced\n  names:\n    plural: widgets\n    singular: widget\n    kind: Widget\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n";
    assert!(apply(&c, crd).await.ok);
    wait_condition(&c, "v1.example.org", "True", "Local").await;
    c.must_kubectl(&["delete", "crd", "widgets.example.org"]).await;
    let gone = wait_for(Duration::from_secs(30), async || {
        c.request(Credentials::Admin, "GET", &apiservice_path("v1.example.org"), None, "").await.status == 404
    })
    .await;
    assert!(gone, "the definition's APIService outlives it");

    // Validation with kube's texts.
    let bad = "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.wrong.io\nspec:\n  group: other.io\n  version: v1\n  groupPriorityMinimum: 0\n  versionPriority: 10\n  insecureSkipTLSVerify: true\n  caBundle: UEVN\n  service:\n    namespace: ns1\n    name: svc1\n";
    let out = apply(&c, bad).await;
    assert!(!out.ok);
    for text in [
        "metadata.name: Invalid value: \"v1.wrong.io\": must be `spec.version+\".\"+spec.group`: \"v1.other.io\"",
        "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
        "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
    ] {
        assert!(out.stderr.contains(text), "missing {text:?} in {}", out.stderr);
    }

    // An extension server behind an ExternalName Service.
    let front_proxy_ca =
        std::fs::read_to_string(dir.path().join("front-proxy").join("front-proxy-ca.crt")).expect("CA");
    let server = ExtensionServer::start(SERVICE, NS, &front_proxy_ca).await;
    let out = apply(&c, &registration(server.addr.port(), &server.ca_pem)).await;
    assert!(out.ok, "{}", out.stderr);
    let available = wait_condition(&c, APISERVICE, "True", "Passed").await;
    assert_eq!(available["message"], "all checks passed");
    wait_proxied(&c, 200, None).await;
    let listed = c.must_kubectl(&["get", "apiservice", APISERVICE]).await;
    assert!(listed.contains(&format!("{NS}/{SERVICE}")) && listed.contains("True"), "{listed}");

    // Discovery: the remote group in /apis and in kubectl api-resources.
    let groups = c.request(Credentials::Admin, "GET", "/apis", None, "").await.json();
    let names: Vec<&str> =
        groups["groups"].as_array().into_iter().flatten().filter_map(|g| g["name"].as_str()).collect();
    assert!(names.contains(&GROUP), "{names:?}");
    let position = |n: &str| names.iter().position(|g| *g == n).expect("listed");
    assert!(position("apps") < position(GROUP), "priority order: {names:?}");
    let resources = c.must_kubectl(&["api-resources", "--api-group", GROUP]).await;
    assert!(resources.contains("flunders") && resources.contains(&format!("{GROUP}/{VERSION}")), "{resources}");
    let group = c.request(Credentials::Admin, "GET", &format!("/apis/{GROUP}"), None, "").await.json();
    assert_eq!(group["preferredVersion"]["groupVersion"], format!("{GROUP}/{VERSION}"));

    // The server's OpenAPI v3 document, for kubectl explain.
    let index = c.request(Credentials::Admin, "GET", "/openapi/v3", None, "").await.json();
    let url =
        index["paths"][format!("apis/{GROUP}/{VERSION}")]["serverRelativeURL"].as_str().expect("listed").to_string();
    assert!(url.contains("?hash="), "{url}");
    assert!(index["paths"]["apis/apps/v1"].is_object(), "the built-in documents stay listed");
    let explained = c.must_kubectl(&["explain", "flunders.spec"]).await;
    assert!(explained.contains("What the server saw of the caller.") && explained.contains("user"), "{explained}");

    // The server's OpenAPI v2 document merged into /openapi/v2 (JSON and kubectl's protobuf):
    // its /apis/ path with the definitions it uses, its own Status renamed, nothing else.
    let path = format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/flunders/{{name}}");
    let mut v2 = Value::Null;
    let merged = wait_for(Duration::from_secs(30), async || {
        v2 = c.request_with_accept(Credentials::Admin, "/openapi/v2", "application/json").await.json();
        v2["paths"][&path].is_object()
    })
    .await;
    assert!(merged, "the remote path is not in /openapi/v2");
    let responses = &v2["paths"][&path]["get"]["responses"];
    assert_eq!(responses["200"]["schema"]["$ref"], "#/definitions/com.example.wardle.v1alpha1.Flunder");
    assert_eq!(responses["404"]["schema"]["$ref"], "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status_v2");
    assert_eq!(
        v2["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.Status_v2"]["description"],
        "Wardle's own Status."
    );
    assert_ne!(v2["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.Status"]["description"], "Wardle's own Status.");
    assert!(v2["paths"]["/wardle-health"].is_null() && v2["definitions"]["com.example.wardle.Health"].is_null());
    assert!(v2["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"].is_object(), "built-in paths stay");
    let explained = c.must_kubectl(&["explain", "flunders.spec", "--output", "plaintext-openapiv2"]).await;
    assert!(explained.contains("What the server saw of the caller (v2)."), "{explained}");

    // Proxied get and list with the admin's identity; the caller's credentials stay here.
    let list = c.must_kubectl(&["get", "flunders", "-n", "default", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&list).expect("json");
    let spec = &list["items"][0]["spec"];
    assert_eq!(spec["user"], json!(["kubernetes-admin"]));
    let groups = spec["groups"].as_array().expect("groups");
    assert!(groups.contains(&json!("system:masters")) && groups.contains(&json!("system:authenticated")), "{spec}");
    assert_eq!(spec["authorization"], json!([]));
    let one = c.must_kubectl(&["get", "flunder", "one", "-n", "default", "-o", "jsonpath={.metadata.name}"]).await;
    assert_eq!(one, "one");

    // Sequential proxied requests share keep-alive connections. An availability check running
    // meanwhile may take the idle one and make the next request open another, hence at most two.
    let before = server.seen().len();
    for name in ["k1", "k2", "k3", "k4"] {
        let got = c.request(Credentials::Admin, "GET", &format!("{}/{name}", flunders("default")), None, "").await;
        assert_eq!(got.status, 200);
    }
    let connections: std::collections::BTreeSet<_> =
        server.seen()[before..].iter().filter(|s| s.path.starts_with(&flunders("default"))).map(|s| s.peer).collect();
    assert!(connections.len() <= 2, "four sequential requests on {} connections", connections.len());

    // An exec-style upgrade: the server's 101 reaches the caller, and bytes then flow both
    // ways over the caller's connection, with the front-proxy identity on the upgrade request.
    let head = format!(
        "POST {}/u/exec?command=cat HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
         X-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n",
        flunders("default")
    );
    let mut stream = c.open_stream(Credentials::Admin, &head).await;
    let answer = read_head(&mut stream).await.to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 101"), "{answer}");
    assert!(answer.contains("upgrade: spdy/3.1") && answer.contains("x-seen-user: kubernetes-admin"), "{answer}");
    for message in [&b"first frame"[..], &[0u8, 1, 2, 255, 254][..]] {
        assert_eq!(echo(&mut stream, message).await, message);
    }
    drop(stream);
    // Built-in exec-style subresources are not served here: no upgrade.
    let head = "POST /api/v1/namespaces/default/pods/p/exec?command=cat HTTP/1.1\r\nHost: localhost\r\n\
                Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n";
    let mut stream = c.open_stream(Credentials::Admin, head).await;
    let answer = read_head(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
    drop(stream);

    // A token user, then the same user impersonated by the admin: identity forwarded, bearer
    // token and impersonation headers not.
    c.etcd_put(
        "/registry/clusterroles/flunder-reader",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "flunder-reader"},
                "rules": [{"apiGroups": [GROUP], "resources": ["flunders"], "verbs": ["get", "list", "watch", "create"]}]}),
    )
    .await;
    c.etcd_put(
        "/registry/clusterrolebindings/alice-reads-flunders",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "alice-reads-flunders"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "flunder-reader"},
                "subjects": [{"kind": "User", "name": "alice"}]}),
    )
    .await;
    let as_alice =
        c.request(Credentials::Token(ALICE_TOKEN), "GET", &format!("{}/x", flunders("default")), None, "").await;
    assert_eq!(as_alice.status, 200, "{}", String::from_utf8_lossy(&as_alice.body));
    let spec = as_alice.json()["spec"].clone();
    assert_eq!(spec["user"], json!(["alice"]));
    assert_eq!(spec["uid"], json!(["1001"]));
    assert_eq!(spec["groups"], json!(["dev", "qa", "system:authenticated"]));
    assert_eq!(spec["authorization"], json!([]));
    let impersonated = c
        .must_kubectl(&["get", "flunder", "y", "-n", "default", "--as", "alice", "--as-group", "dev", "-o", "json"])
        .await;
    let spec = serde_json::from_str::<Value>(&impersonated).expect("json")["spec"].clone();
    assert_eq!(spec["user"], json!(["alice"]));
    assert!(spec["groups"].as_array().is_some_and(|g| g.contains(&json!("dev"))), "{spec}");
    assert_eq!(spec["impersonate"], json!([]));

    // A forged identity header from the caller is dropped.
    let forged = c
        .request_with_headers(
            Credentials::Token(ALICE_TOKEN),
            "GET",
            &format!("{}/z", flunders("default")),
            &[("X-Remote-User", "system:admin"), ("X-Remote-Group", "system:masters")],
            None,
            "",
        )
        .await;
    assert_eq!(forged.json()["spec"]["user"], json!(["alice"]));
    assert!(!forged.json()["spec"]["groups"].as_array().expect("groups").contains(&json!("system:masters")));

    // A user RBAC does not allow is refused here; the server never sees the request.
    let before = server.seen().len();
    let denied = c.request(Credentials::Token(BOB_TOKEN), "GET", &flunders("default"), None, "").await;
    assert_eq!(denied.status, 403);
    assert_eq!(denied.json()["reason"], "Forbidden");
    // Only the availability checks (discovery and OpenAPI GETs) may reach it meanwhile.
    let checker = |s: &crate::extension_server::Seen| {
        s.method == "GET" && s.headers.get("x-remote-user").is_some_and(|u| u == "system:kube-aggregator")
    };
    assert!(server.seen()[before..].iter().all(checker), "the denied request was proxied");

    // A request body goes through.
    let created = c
        .request(
            Credentials::Admin,
            "POST",
            &flunders("default"),
            Some("application/json"),
            json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Flunder", "metadata": {"name": "new"}})
                .to_string(),
        )
        .await;
    assert_eq!(created.status, 201);
    let seen_post = server.seen().into_iter().rfind(|s| s.method == "POST").expect("POST reached the server");
    assert!(String::from_utf8_lossy(&seen_post.body).contains("\"name\":\"new\""));

    // A watch streams: the first event arrives while the stream stays open.
    let mut watch = c.spawn_kubectl(&["get", "flunders", "-n", "default", "--watch", "-o", "name"]);
    let stdout = watch.stdout.take().expect("stdout");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let first = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match lines.next_line().await.expect("read") {
                Some(l) if l.contains("watched") => return l,
                Some(_) => continue,
                None => panic!("watch ended"),
            }
        }
    })
    .await
    .expect("a watch event");
    assert!(first.contains("flunder"), "{first}");
    let _ = watch.kill().await;

    // A server that never answers costs that request a timeout, nobody else anything.
    let hang_path = format!("{}/hang", flunders("default"));
    let (hung, others) =
        tokio::join!(c.request(Credentials::Admin, "GET", &hang_path, None, ""), c.kubectl(&["get", "namespaces"]));
    assert!(others.ok, "{}", others.stderr);
    assert_eq!(hung.status, 503);
    assert_eq!(hung.json()["reason"], "ServiceUnavailable");
    assert!(hung.json()["message"].as_str().is_some_and(|m| m.contains("timeout awaiting response headers")));

    // An APIService whose server does not speak TLS (it answers garbage and hangs up): marked
    // unavailable with the failure, its requests refused, the other group unaffected.
    let garbage = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let garbage_port = garbage.local_addr().expect("addr").port();
    let garbage_task = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut tcp, _)) = garbage.accept().await {
            let _ = tcp.write_all(b"HTTP/9.9 garbage\r\n\r\n\x00\xff").await;
        }
    });
    let broken = format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.garbage.example.com\nspec:\n  \
         group: garbage.example.com\n  version: v1\n  groupPriorityMinimum: 1000\n  versionPriority: 15\n  \
         insecureSkipTLSVerify: true\n  service:\n    namespace: {NS}\n    name: {SERVICE}\n    port: {garbage_port}\n"
    );
    let out = apply(&c, &broken).await;
    assert!(out.ok, "{}", out.stderr);
    let failed = wait_condition(&c, "v1.garbage.example.com", "False", "FailedDiscoveryCheck").await;
    let expected =
        format!("failing or missing response from https://localhost:{garbage_port}/apis/garbage.example.com/v1: ");
    assert!(failed["message"].as_str().is_some_and(|m| m.starts_with(&expected)), "{failed}");
    let refused = c.request(Credentials::Admin, "GET", "/apis/garbage.example.com/v1/things", None, "").await;
    assert_eq!(refused.status, 503);
    let fine = c.request(Credentials::Admin, "GET", &flunders("default"), None, "").await;
    assert_eq!(fine.status, 200, "the other group is affected");
    c.must_kubectl(&["delete", "apiservice", "v1.garbage.example.com"]).await;
    garbage_task.abort();

    // The server stops: unavailable, and requests get kube's 503.
    drop(server);
    c.must_kubectl(&["label", "service", SERVICE, "-n", NS, "checked=again"]).await;
    let down = wait_condition(&c, APISERVICE, "False", "FailedDiscoveryCheck").await;
    assert!(
        down["message"].as_str().is_some_and(|m| m.starts_with("failing or missing response from https://")),
        "{down}"
    );
    wait_proxied(&c, 503, Some("service unavailable\n")).await;
    let out = c.kubectl(&["get", "flunders", "-n", "default"]).await;
    assert!(!out.ok && out.stderr.contains("the server is currently unable to handle the request"), "{}", out.stderr);
    c.must_kubectl(&["get", "namespaces"]).await;

    // The Service goes: kube's reason and message.
    c.must_kubectl(&["delete", "service", SERVICE, "-n", NS]).await;
    let missing = wait_condition(&c, APISERVICE, "False", "ServiceNotFound").await;
    assert_eq!(missing["message"], format!("service/{SERVICE} in \"{NS}\" is not present"));

    // Deleting the APIService removes the route.
    c.must_kubectl(&["delete", "apiservice", APISERVICE]).await;
    let gone = wait_for(Duration::from_secs(30), async || {
        c.request(Credentials::Admin, "GET", &flunders("default"), None, "").await.status == 404
    })
    .await;
    assert!(gone, "the route outlives its APIService");
    let groups = c.request(Credentials::Admin, "GET", "/apis", None, "").await.json();
    assert!(!groups["groups"].as_array().into_iter().flatten().any(|g| g["name"] == GROUP));
}
