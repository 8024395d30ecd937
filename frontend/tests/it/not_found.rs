//! Paths no server of the chain serves: a request for a group nobody serves passes through the
//! aggregator, the built-in API and the apiextensions server to the end of the chain, which
//! answers kube's plain-text `404 page not found`; a path below a group a server does serve
//! (an unknown resource or version) is that server's 404 `Status`. kubectl reports both as
//! `the server could not find the requested resource`.

use std::time::Duration;

use serde_json::json;

use crate::harness::{in_memory, wait_for, Backend, Cluster, Credentials, Options, RawResponse};

in_memory!(unknown_groups_reach_the_end_of_the_chain);

const JSON: Option<&str> = Some("application/json");

/// Asserts `r` is the end of the chain's answer.
fn assert_end_of_chain(path: &str, r: &RawResponse) {
    assert_eq!(r.status, 404, "{path}");
    assert_eq!(r.headers.get("content-type").map(|v| v.as_bytes()), Some(&b"text/plain; charset=utf-8"[..]), "{path}");
    assert_eq!(r.body, "404 page not found\n", "{path}");
}

/// Asserts `r` is a server's own 404 `Status`.
fn assert_not_found_status(path: &str, r: &RawResponse) {
    assert_eq!(r.status, 404, "{path}");
    let status = r.json();
    assert_eq!(
        (&status["kind"], &status["reason"], &status["message"], &status["code"]),
        (&json!("Status"), &json!("NotFound"), &json!("the server could not find the requested resource"), &json!(404)),
        "{path}: {status}"
    );
}

async fn get(c: &Cluster, path: &str) -> RawResponse {
    c.request(Credentials::Admin, "GET", path, None, "").await
}

async fn unknown_groups_reach_the_end_of_the_chain(backend: Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let aggregator = crate::aggregation::config(dir.path());
    let c = Cluster::start_with(Options { backend: Some(backend), aggregator: Some(aggregator), ..Options::default() })
        .await;

    for path in [
        "/apis/nope.example.com",
        "/apis/nope.example.com/",
        "/apis/nope.example.com/v1",
        "/apis/nope.example.com/v1/widgets",
        "/apis/nope.example.com/v1/namespaces/default/widgets/w",
        "/nope",
    ] {
        let r = get(&c, path).await;
        assert_end_of_chain(path, &r);
    }
    // Writes go the same way.
    let r =
        c.request(Credentials::Admin, "POST", "/apis/nope.example.com/v1/namespaces/default/widgets", JSON, "{}").await;
    assert_end_of_chain("POST widgets", &r);

    // Below a group the built-in API serves, the 404 is its own.
    for path in [
        "/api/v1/namespaces/default/widgets",
        "/apis/apps/v9",
        "/apis/apps/v9/deployments",
        "/apis/authorization.k8s.io/v1/widgets",
    ] {
        let r = get(&c, path).await;
        assert_not_found_status(path, &r);
    }

    // A custom resource group is the apiextensions server's; a version it does not serve
    // goes on to the end of the chain (kube's CRD handler delegates it).
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let r = c.request(Credentials::Admin, "POST", path, JSON, crd.to_string()).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let served = wait_for(Duration::from_secs(30), async || {
        c.request(Credentials::Admin, "GET", "/apis/example.com/v1/widgets", None, "").await.status == 200
    })
    .await;
    assert!(served, "the custom resource is served");
    assert_eq!(get(&c, "/apis/example.com").await.status, 200);
    for path in ["/apis/example.com/v2/widgets", "/apis/example.com/v2"] {
        assert_end_of_chain(path, &get(&c, path).await);
    }

    // kubectl reads either answer as kube's NotFound.
    for path in ["/apis/nope.example.com/v1", "/api/v1/namespaces/default/widgets"] {
        let out = c.kubectl(&["get", "--raw", path]).await;
        assert!(!out.ok, "{path}");
        assert!(
            out.stderr.contains("Error from server (NotFound): the server could not find the requested resource"),
            "{path}: {}",
            out.stderr
        );
    }
}
