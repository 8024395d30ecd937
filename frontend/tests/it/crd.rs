//! CustomResourceDefinitions served by the apiextensions server behind the built-in API, driven
//! by kubectl: definitions validated with kube's messages, their status (`kubectl wait --for
//! condition=established`), custom resources with every verb, printer columns, selectors,
//! `/status` and `/scale`, discovery (`api-resources`, categories, short names), `explain`,
//! schema pruning, defaulting and validation, and definitions appearing and disappearing
//! without a restart. Stored keys are read back to check kube's layout.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{both_backends, in_memory, wait_for, Backend, Cluster, Credentials, Options};

both_backends!(
    custom_resources_are_served_with_every_verb,
    versions_are_served_from_one_storage_version,
    definitions_are_validated_as_kube_does,
    writes_go_through_the_schema,
    definitions_come_and_go_without_restart,
    conflicting_names_are_not_accepted,
    definitions_follow_the_lifecycle_of_kube,
    definitions_in_built_in_groups_are_shadowed,
    rules_are_typed_with_schema_objects_and_null,
    openapi_v2_carries_custom_resources,
    a_large_definition_is_served_and_enforced,
    rules_use_the_kubernetes_network_and_text_libraries,
    a_changed_definition_is_watched_in_its_new_form
);

in_memory!(rules_use_the_kubernetes_cel_libraries);

/// The path of definition `name`, for polls read in-process (kubectl's reading of definitions
/// is checked where a test lists them).
fn definition_path(name: &str) -> String {
    format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
}

pub(crate) async fn cluster(backend: Backend) -> Cluster {
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

pub(crate) fn write(c: &Cluster, name: &str, text: &str) -> String {
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
        out.stderr.contains("spec.validation.openAPIV3Schema.properties[spec].properties[color].type: Required value: must not be empty for specified object fields"),
        "{}",
        out.stderr
    );

    let bad_rule = WIDGETS.replace("rule: \"!has(self.size) || self.size != '0cm'\"", "rule: \"self.size >\"");
    let file = write(&c, "bad-rule.yaml", &bad_rule);
    let out = c.kubectl(&["create", "-f", &file]).await;
    assert!(
        out.stderr.contains("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.size >\", Message:\"a widget cannot have zero size\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:12: Syntax error: mismatched input '<EOF>'"),
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
        message.contains("spec.validation.openAPIV3Schema: Forbidden: must not be nested more than 48 levels deep"),
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
        let crd = c.must_get(&definition_path("gizmos.example.com")).await;
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

    // Listed twice: the second LIST hands out objects read unchanged the first time as stored,
    // and still defaults the one stored without its default.
    for _ in 0..2 {
        let list = c
            .request(Credentials::Admin, "GET", "/apis/example.com/v1/namespaces/default/widgets", None, "")
            .await
            .json();
        let items = list["items"].as_array().expect("items");
        let specs: Vec<(&Value, &Value)> = items.iter().map(|i| (&i["metadata"]["name"], &i["spec"])).collect();
        assert_eq!(specs.len(), 2, "{list}");
        assert_eq!(specs[0].0, "old");
        assert_eq!(specs[0].1["color"], "red");
        assert_eq!(specs[1], (&json!("raw"), &json!({"color": "blue", "replicas": 1})));
        assert!(items
            .iter()
            .all(|i| i["apiVersion"] == "example.com/v1" && i["metadata"]["resourceVersion"].is_string()));
    }
}

/// The definition of a preserve-unknown-fields `Thing` in `group` (namespaced), and its
/// annotation when the group is protected.
fn thing(group: &str, plural: &str, kind: &str) -> String {
    let approval = if group.ends_with(".k8s.io") {
        "  annotations: {api-approved.kubernetes.io: \"https://github.com/kubernetes/kubernetes/pull/1\"}\n"
    } else {
        ""
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.{group}\n\
         {approval}spec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: {plural}, singular: {singular}, kind: {kind}}}\n\
         \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: \
         {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
        singular = kind.to_lowercase()
    )
}

