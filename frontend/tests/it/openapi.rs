//! OpenAPI: the v3 index and per-group-version documents, the v2 document (JSON and the protobuf
//! kubectl asks for), and what kubectl does with them: `explain`, and `create -f` / `apply -f` /
//! `replace -f` with default client validation, which makes kubectl send
//! `fieldValidation=Strict` and rely on the server's strict decoding.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sha2::{Digest, Sha512};

use crate::harness::{in_memory, Backend, Cluster, Credentials, ALICE_TOKEN};

in_memory!(
    strict_validation_without_validate_false,
    apply_creates_without_validate_false,
    any_json_value_passes_client_validation
);

const JSON: &str = "application/json";

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// Collects every `$ref` target in a document.
fn refs(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        out.insert(r.clone());
                    }
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// The `(group, version, kind)` of every resource aggregated discovery lists, with whether it
/// supports PATCH.
async fn discovered_kinds(c: &Cluster) -> BTreeMap<(String, String, String), bool> {
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let mut out = BTreeMap::new();
    for path in ["/api", "/apis"] {
        let doc = c.request_with_accept(Credentials::Admin, path, accept).await.json();
        for group in doc["items"].as_array().expect("items") {
            let name = group["metadata"]["name"].as_str().unwrap_or("");
            for version in group["versions"].as_array().expect("versions") {
                for r in version["resources"].as_array().expect("resources") {
                    let kind = &r["responseKind"];
                    let patchable = r["verbs"].as_array().is_some_and(|v| v.iter().any(|v| v == "patch"));
                    out.insert(
                        (
                            name.to_string(),
                            version["version"].as_str().expect("version").to_string(),
                            kind["kind"].as_str().expect("kind").to_string(),
                        ),
                        patchable,
                    );
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v3_index_hashes_resolve_and_documents_cover_discovery() {
    let c = Cluster::start_on(Backend::Memory).await;
    let index = c.request_with_accept(Credentials::Admin, "/openapi/v3?timeout=32s", "application/json, */*").await;
    assert_eq!(index.status, 200);
    let paths = index.json()["paths"].as_object().expect("paths").clone();
    assert!(paths.contains_key("api/v1") && paths.contains_key("apis/apps/v1"), "{paths:?}");

    let mut patched_kinds = BTreeSet::new();
    for (key, entry) in &paths {
        let url = entry["serverRelativeURL"].as_str().expect("url");
        let (path, hash) = url.split_once("?hash=").expect("hash parameter");
        assert_eq!(path, format!("/openapi/v3/{key}"));
        let doc = c.request_with_accept(Credentials::Admin, &format!("{url}&timeout=32s"), JSON).await;
        assert_eq!(doc.status, 200, "{url}");
        assert_eq!(hex_upper(&Sha512::digest(&doc.body)), hash, "{url}: the hash is the document's SHA-512");
        assert_eq!(doc.headers["cache-control"], "public, immutable");
        assert_eq!(doc.headers["etag"], format!("\"{hash}\""));
        assert!(doc.headers.contains_key("expires"));

        let doc = doc.json();
        assert_eq!(doc["openapi"], "3.0.0");
        assert!(doc["info"]["title"].is_string());
        let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
        // Every reference resolves inside the document.
        let mut targets = BTreeSet::new();
        refs(&doc, &mut targets);
        for t in &targets {
            let name = t.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{key}: foreign ref {t}"));
            assert!(schemas.contains_key(name), "{key}: {t} is not in components.schemas");
        }
        let writable = doc["paths"].as_object().expect("paths").values().any(|item| item.get("patch").is_some());
        // Create-only groups (the reviews) refer to no delete, watch or patch types.
        let meta: &[&str] = if writable {
            &["ObjectMeta", "Status", "DeleteOptions", "WatchEvent", "Patch"]
        } else {
            &["ObjectMeta", "Status"]
        };
        for meta in meta {
            assert!(schemas.contains_key(&format!("io.k8s.apimachinery.pkg.apis.meta.v1.{meta}")), "{key}: {meta}");
        }
        for (p, item) in doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("path item") {
                if method == "parameters" || op.get("x-kubernetes-action").is_none() {
                    continue;
                }
                let gvk = &op["x-kubernetes-group-version-kind"];
                assert!(gvk["kind"].is_string(), "{p} {method}: GVK");
                assert!(op["operationId"].is_string(), "{p} {method}");
                let params: Vec<&str> = op["parameters"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|q| q["name"].as_str()).collect())
                    .unwrap_or_default();
                if matches!(method.as_str(), "post" | "put" | "patch") {
                    for needed in ["dryRun", "fieldManager", "fieldValidation"] {
                        assert!(params.contains(&needed), "{p} {method}: {needed} in {params:?}");
                    }
                }
                if method == "patch" && !p.ends_with("/status") && !p.ends_with("/scale") {
                    let tuple = |f: &str| gvk[f].as_str().unwrap_or("").to_string();
                    patched_kinds.insert((tuple("group"), tuple("version"), tuple("kind")));
                }
            }
        }
        // Each kind with its GVK on its schema, as explain looks kinds up.
        for (name, s) in schemas {
            if let Some(gvks) = s.get("x-kubernetes-group-version-kind") {
                assert!(gvks.as_array().is_some_and(|a| !a.is_empty()), "{name}");
            }
        }
    }
    let create_op = c
        .request_with_accept(Credentials::Admin, paths["api/v1"]["serverRelativeURL"].as_str().unwrap_or(""), JSON)
        .await
        .json();
    let post = &create_op["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["post"];
    assert_eq!(post["operationId"], "createCoreV1NamespacedConfigMap");
    assert_eq!(post["x-kubernetes-action"], "post");
    assert_eq!(
        post["x-kubernetes-group-version-kind"],
        serde_json::json!({"group": "", "kind": "ConfigMap", "version": "v1"})
    );

    // OpenAPI and discovery agree: every patchable kind discovery lists has its PATCH operation.
    for ((g, v, k), patchable) in discovered_kinds(&c).await {
        if !patchable {
            continue;
        }
        assert!(patched_kinds.contains(&(g.clone(), v.clone(), k.clone())), "{g}/{v} {k} has no PATCH operation");
    }

    // A stale hash is redirected to the current one; no hash means no immutable caching.
    let current = paths["apis/apps/v1"]["serverRelativeURL"].as_str().expect("url").to_string();
    let stale = c.request_with_accept(Credentials::Admin, "/openapi/v3/apis/apps/v1?hash=ABC", JSON).await;
    assert_eq!(stale.status, 301);
    assert_eq!(stale.headers["location"], current.as_str());
    let unhashed = c.request_with_accept(Credentials::Admin, "/openapi/v3/apis/apps/v1", JSON).await;
    assert_eq!(unhashed.status, 200);
    assert_ne!(unhashed.headers.get("cache-control").map(|v| v.as_bytes()), Some(&b"public, immutable"[..]));
    let etag = unhashed.headers["etag"].to_str().expect("etag").to_string();
    let cached = c
        .request_with_headers(
            Credentials::Admin,
            "GET",
            "/openapi/v3/apis/apps/v1",
            &[("if-none-match", &etag)],
            None,
            "",
        )
        .await;
    assert_eq!(cached.status, 304);
    let missing = c.request_with_accept(Credentials::Admin, "/openapi/v3/apis/nope.example.com/v1", JSON).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["reason"], "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_document_in_json_and_protobuf() {
    let c = Cluster::start_on(Backend::Memory).await;
    let doc = c.request_with_accept(Credentials::Admin, "/openapi/v2", JSON).await;
    assert_eq!(doc.status, 200);
    assert_eq!(doc.headers["content-type"], JSON);
    let etag = doc.headers["etag"].to_str().expect("etag").to_string();
    assert_eq!(etag, format!("\"{}\"", hex_upper(&Sha512::digest(&doc.body))));
    let doc = doc.json();
    assert_eq!(doc["swagger"], "2.0");
    let definitions = doc["definitions"].as_object().expect("definitions");
    let mut targets = BTreeSet::new();
    refs(&doc, &mut targets);
    for t in &targets {
        let name = t.strip_prefix("#/definitions/").unwrap_or_else(|| panic!("foreign ref {t}"));
        assert!(definitions.contains_key(name), "{t}");
    }
    let mut kinds_with_schema = BTreeSet::new();
    for s in definitions.values() {
        for gvk in s.get("x-kubernetes-group-version-kind").and_then(Value::as_array).into_iter().flatten() {
            let f = |k: &str| gvk[k].as_str().unwrap_or("").to_string();
            kinds_with_schema.insert((f("group"), f("version"), f("kind")));
        }
    }
    for gvk in discovered_kinds(&c).await.into_keys() {
        assert!(kinds_with_schema.contains(&gvk), "{gvk:?} has no v2 definition");
    }
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
    assert_eq!(
        definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"],
        serde_json::json!({
            "description": definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["description"],
            "format": "int-or-string", "type": "string"
        })
    );

    // kubectl asks for gnostic's protobuf form only.
    let pb = c
        .request_with_accept(
            Credentials::Admin,
            "/openapi/v2?timeout=32s",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .await;
    assert_eq!(pb.status, 200);
    // Answered under the spelling without `@`, which Go's mime parser accepts.
    assert_eq!(pb.headers["content-type"], "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    // Document.swagger (field 1) = "2.0" comes first.
    assert_eq!(&pb.body[..5], &[0x0a, 3, b'2', b'.', b'0']);
    assert!(pb.body.windows(b"io.k8s.api.apps.v1.Deployment".len()).any(|w| w == b"io.k8s.api.apps.v1.Deployment"));
    let refused = c.request_with_accept(Credentials::Admin, "/openapi/v2", "text/plain").await;
    assert_eq!(refused.status, 406);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_is_readable_by_authenticated_users_only() {
    let c = Cluster::start_on(Backend::Memory).await;
    for path in ["/openapi/v3", "/openapi/v3/api/v1", "/openapi/v2"] {
        let ok = c.request_with_accept(Credentials::Token(ALICE_TOKEN), path, JSON).await;
        assert_eq!(ok.status, 200, "{path} for an authenticated user (system:discovery)");
        let anonymous = c.request_with_accept(Credentials::None, path, JSON).await;
        assert_eq!(anonymous.status, 403, "{path} for system:anonymous");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_prints_field_docs() {
    let c = Cluster::start_on(Backend::Memory).await;
    let pods = c.must_kubectl(&["explain", "pods"]).await;
    for expected in [
        "KIND:       Pod",
        "VERSION:    v1",
        "Pod is a collection of containers",
        "spec\t<PodSpec>",
        "metadata\t<ObjectMeta>",
    ] {
        assert!(pods.contains(expected), "{expected:?} missing from:\n{pods}");
    }
    let containers = c.must_kubectl(&["explain", "deployment.spec.template.spec.containers"]).await;
    for expected in [
        "GROUP:      apps",
        "KIND:       Deployment",
        "FIELD: containers <[]Container>",
        "image\t<string>",
        "name\t<string> -required-",
    ] {
        assert!(containers.contains(expected), "{expected:?} missing from:\n{containers}");
    }
    let cm = c.must_kubectl(&["explain", "configmaps", "--api-version=v1"]).await;
    for expected in
        ["KIND:       ConfigMap", "ConfigMap holds configuration data for pods to consume", "data\t<map[string]string>"]
    {
        assert!(cm.contains(expected), "{expected:?} missing from:\n{cm}");
    }
    let nested = c.must_kubectl(&["explain", "deployment.spec.strategy.rollingUpdate.maxSurge"]).await;
    assert!(nested.contains("FIELD: maxSurge <IntOrString>"), "{nested}");
    // The v2 renderer reads `/openapi/v2` in its protobuf form.
    let v2 = c.must_kubectl(&["explain", "deployment.spec.replicas", "--output=plaintext-openapiv2"]).await;
    assert!(v2.contains("FIELD:    replicas <integer>"), "{v2}");
    assert!(v2.contains("Number of desired pods"), "{v2}");
    let missing = c.kubectl(&["explain", "pods.spec.nope"]).await;
    assert!(!missing.ok);
    assert!(missing.stderr.contains(r#"field "nope" does not exist"#), "{}", missing.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_commands_still_work() {
    let c = Cluster::start_on(Backend::Memory).await;
    let resources = c.must_kubectl(&["api-resources"]).await;
    assert!(resources.contains("deployments") && resources.contains("configmaps"), "{resources}");
    let versions = c.must_kubectl(&["api-versions"]).await;
    assert!(versions.lines().any(|l| l == "apps/v1"), "{versions}");
    // Every resource discovery lists can be explained: its group version's v3 document has its
    // kind's schema, found by `x-kubernetes-group-version-kind`, with the description and
    // fields `kubectl explain` prints. Lines are NAME [SHORTNAMES] APIVERSION NAMESPACED KIND.
    let table = c.must_kubectl(&["api-resources", "--no-headers"]).await;
    assert!(table.lines().count() > 40, "{table}");
    let mut documents: BTreeMap<String, Value> = BTreeMap::new();
    for line in table.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (name, api_version, kind) = (cols[0], cols[cols.len() - 3], cols[cols.len() - 1]);
        let key = if api_version.contains('/') { format!("apis/{api_version}") } else { format!("api/{api_version}") };
        if !documents.contains_key(&key) {
            let doc = c.request_with_accept(Credentials::Admin, &format!("/openapi/v3/{key}"), JSON).await;
            assert_eq!(doc.status, 200, "{key}");
            documents.insert(key.clone(), doc.json());
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = serde_json::json!({"group": group, "version": version, "kind": kind});
        let schemas = documents[&key]["components"]["schemas"].as_object().expect("schemas");
        let schema = schemas
            .values()
            .find(|s| s["x-kubernetes-group-version-kind"].as_array().is_some_and(|a| a.contains(&gvk)))
            .unwrap_or_else(|| panic!("explain {name}: no schema of {gvk} in {key}"));
        assert!(schema["description"].as_str().is_some_and(|d| !d.is_empty()), "explain {name}: description");
        assert!(schema["properties"].as_object().is_some_and(|p| !p.is_empty()), "explain {name}: fields");
    }
    // And kubectl explains them: a core kind, a group's namespaced and cluster-wide kinds, and
    // a create-only review.
    for (name, api_version) in [
        ("pods", "v1"),
        ("deployments", "apps/v1"),
        ("clusterroles", "rbac.authorization.k8s.io/v1"),
        ("selfsubjectaccessreviews", "authorization.k8s.io/v1"),
    ] {
        let out = c.must_kubectl(&["explain", name, &format!("--api-version={api_version}")]).await;
        assert!(out.contains("DESCRIPTION:") && out.contains("FIELDS:"), "explain {name}:\n{out}");
    }
}

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
"#;

async fn strict_validation_without_validate_false(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let bad = c.dir.path().join("x.yaml");
    std::fs::write(&bad, DEPLOYMENT.replace("  replicas: 1\n", "  replicas: 1\n  foo: bar\n")).expect("manifest");
    let bad_path = bad.to_str().expect("utf-8 path");
    let refused = c.kubectl(&["create", "-f", bad_path]).await;
    assert!(!refused.ok, "{}", refused.stdout);
    let expected = format!(
        "Error from server (BadRequest): error when creating \"{bad_path}\": Deployment in version \"v1\" cannot be \
         handled as a Deployment: strict decoding error: unknown field \"spec.foo\""
    );
    assert!(refused.stderr.contains(&expected), "expected {expected:?} in:\n{}", refused.stderr);
    // Nothing was written.
    let absent = c.kubectl(&["get", "deployment", "web"]).await;
    assert!(absent.stderr.contains("NotFound"), "{}", absent.stderr);

    let nested = c.dir.path().join("nested.yaml");
    std::fs::write(
        &nested,
        DEPLOYMENT.replace("        image: nginx:1.27\n", "        image: nginx:1.27\n        imagePolicy: x\n"),
    )
    .expect("manifest");
    let refused = c.kubectl(&["create", "-f", nested.to_str().expect("utf-8 path")]).await;
    assert!(
        refused.stderr.contains(r#"unknown field "spec.template.spec.containers[0].imagePolicy""#),
        "{}",
        refused.stderr
    );

    let good = c.dir.path().join("good.yaml");
    std::fs::write(&good, DEPLOYMENT).expect("manifest");
    let good_path = good.to_str().expect("utf-8 path");
    assert_eq!(c.must_kubectl(&["create", "-f", good_path]).await.trim(), "deployment.apps/web created");

    // replace -f sends PUT with fieldValidation=Strict, also without --validate=false.
    let cm = c.dir.path().join("cm.yaml");
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: b\n").expect("manifest");
    let cm_path = cm.to_str().expect("utf-8 path");
    c.must_kubectl(&["create", "-f", cm_path]).await;
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: c\n").expect("manifest");
    assert_eq!(c.must_kubectl(&["replace", "-f", cm_path]).await.trim(), "configmap/cfg replaced");
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  bogus: 1\ndata:\n  a: d\n")
        .expect("manifest");
    let refused = c.kubectl(&["replace", "-f", cm_path]).await;
    assert!(refused.stderr.contains(r#"strict decoding error: unknown field "metadata.bogus""#), "{}", refused.stderr);
    let data = c.must_kubectl(&["get", "cm", "cfg", "-o", "jsonpath={.data.a}"]).await;
    assert_eq!(data, "c", "a refused replace writes nothing");

    // A create-only kind has no PATCH operation, so kubectl validates it on the client against
    // the protobuf v2 document: a valid review passes, a misspelt field is caught there.
    let review = c.dir.path().join("review.yaml");
    std::fs::write(
        &review,
        "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n    \
         verb: list\n    resource: pods\n",
    )
    .expect("manifest");
    let review_path = review.to_str().expect("utf-8 path");
    let allowed = c.must_kubectl(&["create", "-f", review_path, "-o", "jsonpath={.status.allowed}"]).await;
    assert_eq!(allowed, "true");
    std::fs::write(
        &review,
        "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttribute:\n    \
         verb: list\n",
    )
    .expect("manifest");
    let refused = c.kubectl(&["create", "-f", review_path]).await;
    assert!(!refused.ok, "{}", refused.stdout);
    assert!(refused.stderr.contains("resourceAttribute"), "{}", refused.stderr);
}

/// A first `kubectl apply` of an object is a create (GET 404, then POST with
/// `fieldValidation=Strict`); updates through apply are PATCHes, tested with PATCH support.
async fn apply_creates_without_validate_false(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let file = c.dir.path().join("web.yaml");
    std::fs::write(&file, DEPLOYMENT).expect("manifest");
    let out = c.must_kubectl(&["apply", "-f", file.to_str().expect("utf-8 path")]).await;
    assert_eq!(out.trim(), "deployment.apps/web created");
    let live: Value =
        serde_json::from_str(&c.must_kubectl(&["get", "deployment", "web", "-o", "json"]).await).expect("json");
    assert!(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string(), "{live}");
    let bad = c.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        DEPLOYMENT.replace("name: web\n", "name: web2\n").replace("  replicas: 1\n", "  replicas: 1\n  foo: bar\n"),
    )
    .expect("manifest");
    let refused = c.kubectl(&["apply", "-f", bad.to_str().expect("utf-8 path")]).await;
    assert!(refused.stderr.contains(r#"strict decoding error: unknown field "spec.foo""#), "{}", refused.stderr);
}

/// kubectl validates a `List` on the client against the v2 document, where a definition's
/// `default`, `enum` and `example` are `JSON`: any JSON value, published without a type as
/// kube publishes it, so a number or a string there passes.
async fn any_json_value_passes_client_validation(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let list = c.dir.path().join("list.yaml");
    std::fs::write(
        &list,
        r#"apiVersion: v1
kind: List
items:
- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata:
    name: dials.example.com
  spec:
    group: example.com
    names: {kind: Dial, plural: dials}
    scope: Namespaced
    versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                level: {type: integer, default: 1, example: 3}
                mode: {type: string, default: low, enum: [low, high]}
"#,
    )
    .expect("manifest");
    let out = c.must_kubectl(&["create", "-f", list.to_str().expect("utf-8 path")]).await;
    assert_eq!(out.trim(), "customresourcedefinition.apiextensions.k8s.io/dials.example.com created");
}
