//! CustomResourceDefinitions served by the apiextensions server behind the built-in API, driven
//! by kubectl: definitions validated with kube's messages, their status (`kubectl wait --for
//! condition=established`), custom resources with every verb, printer columns, selectors,
//! `/status` and `/scale`, discovery (`api-resources`, categories, short names), `explain`,
//! schema pruning, defaulting and validation, and definitions appearing and disappearing
//! without a restart. Stored keys are read back to check kube's layout.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{both_backends, wait_for, Backend, Cluster, Credentials, Options};

both_backends!(
    custom_resources_are_served_with_every_verb,
    versions_are_served_from_one_storage_version,
    definitions_are_validated_as_kube_does,
    writes_go_through_the_schema,
    definitions_come_and_go_without_restart,
    conflicting_names_are_not_accepted
);

async fn cluster(backend: Backend) -> Cluster {
    Cluster::start_with(Options { backend: Some(backend), crds: true, ..Options::default() }).await
}

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    selectableFields:
    - jsonPath: .spec.color
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Ready
      type: string
      priority: 1
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            x-kubernetes-validations:
            - rule: "!has(self.size) || self.size != '0cm'"
              message: a widget cannot have zero size
            - rule: "!has(oldSelf.size) || has(self.size)"
              messageExpression: "'size ' + oldSelf.size + ' cannot be removed'"
              reason: FieldValueForbidden
            required: [color]
            properties:
              color:
                type: string
                description: The widget's color.
                enum: [red, blue, green]
              replicas:
                type: integer
                minimum: 0
                maximum: 10
                default: 1
              size:
                type: string
                pattern: '^[0-9]+(cm|m)$'
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
"#;

fn write(c: &Cluster, name: &str, text: &str) -> String {
    let path = c.dir.path().join(name);
    std::fs::write(&path, text).expect("write manifest");
    path.to_string_lossy().into_owned()
}

async fn must_create_widgets(c: &Cluster) {
    let file = write(c, "widgets.yaml", WIDGETS);
    c.must_kubectl(&["create", "-f", &file]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;
}

fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().map(|l| l.split_whitespace().map(String::from).collect()).collect()
}