fn condition(crd: &Value, type_: &str) -> (String, String, String) {
    let c = crd["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == type_);
    let field = |k: &str| c.and_then(|c| c[k].as_str()).unwrap_or("").to_string();
    (field("status"), field("reason"), field("message"))
}

async fn definitions_follow_the_lifecycle_of_kube(backend: Backend) {
    let c = cluster(backend).await;
    must_create_widgets(&c).await;

    // Deleting a namespace deletes its custom resources before the namespace goes.
    c.must_kubectl(&["create", "namespace", "team"]).await;
    let w = write(
        &c,
        "team.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: team}\nspec: {color: red}\n",
    );
    c.must_kubectl(&["create", "-f", &w]).await;
    c.must_kubectl(&["delete", "namespace", "team", "--timeout=30s"]).await;
    assert!(c.storage_get("/registry/example.com/widgets/team/w").await.is_none(), "the namespace's widget went");
    assert!(c.storage_get("/registry/namespaces/team").await.is_none(), "and then the namespace");

    // While the definition terminates (a widget's finalizer holds it), creates are refused
    // with kube's 405; reads still work.
    let held = write(
        &c,
        "held.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: held, finalizers: [example.com/hold]}\n\
         spec: {color: blue}\n",
    );
    c.must_kubectl(&["create", "-f", &held]).await;
    c.must_kubectl(&["delete", "crd", "widgets.example.com", "--wait=false"]).await;
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "late"},
        "spec": {"color": "red"}});
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let refused = wait_for(Duration::from_secs(10), async || {
        let resp = c.request(Credentials::Admin, "POST", path, Some("application/json"), body.to_string()).await;
        resp.status == 405
    })
    .await;
    assert!(refused, "creates are refused while the definition terminates");
    let resp = c.request(Credentials::Admin, "POST", path, Some("application/json"), body.to_string()).await;
    let status = resp.json();
    assert_eq!(status["reason"], "MethodNotAllowed", "{status}");
    assert_eq!(status["message"], "create not allowed while custom resource definition is terminating");
    let got = c.request(Credentials::Admin, "GET", &format!("{path}/held"), None, "").await;
    assert_eq!(got.status, 200, "reads are served while the definition terminates");
    let crd: Value = serde_json::from_str(&c.must_kubectl(&["get", "crd", "widgets.example.com", "-o", "json"]).await)
        .expect("json");
    assert_eq!(
        condition(&crd, "Terminating"),
        ("True".into(), "InstanceDeletionInProgress".into(), "CustomResource deletion is in progress".into())
    );
    c.must_kubectl(&["patch", "widget", "held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]).await;
    let gone = wait_for(Duration::from_secs(10), async || {
        c.request(Credentials::Admin, "GET", &definition_path("widgets.example.com"), None, "").await.status == 404
    })
    .await;
    assert!(gone, "the definition goes once its last resource is gone");
}

/// kube-apiserver's built-in API answers every path below its groups, so a definition in a
/// built-in group is created, accepted and established like any other, and shadowed: its
/// resources are 404 in a version the built-in API serves and in one it does not, the built-in
/// versions' discovery and OpenAPI v3 documents stay the built-in API's own, and a version only
/// the definition has is listed (with its resources in aggregated discovery and its own v3
/// document) ahead of the built-in ones, by its APIService's priority.
async fn definitions_in_built_in_groups_are_shadowed(backend: Backend) {
    // The aggregator in front, as the binary chains the servers: it lists a group's versions
    // by their APIServices.
    let dir = tempfile::tempdir().expect("tempdir");
    let aggregator = crate::aggregation::config(dir.path());
    let c = Cluster::start_with(Options {
        backend: Some(backend),
        crds: true,
        aggregator: Some(aggregator),
        ..Options::default()
    })
    .await;
    let ingresses = write(&c, "ingresses.yaml", &thing("networking.k8s.io", "ingresses", "Ingress"));
    let gateways = write(&c, "gateways.yaml", &thing("networking.k8s.io", "edgegateways", "EdgeGateway"));
    let routes = write(
        &c,
        "routes.yaml",
        &thing("networking.k8s.io", "edgeroutes", "EdgeRoute").replace("- name: v1\n", "- name: v1alpha9\n"),
    );
    c.must_kubectl(&["create", "-f", &ingresses, "-f", &gateways, "-f", &routes]).await;
    for crd in ["ingresses", "edgegateways", "edgeroutes"] {
        let crd = format!("crd/{crd}.networking.k8s.io");
        c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", &crd]).await;
    }
    // Taking the built-in ingresses' names is no conflict: only definitions count.
    let crd = c.must_get(&definition_path("ingresses.networking.k8s.io")).await;
    assert_eq!(condition(&crd, "NamesAccepted"), ("True".into(), "NoConflicts".into(), "no conflicts found".into()));
    let ing = c.request(Credentials::Admin, "GET", "/apis/networking.k8s.io/v1/ingresses", None, "").await;
    assert_eq!(ing.json()["kind"], "IngressList", "the built-in resource is still the one served");

    // Every resource path of the definitions is the built-in API's 404, as for a resource it
    // does not know.
    let unknown =
        c.request(Credentials::Admin, "GET", "/apis/networking.k8s.io/v1/namespaces/default/nothings", None, "").await;
    assert_eq!(unknown.status, 404);
    let body = json!({"apiVersion": "networking.k8s.io/v1", "kind": "EdgeGateway", "metadata": {"name": "edge"}});
    for (method, path) in [
        ("GET", "/apis/networking.k8s.io/v1/namespaces/default/edgegateways"),
        ("POST", "/apis/networking.k8s.io/v1/namespaces/default/edgegateways"),
        ("GET", "/apis/networking.k8s.io/v1alpha9/namespaces/default/edgeroutes"),
        ("POST", "/apis/networking.k8s.io/v1alpha9/namespaces/default/edgeroutes"),
        ("GET", "/apis/networking.k8s.io/v1alpha9/edgeroutes"),
    ] {
        let resp = c.request(Credentials::Admin, method, path, Some("application/json"), body.to_string()).await;
        assert_eq!(resp.status, 404, "{method} {path}");
        assert_eq!(resp.json(), unknown.json(), "{method} {path}");
    }
    let alpha = c.request(Credentials::Admin, "GET", "/apis/networking.k8s.io/v1alpha9", None, "").await;
    assert_eq!(alpha.status, 404, "the built-in API has no such version");
    assert_eq!(alpha.json()["reason"], "NotFound");

    // The built-in version's list is the built-in API's alone.
    let names = |list: &Value| -> Vec<String> {
        list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(String::from))
            .collect()
    };
    let v1 = c.must_get("/apis/networking.k8s.io/v1").await;
    let v1_names = names(&v1);
    assert_eq!(v1_names.iter().filter(|n| *n == "ingresses").count(), 1, "{v1}");
    assert!(!v1_names.iter().any(|n| n.starts_with("edge")), "{v1}");

    // The version only a definition has is listed first (its APIService's version priority,
    // 100, is above the built-in one's, 15), in the group document and in `/apis`.
    let both = json!([
        {"groupVersion": "networking.k8s.io/v1alpha9", "version": "v1alpha9"},
        {"groupVersion": "networking.k8s.io/v1", "version": "v1"}
    ]);
    let listed =
        wait_for(Duration::from_secs(10), async || c.must_get("/apis/networking.k8s.io").await["versions"] == both)
            .await;
    assert!(listed, "{}", c.must_get("/apis/networking.k8s.io").await);
    let group = c.must_get("/apis/networking.k8s.io").await;
    assert_eq!(group["preferredVersion"], both[0], "{group}");
    let groups = c.request(Credentials::Admin, "GET", "/apis", None, "").await.json();
    let of_group: Vec<&Value> =
        groups["groups"].as_array().expect("groups").iter().filter(|g| g["name"] == "networking.k8s.io").collect();
    assert_eq!(of_group.len(), 1, "a group served by both servers is listed once: {groups}");
    assert_eq!(of_group[0]["versions"], both, "{groups}");

    // Aggregated discovery takes each version from one source, the built-in API first: the
    // definition's version with its resources, the built-in one without the definitions'.
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let doc = c.request_with_accept(Credentials::Admin, "/apis", accept).await.json();
    let item = doc["items"].as_array().expect("items").iter().find(|g| g["metadata"]["name"] == "networking.k8s.io");
    let versions = item.expect("networking.k8s.io")["versions"].as_array().expect("versions").clone();
    let version_names: Vec<&str> = versions.iter().filter_map(|v| v["version"].as_str()).collect();
    assert_eq!(version_names, ["v1alpha9", "v1"], "{doc}");
    let resources = |v: &Value| -> Vec<String> {
        v["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["resource"].as_str().map(String::from))
            .collect()
    };
    assert_eq!(resources(&versions[0]), ["edgeroutes"]);
    let built_in = resources(&versions[1]);
    assert_eq!(built_in.iter().filter(|n| *n == "ingresses").count(), 1, "{built_in:?}");
    assert!(!built_in.iter().any(|n| n == "edgegateways"), "{built_in:?}");
    let resources = c.must_kubectl(&["api-resources", "--api-group", "networking.k8s.io", "-o", "name"]).await;
    assert!(resources.lines().any(|l| l == "edgeroutes.networking.k8s.io"), "{resources}");
    assert!(!resources.lines().any(|l| l == "edgegateways.networking.k8s.io"), "{resources}");
    let created = c
        .kubectl(&[
            "create",
            "-f",
            &write(
                &c,
                "edge.yaml",
                "apiVersion: networking.k8s.io/v1alpha9\n\
        kind: EdgeRoute\nmetadata: {name: edge, namespace: default}\n",
            ),
        ])
        .await;
    assert!(!created.ok, "{}", created.stdout);
    assert!(created.stderr.contains("the server could not find the requested resource"), "{}", created.stderr);

    // OpenAPI v3: the built-in version's document is the built-in API's; the definition's
    // version has its own.
    let index = c.must_get("/openapi/v3").await;
    assert!(index["paths"]["apis/networking.k8s.io/v1alpha9"].is_object(), "{index}");
    let v1_doc = c.must_get("/openapi/v3/apis/networking.k8s.io/v1").await;
    let schemas = &v1_doc["components"]["schemas"];
    assert!(schemas.get("io.k8s.api.networking.v1.Ingress").is_some());
    assert!(!schemas.as_object().expect("schemas").keys().any(|k| k.ends_with(".EdgeGateway")));
    let alpha_doc = c.must_get("/openapi/v3/apis/networking.k8s.io/v1alpha9").await;
    assert!(alpha_doc["components"]["schemas"].get("io.k8s.networking.v1alpha9.EdgeRoute").is_some(), "{alpha_doc}");

    // OpenAPI v2 is merged as kube-aggregator merges it: the definitions' paths are added
    // where the built-in API has none, and a definition whose every path it has adds nothing.
    let v2 = wait_for(Duration::from_secs(10), async || {
        let doc = c.request(Credentials::Admin, "GET", "/openapi/v2", None, "").await.json();
        doc["definitions"].get("io.k8s.networking.v1alpha9.EdgeRoute").is_some()
    })
    .await;
    assert!(v2, "the v2 document carries the definitions' paths");
    let doc = c.request(Credentials::Admin, "GET", "/openapi/v2", None, "").await.json();
    assert!(doc["paths"].get("/apis/networking.k8s.io/v1/namespaces/{namespace}/edgegateways").is_some());
    let list = &doc["paths"]["/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses"]["get"];
    assert_eq!(list["responses"]["200"]["schema"]["$ref"], "#/definitions/io.k8s.api.networking.v1.IngressList");
    assert!(doc["definitions"].get("io.k8s.networking.v1.Ingress").is_none(), "the shadowed ingresses add nothing");
}

/// kube's name of a rule's `self` type (`selfType` and the clock's nanoseconds) made
/// `selfTypeN`.
fn generic_self_type(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("selfType") {
        out.push_str(&rest[..at + "selfType".len()]);
        rest = rest[at + "selfType".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push('N');
    }
    out.push_str(rest);
    out
}

/// Rules comparing a schema object with another type, or a string with `null`, are refused
/// as kube refuses them, naming the object's generated type; rules comparing objects of one
/// type, objects with `null` and selecting a reserved word's field are admitted and run.
async fn rules_are_typed_with_schema_objects_and_null(backend: Backend) {
    let c = cluster(backend).await;
    let crd = |rules: &[&str]| {
        let rules: String = rules.iter().map(|r| format!("            - rule: \"{r}\"\n")).collect();
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: probes.example.com}}\n\
             spec:\n  group: example.com\n  scope: Namespaced\n  names: {{plural: probes, singular: probe, kind: Probe}}\n\
             \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n\
             \x20       type: object\n        properties:\n          spec:\n            type: object\n\
             \x20           properties:\n              name: {{type: string, maxLength: 64}}\n\
             \x20             template:\n                type: object\n\
             \x20               properties: {{namespace: {{type: string, maxLength: 64}}, image: {{type: string, maxLength: 64}}}}\n\
             \x20           x-kubernetes-validations:\n{rules}"
        )
    };
    let wrong = ["self.template == 1", "self.name != null"];
    let out = c.kubectl(&["apply", "-f", &write(&c, "wrong.yaml", &crd(&wrong))]).await;
    assert!(!out.ok);
    let cause = |i: usize, detail: &str| {
        format!(
            "* spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[{i}].rule: Invalid value: apiextensions.ValidationRule{{Rule:{:?}, Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: {detail}",
            wrong[i]
        )
    };
    assert_eq!(
        generic_self_type(out.stderr.trim()),
        [
            "The CustomResourceDefinition \"probes.example.com\" is invalid: ".to_string(),
            cause(0, "ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(selfTypeN.template, int)'\n | self.template == 1\n | ..............^"),
            cause(1, "ERROR: <input>:1:11: found no matching overload for '_!=_' applied to '(string, null)'\n | self.name != null\n | ..........^"),
        ]
        .join("\n")
    );

    let right = [
        "self.template != null && (!has(oldSelf.template) || self.template == oldSelf.template)",
        "!has(self.template.namespace) || self.template.namespace != 'kube-system'",
    ];
    c.must_kubectl(&["apply", "-f", &write(&c, "right.yaml", &crd(&right))]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/probes.example.com"]).await;
    let probe = |name: &str, namespace: &str, image: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Probe\nmetadata: {{name: {name}, namespace: default}}\n\
             spec: {{name: a, template: {{namespace: {namespace}, image: {image}}}}}\n"
        )
    };
    let out = c.kubectl(&["create", "-f", &write(&c, "system.yaml", &probe("p", "kube-system", "x"))]).await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains(&format!("spec: Invalid value: \"object\": failed rule: {}", right[1])),
        "a reserved word's field is read: {}",
        out.stderr
    );
    c.must_kubectl(&["create", "-f", &write(&c, "team.yaml", &probe("p", "team", "x"))]).await;
    let out = c.kubectl(&["apply", "-f", &write(&c, "changed.yaml", &probe("p", "team", "y"))]).await;
    assert!(!out.ok);
    assert!(out.stderr.contains(&format!("failed rule: {}", right[0])), "objects compare: {}", out.stderr);
}

