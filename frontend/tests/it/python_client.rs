//! The Kubernetes Python client (`kubernetes` on PyPI, installed by deploy/setup.sh into its own
//! virtual environment) against the frontend: server-side apply through its dynamic client
//! (`server_side_apply`, with conflicts and `force_conflicts`), typed reads that decode
//! managedFields into its models, and a typed watch.
//!
//! The client runs a script this module writes; the script prints one JSON line per step and
//! the test checks them, so a failure shows what the client saw.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{both_backends, Backend, Cluster};

both_backends!(python_client_applies_reads_and_watches);

/// The virtual environment deploy/setup.sh makes (same default).
fn python() -> PathBuf {
    let venv = std::env::var_os("BALLAST_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/ballast/venv"));
    venv.join("bin/python")
}

const SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)

config.load_kube_config(config_file=sys.argv[1])
api = client.ApiClient()
core = client.CoreV1Api(api)
dyn = dynamic.DynamicClient(api)
cms = dyn.resources.get(api_version="v1", kind="ConfigMap")

def managers(obj):
    return [[m["manager"], m["operation"], m["fieldsV1"]] for m in obj["metadata"]["managedFields"]]

body = {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "py-apply", "namespace": "default", "labels": {"app": "py"}},
        "data": {"a": "1", "b": "2"}}
created = dyn.server_side_apply(cms, body=body, field_manager="py-a").to_dict()
say("created", data=created["data"], managers=managers(created))

other = {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "py-apply", "namespace": "default"}, "data": {"a": "9"}}
try:
    dyn.server_side_apply(cms, body=other, field_manager="py-b")
    say("conflict", status=None)
except ApiException as e:
    say("conflict", status=e.status, body=json.loads(e.body))

forced = dyn.server_side_apply(cms, body=other, field_manager="py-b", force_conflicts=True).to_dict()
say("forced", data=forced["data"], managers=managers(forced))

typed = core.read_namespaced_config_map("py-apply", "default")
say("typed", managers=[[m.manager, m.operation, m.fields_v1] for m in typed.metadata.managed_fields],
    resource_version=typed.metadata.resource_version)

events = []
w = watch.Watch()
for ev in w.stream(core.list_namespaced_config_map, "default", field_selector="metadata.name=py-apply",
                   timeout_seconds=20):
    events.append([ev["type"], ev["object"].data])
    if len(events) == 1:
        core.patch_namespaced_config_map("py-apply", "default", {"data": {"c": "3"}}, field_manager="py-c")
    if len(events) == 2:
        w.stop()
say("watch", events=events)
"#;

async fn python_client_applies_reads_and_watches(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let script = c.dir().join("client.py");
    std::fs::write(&script, SCRIPT).expect("write the client script");
    let child = tokio::process::Command::new(python())
        .arg(&script)
        .arg(c.kubeconfig_path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Python client's virtual environment (deploy/setup.sh makes it)");
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("the Python client finishes within 90 s")
        .expect("the Python client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "python failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let steps: Vec<Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    let step = |name: &str| steps.iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no {name}: {stdout}"));

    let created = step("created");
    assert_eq!(created["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        created["managers"],
        json!([["py-a", "Apply", {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}]])
    );

    // Another manager's change to `a` is a 409 with one cause, and writes nothing.
    let conflict = step("conflict");
    assert_eq!(conflict["status"], 409, "{conflict}");
    assert_eq!(conflict["body"]["reason"], "Conflict");
    assert_eq!(conflict["body"]["message"], r#"Apply failed with 1 conflict: conflict with "py-a": .data.a"#);
    assert_eq!(
        conflict["body"]["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"py-a\"", "field": ".data.a"}])
    );

    // Forced, `a` changes hands and `b` stays py-a's.
    let forced = step("forced");
    assert_eq!(forced["data"], json!({"a": "9", "b": "2"}));
    assert_eq!(
        forced["managers"],
        json!([
            ["py-a", "Apply", {"f:data": {"f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}],
            ["py-b", "Apply", {"f:data": {"f:a": {}}}]
        ])
    );
    // The typed models decode the same entries.
    assert_eq!(step("typed")["managers"], forced["managers"]);

    // The watch sees the object, then a strategic merge patch by a third manager.
    assert_eq!(
        step("watch")["events"],
        json!([["ADDED", {"a": "9", "b": "2"}], ["MODIFIED", {"a": "9", "b": "2", "c": "3"}]])
    );
    let stored = c.must_kubectl(&["get", "cm", "py-apply", "-o", "json", "--show-managed-fields"]).await;
    let stored: Value = serde_json::from_str(&stored).expect("kubectl prints JSON");
    let last = &stored["metadata"]["managedFields"][2];
    assert_eq!((&last["manager"], &last["operation"]), (&json!("py-c"), &json!("Update")));
}