async fn custom_resources_are_served_with_every_verb(backend: Backend) {
    let c = cluster(backend).await;
    must_create_widgets(&c).await;

    // The server maintains the definition's status.
    let crd: Value = serde_json::from_str(&c.must_kubectl(&["get", "crd", "widgets.example.com", "-o", "json"]).await)
        .expect("json");
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    let conditions = crd["status"]["conditions"].as_array().expect("conditions");
    let reason = |t: &str| conditions.iter().find(|c| c["type"] == t).map(|c| c["reason"].clone());
    assert_eq!(reason("NamesAccepted"), Some(json!("NoConflicts")));
    assert_eq!(reason("Established"), Some(json!("InitialNamesAccepted")));

    // Discovery: kubectl finds the kind by plural, singular, short name and category.
    let resources = c.must_kubectl(&["api-resources", "--api-group", "example.com"]).await;
    let row = rows(&resources).into_iter().find(|r| r[0] == "widgets").expect("widgets row");
    assert_eq!(row, ["widgets", "wd", "example.com/v1", "true", "Widget"]);

    c.must_kubectl(&["create", "ns", "t"]).await;
    let w1 = write(
        &c,
        "w1.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: t, labels: {tier: a}}\n\
         spec: {color: red, replicas: 2, size: 10cm}\n",
    );
    c.must_kubectl(&["create", "-f", &w1]).await;
    let w2 = write(
        &c,
        "w2.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2, namespace: t}\nspec: {color: blue}\n",
    );
    c.must_kubectl(&["create", "-f", &w2]).await;

    // Stored as kube stores it: JSON under /registry/<group>/<plural>/<namespace>/<name>, the
    // default applied, generation 1.
    let stored = c.storage_get("/registry/example.com/widgets/t/w2").await.expect("stored key");
    let stored: Value = serde_json::from_slice(&stored).expect("stored JSON");
    assert_eq!(stored["apiVersion"], "example.com/v1");
    assert_eq!(stored["spec"]["replicas"], 1);
    assert_eq!(stored["metadata"]["generation"], 1);

    // Printer columns, the priority column only with -o wide, short names.
    let table = rows(&c.must_kubectl(&["get", "wd", "-n", "t"]).await);
    assert_eq!(table[0], ["NAME", "COLOR", "REPLICAS", "AGE"]);
    assert_eq!(table[1][..3], ["w1", "red", "2"]);
    assert_eq!(table[2][..3], ["w2", "blue", "1"]);
    let wide = rows(&c.must_kubectl(&["get", "widgets", "-n", "t", "-o", "wide"]).await);
    assert_eq!(wide[0], ["NAME", "COLOR", "REPLICAS", "READY", "AGE"]);
    // A column whose path finds nothing is an empty cell.
    assert_eq!(wide[1].len(), 4, "{wide:?}");

    // Category all includes the kind.
    let all = c.must_kubectl(&["get", "all", "-n", "t"]).await;
    assert!(all.contains("widget.example.com/w1"), "{all}");

    // Selectors: labels, metadata.name and the definition's selectable field.
    let by_label = c.must_kubectl(&["get", "widgets", "-n", "t", "-l", "tier=a", "-o", "name"]).await;
    assert_eq!(by_label.trim(), "widget.example.com/w1");
    let by_field =
        c.must_kubectl(&["get", "widgets", "-n", "t", "--field-selector", "spec.color=blue", "-o", "name"]).await;
    assert_eq!(by_field.trim(), "widget.example.com/w2");
    let bad = c.kubectl(&["get", "widgets", "-n", "t", "--field-selector", "spec.size=1"]).await;
    assert!(!bad.ok);
    assert!(bad.stderr.contains("field label not supported: spec.size"), "{}", bad.stderr);

    // Merge patch bumps the generation; a strategic merge patch is refused with kube's 415.
    c.must_kubectl(&["patch", "widget", "w1", "-n", "t", "--type", "merge", "-p", r#"{"spec":{"color":"green"}}"#])
        .await;
    let w: Value =
        serde_json::from_str(&c.must_kubectl(&["get", "widget", "w1", "-n", "t", "-o", "json"]).await).expect("json");
    assert_eq!(w["spec"]["color"], "green");
    assert_eq!(w["metadata"]["generation"], 2);
    let smp = c
        .kubectl(&["patch", "widget", "w1", "-n", "t", "--type", "strategic", "-p", r#"{"spec":{"color":"red"}}"#])
        .await;
    assert!(!smp.ok);
    assert!(
        smp.stderr.contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"),
        "{}",
        smp.stderr
    );

    // /status: the main resource ignores status; /status changes only status.
    let path = "/apis/example.com/v1/namespaces/t/widgets/w1/status";
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"color": "red"}, "status": {"replicas": 2, "selector": "tier=a",
        "conditions": [{"type": "Ready", "status": "True"}]}});
    let resp = c.request(Credentials::Admin, "PUT", path, Some("application/json"), body.to_string()).await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let after = resp.json();
    assert_eq!(after["spec"]["color"], "green", "a status write keeps the spec");
    assert_eq!(after["status"]["replicas"], 2);
    assert_eq!(after["metadata"]["generation"], 2, "a status write does not bump the generation");
    let wide = rows(&c.must_kubectl(&["get", "widget", "w1", "-n", "t", "-o", "wide"]).await);
    assert_eq!(wide[1][..4], ["w1", "green", "2", "True"]);

    // /scale: kubectl scale writes spec.replicas through it.
    c.must_kubectl(&["scale", "widget", "w1", "-n", "t", "--replicas", "5"]).await;
    let scale =
        c.request(Credentials::Admin, "GET", "/apis/example.com/v1/namespaces/t/widgets/w1/scale", None, "").await;
    let scale = scale.json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"], json!({"replicas": 2, "selector": "tier=a"}));

    // Watch sees changes.
    let list = c.request(Credentials::Admin, "GET", "/apis/example.com/v1/namespaces/t/widgets", None, "").await.json();
    assert_eq!(list["kind"], "WidgetList");
    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    c.must_kubectl(&["delete", "widget", "w2", "-n", "t"]).await;
    let watch = c
        .request(
            Credentials::Admin,
            "GET",
            &format!("/apis/example.com/v1/namespaces/t/widgets?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
            None,
            "",
        )
        .await;
    let text = String::from_utf8_lossy(&watch.body);
    assert!(text.contains("\"type\":\"DELETED\"") && text.contains("\"name\":\"w2\""), "{text}");

    // PartialObjectMetadata and deletecollection.
    let meta = c
        .request_with_accept(
            Credentials::Admin,
            "/apis/example.com/v1/namespaces/t/widgets/w1",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .await
        .json();
    assert_eq!(meta["kind"], "PartialObjectMetadata");
    c.must_kubectl(&["delete", "widgets", "--all", "-n", "t"]).await;
    assert!(c.storage_get("/registry/example.com/widgets/t/w1").await.is_none());
}

async fn definitions_are_validated_as_kube_does(backend: Backend) {
    let c = cluster(backend).await;
    let bad = WIDGETS
        .replace("name: widgets.example.com", "name: gadgets.example.com")
        .replace("scope: Namespaced", "scope: Galaxy")
        .replace("    storage: true", "    storage: false");
    let file = write(&c, "bad.yaml", &bad);
    let out = c.kubectl(&["create", "-f", &file]).await;
    assert!(!out.ok);
    let err = out.stderr;
    assert!(err.contains("The CustomResourceDefinition \"gadgets.example.com\" is invalid"), "{err}");
    assert!(
        err.contains(
            "metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"
        ),
        "{err}"
    );
    assert!(
        err.contains("spec.scope: Unsupported value: \"Galaxy\": supported values: \"Cluster\", \"Namespaced\""),
        "{err}"
    );
    assert!(err.contains("must have exactly one version marked as storage version"), "{err}");

    let untyped = WIDGETS.replace("              color:\n                type: string\n", "              color:\n");
    let file = write(&c, "untyped.yaml", &untyped);
    let out = c.kubectl(&["create", "-f", &file]).await;
    assert!(
        out.stderr.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[color].type: Required value: must not be empty for specified object fields"),
        "{}",
        out.stderr
    );

    let bad_rule = WIDGETS.replace("rule: \"!has(self.size) || self.size != '0cm'\"", "rule: \"self.size >\"");
    let file = write(&c, "bad-rule.yaml", &bad_rule);
    let out = c.kubectl(&["create", "-f", &file]).await;
    assert!(
        out.stderr.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.size >\": compilation failed"),
        "{}",
        out.stderr
    );

    let protected = WIDGETS.replace("example.com", "things.k8s.io");
    let file = write(&c, "protected.yaml", &protected);
    let out = c.kubectl(&["create", "-f", &file]).await;
    assert!(
        out.stderr.contains("metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"),
        "{}",
        out.stderr
    );
    // A schema nested deeper than any object needs is refused, not walked.
    let mut deep = json!({"type": "string"});
    for _ in 0..55 {
        deep = json!({"type": "object", "properties": {"a": deep}});
    }
    let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "deeps.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "deeps", "kind": "Deep"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": deep}}]}});
    let resp = c
        .request(
            Credentials::Admin,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some("application/json"),
            body.to_string(),
        )
        .await;
    assert_eq!(resp.status, 422, "{}", String::from_utf8_lossy(&resp.body));
    let message = resp.json()["message"].as_str().unwrap_or("").to_string();
    assert!(
        message.contains(
            "spec.versions[0].schema.openAPIV3Schema: Forbidden: must not be nested more than 48 levels deep"
        ),
        "{message}"
    );

    // Nothing was written.
    let crds = c.must_kubectl(&["get", "crd", "-o", "name"]).await;
    assert!(crds.trim().is_empty(), "{crds}");
}