async fn openapi_v2_carries_custom_resources(backend: Backend) {
    let c = cluster(backend).await;
    must_create_widgets(&c).await;
    let v2 = wait_for(Duration::from_secs(10), async || {
        let doc = c.request(Credentials::Admin, "GET", "/openapi/v2", None, "").await.json();
        doc["definitions"].get("com.example.v1.Widget").is_some()
    })
    .await;
    assert!(v2, "the v2 document names the custom resource");
    let doc = c.request(Credentials::Admin, "GET", "/openapi/v2", None, "").await.json();
    let widget = &doc["definitions"]["com.example.v1.Widget"];
    assert_eq!(widget["x-kubernetes-group-version-kind"][0]["kind"], "Widget");
    assert_eq!(
        widget["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let spec = &widget["properties"]["spec"];
    assert_eq!(spec["properties"]["replicas"]["maximum"], 10);
    assert_eq!(spec["required"], json!(["color"]));
    // Under preserve-unknown-fields v2 has no properties (kubectl could not read them).
    assert!(spec["properties"]["extra"].get("properties").is_none());
    assert!(doc["definitions"].get("com.example.v1.WidgetList").is_some());
    let path = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"];
    assert_eq!(path["get"]["operationId"], "readExampleComV1NamespacedWidget");
    assert_eq!(path["patch"]["x-kubernetes-action"], "patch");
    assert!(doc["paths"].get("/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale").is_some());
    // Built-in definitions are all still there.
    assert!(doc["definitions"].get("io.k8s.api.apps.v1.Deployment").is_some());

    // kubectl asks for the protobuf form only; it carries the kind too.
    let proto = c
        .request_with_accept(
            Credentials::Admin,
            "/openapi/v2",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .await;
    assert_eq!(proto.status, 200);
    assert!(proto.body.windows(22).any(|w| w == b"com.example.v1.Widget\x12"), "protobuf names the kind");

    // Gone with the definition.
    c.must_kubectl(&["delete", "crd", "widgets.example.com", "--timeout=30s"]).await;
    let gone = wait_for(Duration::from_secs(10), async || {
        let doc = c.request(Credentials::Admin, "GET", "/openapi/v2", None, "").await.json();
        doc["definitions"].get("com.example.v1.Widget").is_none()
    })
    .await;
    assert!(gone, "a deleted definition leaves the v2 document");
}

/// The large fixture (thousands of schema lines: an embedded pod template, quantities and
/// int-or-strings, list-map keys, CEL rules with transition rules), as a user of an operator
/// meets it: applied with kubectl, objects checked with kube's messages.
async fn a_large_definition_is_served_and_enforced(backend: Backend) {
    let c = cluster(backend).await;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/apiextensions/testdata");
    let crd = format!("{root}/large-crd.yaml");
    let object = format!("{root}/large-object.yaml");
    c.must_kubectl(&["apply", "--server-side", "-f", &crd]).await;
    c.must_kubectl(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=30s",
        "crd/databaseclusters.bench.ballast.dev",
    ])
    .await;
    c.must_kubectl(&["create", "-f", &object]).await;
    let got: Value =
        serde_json::from_str(&c.must_kubectl(&["get", "dbc", "orders", "-o", "json"]).await).expect("json");
    assert_eq!(got["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"], "orders-db");
    assert_eq!(got["spec"]["storage"]["size"], "200Gi");
    assert_eq!(got["spec"]["managed"]["roles"][1]["ensure"], "present", "defaults inside list-map items");
    assert_eq!(got["spec"]["template"]["spec"]["containers"][1]["ports"][0]["protocol"], "TCP");

    let text = std::fs::read_to_string(&object).expect("fixture");
    let bad = text
        .replace("name: orders\n", "name: bad\n")
        .replace("  instances: 3", "  instances: 2")
        .replace("- name: TZ", "- name: PGTZ")
        .replace("name: migrations", "name: postgres")
        .replace("size: 200Gi", "size: 200Gx")
        .replace("containerPort: 9187}", "containerPort: 9187}\n        - {name: dup, containerPort: 9187}");
    let file = write(&c, "bad.yaml", &bad);
    let out = c.kubectl(&["create", "-f", &file]).await;
    assert!(!out.ok);
    let err = out.stderr;
    for expected in [
        "spec.storage.size: Invalid value: \"200Gx\": spec.storage.size in body should match",
        "spec.template.spec.containers[0].ports[2]: Duplicate value: {\"containerPort\":9187,\"protocol\":\"TCP\"}",
        "spec: Invalid value: \"object\": maxSyncReplicas must be below instances (2)",
        "spec: Invalid value: \"object\": variables starting with PG are reserved",
        "spec.managed.roles[2].name: Forbidden: the postgres role is managed by the operator",
    ] {
        assert!(err.contains(expected), "{expected}\n{err}");
    }

    // A transition rule: the storage class cannot change.
    let out = c
        .kubectl(&["patch", "dbc", "orders", "--type=merge", "-p", r#"{"spec":{"storage":{"storageClass":"slow"}}}"#])
        .await;
    assert!(!out.ok);
    assert!(out.stderr.contains("spec.storage: Forbidden: storageClass is immutable"), "{}", out.stderr);
    c.must_kubectl(&["scale", "dbc", "orders", "--replicas=5"]).await;
    let instances = c.must_kubectl(&["get", "dbc", "orders", "-o", "jsonpath={.spec.instances}"]).await;
    assert_eq!(instances, "5");
}

const QUOTAS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: quotas.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: quotas, singular: quota, kind: Quota}
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
            x-kubernetes-validations:
            - rule: "isQuantity(self.memory) && quantity(self.memory).isLessThan(quantity('1Gi'))"
              message: memory must be a quantity under 1Gi
            - rule: "quantity(self.memory).add(quantity(self.cache)).compareTo(quantity('1536Mi')) <= 0"
              messageExpression: "'memory plus cache is %d'.format([quantity(self.memory).add(quantity(self.cache)).asInteger()])"
            - rule: "self.owner.lowerAscii() == self.owner && self.owner.split('@').size() == 2"
              message: owner must be a lower-case address
            - rule: "!has(self.steps) || (self.steps.isSorted() && self.steps.max() <= 10)"
              message: steps must be sorted and at most 10
            properties:
              steps: {type: array, maxItems: 16, items: {type: integer}}
              memory: {type: string, maxLength: 32}
              cache: {type: string, maxLength: 32}
              owner: {type: string, maxLength: 64}
"#;

/// Rules written with kube's quantity and lists libraries and the strings extension: an object that
/// breaks them is refused by kubectl with kube's 422 causes; one that keeps them is stored.
async fn rules_use_the_kubernetes_cel_libraries(backend: Backend) {
    let c = cluster(backend).await;
    let file = write(&c, "quotas.yaml", QUOTAS);
    c.must_kubectl(&["create", "-f", &file]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/quotas.example.com"]).await;
    let quota = |name: &str, spec: &str| {
        write(&c, &format!("{name}.yaml"), &format!("apiVersion: example.com/v1\nkind: Quota\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n"))
    };
    let good = quota("good", "{memory: 512Mi, cache: 0.5Gi, owner: ops@example.com, steps: [1, 2, 10]}");
    c.must_kubectl(&["create", "-f", &good]).await;

    let bad = quota("bad", "{memory: 2G, cache: 1G, owner: Ops, steps: [3, 1]}");
    let out = c.kubectl(&["create", "-f", &bad]).await;
    assert!(!out.ok);
    assert_eq!(
        out.stderr.trim(),
        "The Quota \"bad\" is invalid: \n\
         * spec: Invalid value: \"object\": memory must be a quantity under 1Gi\n\
         * spec: Invalid value: \"object\": memory plus cache is 3000000000\n\
         * spec: Invalid value: \"object\": owner must be a lower-case address\n\
         * spec: Invalid value: \"object\": steps must be sorted and at most 10",
    );

    // A library function's own error is the rule's evaluation error.
    let broken = quota("broken", "{memory: lots, cache: '1', owner: a@b}");
    let out = c.kubectl(&["create", "-f", &broken]).await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains("spec: Invalid value: \"object\": quantities must match the regular expression"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            " evaluating rule: quantity(self.memory).add(quantity(self.cache)).compareTo(quantity('1536Mi')) <= 0"
        ),
        "{}",
        out.stderr
    );
    let names = c.must_kubectl(&["get", "quotas", "-o", "name"]).await;
    assert_eq!(names.trim(), "quota.example.com/good");
}

const ROUTES: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: routes.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: routes, singular: route, kind: Route}
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
            x-kubernetes-validations:
            - rule: "!format.dns1123Label().validate(self.backend).hasValue()"
              message: backend must be a lowercase RFC 1123 label
            - rule: "isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https' && url(self.endpoint).getPort() != ''"
              message: endpoint must be an https URL with a port
            - rule: "isCIDR(self.subnet) && cidr(self.subnet).containsIP(self.gateway)"
              message: gateway must be inside subnet
            - rule: "ip(self.gateway).family() == 4 && !ip(self.gateway).isLoopback()"
              message: gateway must be a routable IPv4 address
            - rule: "self.image.find('[0-9]+[.][0-9]+$') != '' && self.image.findAll('/').size() <= 2"
              message: image must end in a version and have at most two slashes
            - rule: "self.tags.indexOf('default') == 0 && self.tags.lastIndexOf('default') == 0"
              message: the default tag comes first, once
            - rule: "sets.intersects(self.tags, ['blue', 'green'])"
              message: a tag must be blue or green
            properties:
              backend: {type: string, maxLength: 64}
              endpoint: {type: string, maxLength: 128}
              subnet: {type: string, maxLength: 64}
              gateway: {type: string, maxLength: 64}
              image: {type: string, maxLength: 128}
              tags: {type: array, maxItems: 8, items: {type: string, maxLength: 32}}
              version: {type: string, maxLength: 32}
"#;

/// Rules written with kube's format, URL, CIDR, IP, regex, list and set libraries (not semver:
/// kube adds it at the version served, for stored rules only, see `crd_cel_comprehensions`): an
/// object that keeps them is stored; one that breaks every rule is refused by kubectl with each
/// rule's message (not a format's own messages through `messageExpression`: kube's estimator
/// cannot size them, so it refuses such a message at admission); a library function's
/// own error (an address Go cannot read) is the rule's evaluation error in kube's words; a
/// constant pattern Go cannot compile refuses the definition.
async fn rules_use_the_kubernetes_network_and_text_libraries(backend: Backend) {
    let c = cluster(backend).await;
    let file = write(&c, "routes.yaml", ROUTES);
    c.must_kubectl(&["create", "-f", &file]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/routes.example.com"]).await;
    let route = |name: &str, spec: &str| {
        write(
            &c,
            &format!("{name}.yaml"),
            &format!("apiVersion: example.com/v1\nkind: Route\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n"),
        )
    };
    let good = route(
        "good",
        "{backend: web-1, endpoint: 'https://api.example.com:8443/v1?x=1', subnet: 10.0.0.0/24, gateway: 10.0.0.1, \
         image: 'registry.example.com/web:1.25', tags: [default, blue], version: v1.25}",
    );
    c.must_kubectl(&["create", "-f", &good]).await;

    let bad = route(
        "bad",
        "{backend: Web_1, endpoint: 'http://api.example.com/', subnet: 10.0.0.0/24, gateway: 10.0.1.1, \
         image: 'a/b/c/web:latest', tags: [red, default, default], version: '1.2'}",
    );
    let out = c.kubectl(&["create", "-f", &bad]).await;
    assert!(!out.ok);
    assert_eq!(
        out.stderr.trim(),
        "The Route \"bad\" is invalid: \n\
         * spec: Invalid value: \"object\": backend must be a lowercase RFC 1123 label\n\
         * spec: Invalid value: \"object\": endpoint must be an https URL with a port\n\
         * spec: Invalid value: \"object\": gateway must be inside subnet\n\
         * spec: Invalid value: \"object\": image must end in a version and have at most two slashes\n\
         * spec: Invalid value: \"object\": the default tag comes first, once\n\
         * spec: Invalid value: \"object\": a tag must be blue or green",
    );

    let broken = route(
        "broken",
        "{backend: web, endpoint: 'https://a:1/', subnet: 10.0.0.0/24, gateway: 10.0.0.256, image: 'web:1.0', \
         tags: [default, green], version: 1.30.0}",
    );
    let out = c.kubectl(&["create", "-f", &broken]).await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            "spec: Invalid value: \"object\": IP Address \"10.0.0.256\" parse error during conversion from \
             string: ParseAddr(\"10.0.0.256\"): IPv4 field has value >255 evaluating rule: gateway must be"
        ),
        "{}",
        out.stderr
    );
    let names = c.must_kubectl(&["get", "routes", "-o", "name"]).await;
    assert_eq!(names.trim(), "route.example.com/good");

    // A constant pattern Go cannot compile refuses the definition, as kube refuses it.
    let bad_pattern = ROUTES
        .replace("routes.example.com", "paths.example.com")
        .replace("{plural: routes, singular: route, kind: Route}", "{plural: paths, singular: path, kind: Path}")
        .replace("find('[0-9]+[.][0-9]+$')", "find('([0-9]+')");
    let file = write(&c, "paths.yaml", &bad_pattern);
    let out = c.kubectl(&["create", "-f", &file]).await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[4].rule: Invalid value: \
             apiextensions.ValidationRule{Rule:\"self.image.find('([0-9]+') != '' && self.image.findAll('/').size() \
             <= 2\", Message:\"image must end in a version and have at most two \
             slashes\", MessageExpression:\"\", \
             Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: \
             program instantiation failed: error parsing regexp: missing closing ): `([0-9]+`"
        ),
        "{}",
        out.stderr
    );
}

/// A watch after a definition's schema changed sees objects in the new schema's form: the
/// watch cache of the old form ends (its row is retired) and a new one decodes with the row
/// served now, here applying a default the change added to an object stored without it.
async fn a_changed_definition_is_watched_in_its_new_form(backend: Backend) {
    let c = cluster(backend).await;
    must_create_widgets(&c).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let w1 =
        write(&c, "w1.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {color: red}\n");
    c.must_kubectl(&["create", "-f", &w1]).await;
    let watch_from = async |rv: &str| {
        let url = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=1");
        String::from_utf8_lossy(&c.request(Credentials::Admin, "GET", &url, None, "").await.body).to_string()
    };
    let rv = |list: &Value| list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    // A watch starts the cache in the definition's first form.
    let before = rv(&c.must_get(path).await);
    watch_from(&before).await;

    let shade = r#"[{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/shade",
        "value": {"type": "string", "default": "dark"}}]"#;
    c.must_kubectl(&["patch", "crd", "widgets.example.com", "--type=json", "-p", shade]).await;
    let defaulted =
        wait_for(Duration::from_secs(10), async || c.must_get(&format!("{path}/w1")).await["spec"]["shade"] == "dark")
            .await;
    assert!(defaulted, "a read defaults by the changed schema");

    // An object stored without the new field, as another server could have written it.
    let before = rv(&c.must_get(path).await);
    let w2 = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w2", "namespace": "default", "uid": "8d5c5b0e-0000-4000-8000-000000000002",
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"color": "blue", "replicas": 1}});
    c.storage_put("/registry/example.com/widgets/default/w2", w2.to_string().into_bytes()).await;
    let mut seen = String::new();
    let watched = wait_for(Duration::from_secs(10), async || {
        seen = watch_from(&before).await;
        seen.contains("\"name\":\"w2\"")
    })
    .await;
    assert!(watched, "the watch sees w2: {seen}");
    let event: Value = seen
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["object"]["metadata"]["name"] == "w2")
        .expect("w2's event");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["spec"], json!({"color": "blue", "replicas": 1, "shade": "dark"}), "{event}");
}