async fn writes_go_through_the_schema(backend: Backend) {
    let c = cluster(backend).await;
    must_create_widgets(&c).await;
    let invalid = write(
        &c,
        "invalid.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad, namespace: default}\n\
         spec: {color: pink, replicas: 20, size: big, tags: [a, a], ports: [{name: x, port: 1}, {name: x, port: 2}]}\n",
    );
    let out = c.kubectl(&["create", "-f", &invalid]).await;
    assert!(!out.ok);
    let err = out.stderr;
    assert!(err.contains("The Widget \"bad\" is invalid"), "{err}");
    for cause in [
        "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\", \"green\"",
        "spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10",
        "spec.size: Invalid value: \"big\": spec.size in body should match '^[0-9]+(cm|m)$'",
        "spec.tags[1]: Duplicate value: \"a\"",
        "spec.ports[1]: Duplicate value: {\"name\":\"x\"}",
    ] {
        assert!(err.contains(cause), "missing {cause:?} in {err}");
    }

    // CEL rules, transition rules included.
    let zero = write(&c, "zero.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: z, namespace: default}\nspec: {color: red, size: 0cm}\n");
    let out = c.kubectl(&["create", "-f", &zero]).await;
    assert!(out.stderr.contains("spec: Invalid value: \"object\": a widget cannot have zero size"), "{}", out.stderr);
    let sized = write(&c, "sized.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: s, namespace: default}\nspec: {color: red, size: 1m}\n");
    c.must_kubectl(&["create", "-f", &sized]).await;
    let out =
        c.kubectl(&["patch", "widget", "s", "--type", "json", "-p", r#"[{"op":"remove","path":"/spec/size"}]"#]).await;
    assert!(!out.ok);
    assert!(out.stderr.contains("spec: Forbidden: size 1m cannot be removed"), "{}", out.stderr);
    c.must_kubectl(&["patch", "widget", "s", "--type", "merge", "-p", r#"{"spec":{"size":"2m"}}"#]).await;

    // Unknown fields: refused with Strict (kubectl's default), dropped with a warning
    // otherwise, kept under x-kubernetes-preserve-unknown-fields.
    let unknown = write(
        &c,
        "unknown.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: u, namespace: default}\n\
         spec: {color: red, bogus: 1, extra: {anything: {goes: true}}}\n",
    );
    let out = c.kubectl(&["create", "-f", &unknown]).await;
    assert!(!out.ok);
    assert!(out.stderr.contains("strict decoding error: unknown field \"spec.bogus\""), "{}", out.stderr);
    let out = c.kubectl(&["create", "-f", &unknown, "--validate=warn"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stderr.contains("unknown field \"spec.bogus\""), "{}", out.stderr);
    let u: Value = serde_json::from_str(&c.must_kubectl(&["get", "widget", "u", "-o", "json"]).await).expect("json");
    assert!(u["spec"].get("bogus").is_none());
    assert_eq!(u["spec"]["extra"]["anything"]["goes"], true);
    assert_eq!(u["spec"]["replicas"], 1, "defaulted");

    // kubectl explain reads the version's schema from OpenAPI v3.
    let explain = c.must_kubectl(&["explain", "widgets.spec"]).await;
    assert!(explain.contains("What the widget should be."), "{explain}");
    assert!(explain.contains("color"), "{explain}");
}

async fn definitions_come_and_go_without_restart(backend: Backend) {
    let c = cluster(backend).await;
    must_create_widgets(&c).await;
    let groups = c.request(Credentials::Admin, "GET", "/apis", None, "").await.json();
    assert!(groups["groups"].as_array().expect("groups").iter().any(|g| g["name"] == "example.com"), "{groups}");
    let group = c.request(Credentials::Admin, "GET", "/apis/example.com", None, "").await;
    assert_eq!(group.status, 200);
    assert_eq!(group.json()["preferredVersion"]["groupVersion"], "example.com/v1");
    let index = c.request(Credentials::Admin, "GET", "/openapi/v3", None, "").await.json();
    assert!(index["paths"].get("apis/example.com/v1").is_some(), "{index}");

    // Deleting the definition deletes its resources first (the cleanup finalizer), then it.
    let w = write(
        &c,
        "w.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {color: red}\n",
    );
    c.must_kubectl(&["create", "-f", &w]).await;
    assert!(c.storage_get("/registry/example.com/widgets/default/w").await.is_some());
    c.must_kubectl(&["delete", "crd", "widgets.example.com", "--timeout=30s"]).await;
    assert!(c.storage_get("/registry/example.com/widgets/default/w").await.is_none(), "the resources went first");
    assert!(c
        .storage_get("/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com")
        .await
        .is_none());
    let gone = wait_for(Duration::from_secs(10), async || {
        c.request(Credentials::Admin, "GET", "/apis/example.com/v1/widgets", None, "").await.status == 404
    })
    .await;
    assert!(gone, "the resources of a deleted definition are no longer served");
    let groups = c.request(Credentials::Admin, "GET", "/apis", None, "").await.json();
    assert!(!groups["groups"].as_array().expect("groups").iter().any(|g| g["name"] == "example.com"));
}

async fn conflicting_names_are_not_accepted(backend: Backend) {
    let c = cluster(backend).await;
    must_create_widgets(&c).await;
    let other = WIDGETS
        .replace("widgets.example.com", "gizmos.example.com")
        .replace("plural: widgets", "plural: gizmos")
        .replace("singular: widget", "singular: gizmo");
    let file = write(&c, "gizmos.yaml", &other);
    c.must_kubectl(&["create", "-f", &file]).await;
    let said = wait_for(Duration::from_secs(10), async || {
        let out = c.must_kubectl(&["get", "crd", "gizmos.example.com", "-o", "json"]).await;
        let crd: Value = serde_json::from_str(&out).expect("json");
        crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| {
            c["type"] == "NamesAccepted"
                && c["status"] == "False"
                && c["reason"] == "ShortNamesConflict"
                && c["message"] == "\"wd\" is already in use"
        })
    })
    .await;
    assert!(said, "the conflict is reported in the conditions");
    let established = c
        .must_kubectl(&[
            "get",
            "crd",
            "gizmos.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].reason}",
        ])
        .await;
    assert_eq!(established, "NotAccepted");
    let resp = c.request(Credentials::Admin, "GET", "/apis/example.com/v1/gizmos", None, "").await;
    assert_eq!(resp.status, 404, "a definition whose names are not accepted is not served");
}

async fn versions_are_served_from_one_storage_version(backend: Backend) {
    let c = cluster(backend).await;
    let two = WIDGETS.replace(
        "  versions:\n  - name: v1\n",
        "  versions:\n  - name: v1beta1\n    served: true\n    storage: false\n    deprecated: true\n    \
         deprecationWarning: example.com/v1beta1 Widget is old\n    schema:\n      openAPIV3Schema:\n        \
         type: object\n        x-kubernetes-preserve-unknown-fields: true\n  - name: v1\n",
    );
    let file = write(&c, "two.yaml", &two);
    c.must_kubectl(&["create", "-f", &file]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;

    // Written through the deprecated version: a warning, stored in the storage version.
    let body = json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "old"},
        "spec": {"color": "red"}});
    let resp = c
        .request(
            Credentials::Admin,
            "POST",
            "/apis/example.com/v1beta1/namespaces/default/widgets",
            Some("application/json"),
            body.to_string(),
        )
        .await;
    assert_eq!(resp.status, 201, "{}", String::from_utf8_lossy(&resp.body));
    let warning = resp.headers.get("warning").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert_eq!(warning, "299 - \"example.com/v1beta1 Widget is old\"");
    assert_eq!(resp.json()["apiVersion"], "example.com/v1beta1");
    let stored: Value =
        serde_json::from_slice(&c.storage_get("/registry/example.com/widgets/default/old").await.expect("stored"))
            .expect("json");
    assert_eq!(stored["apiVersion"], "example.com/v1");

    // Read in either version; the preferred (v1) one is what kubectl uses.
    let v1 =
        c.request(Credentials::Admin, "GET", "/apis/example.com/v1/namespaces/default/widgets/old", None, "").await;
    assert_eq!(v1.json()["apiVersion"], "example.com/v1");
    let group = c.request(Credentials::Admin, "GET", "/apis/example.com", None, "").await.json();
    assert_eq!(group["preferredVersion"]["version"], "v1");
    assert_eq!(group["versions"].as_array().map(Vec::len), Some(2));

    // Defaults apply on read too: an object stored without one is served with it.
    let mut raw = stored.clone();
    raw["metadata"]["name"] = "raw".into();
    raw["spec"] = json!({"color": "blue"});
    c.storage_put("/registry/example.com/widgets/default/raw", serde_json::to_vec(&raw).expect("json")).await;
    let read =
        c.request(Credentials::Admin, "GET", "/apis/example.com/v1/namespaces/default/widgets/raw", None, "").await;
    assert_eq!(read.json()["spec"]["replicas"], 1);
}
