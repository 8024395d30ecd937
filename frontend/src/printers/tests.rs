//! Printer tests on JSON objects: each kind's cells for typical and edge-case objects.

use serde_json::{json, Value};

use super::*;
use ballast_apiserver::registry::table::{from_list, from_object, partial_metadata_list, IncludeObject, TableOptions};

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600;
const CREATED: &str = "2026-01-01T00:00:00Z";

fn cells(group: &str, resource: &str, obj: &Value, now: i64) -> Vec<Value> {
    let p = printer(group, resource);
    let c = (p.cells)(obj, now);
    assert_eq!(c.len(), p.columns.len(), "{group}/{resource}: one cell per column");
    c
}

fn headers(group: &str, resource: &str) -> Vec<(&'static str, u8)> {
    printer(group, resource).columns.iter().map(|c| (c.name, c.priority)).collect()
}

fn meta(name: &str) -> Value {
    json!({"name": name, "creationTimestamp": CREATED})
}

#[test]
fn core_kinds() {
    assert_eq!(headers("", "namespaces"), [("Name", 0), ("Status", 0), ("Age", 0)]);
    let ns = json!({"metadata": meta("team-a"), "status": {"phase": "Active"}});
    assert_eq!(cells("", "namespaces", &ns, T0 + 200), [json!("team-a"), json!("Active"), json!("3m20s")]);

    assert_eq!(headers("", "configmaps"), [("Name", 0), ("Data", 0), ("Age", 0)]);
    let cm = json!({"metadata": meta("cm"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
    assert_eq!(cells("", "configmaps", &cm, T0 + 3 * 86_400), [json!("cm"), json!(3), json!("3d")]);

    assert_eq!(headers("", "secrets"), [("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0)]);
    let s = json!({"metadata": meta("s"), "type": "Opaque", "data": {"k": "dg=="}});
    assert_eq!(cells("", "secrets", &s, T0 + 5), [json!("s"), json!("Opaque"), json!(1), json!("5s")]);

    let sa = json!({"metadata": meta("default")});
    assert_eq!(cells("", "serviceaccounts", &sa, T0), [json!("default"), json!(0), json!("0s")]);
    let lease = json!({"metadata": meta("node-1"), "spec": {"holderIdentity": "node-1"}});
    assert_eq!(cells("coordination.k8s.io", "leases", &lease, T0)[1], "node-1");
}

#[test]
fn pods_show_readiness_reasons_and_restarts() {
    let names: Vec<_> = headers("", "pods").into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
    );
    let running = json!({
        "metadata": meta("web-0"),
        "spec": {"nodeName": "node1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:01:00Z"}}},
        ]},
    });
    let c = cells("", "pods", &running, T0 + 120);
    assert_eq!(c[..4], [json!("web-0"), json!("1/2"), json!("CrashLoopBackOff"), json!("2 (60s ago)")]);
    assert_eq!(c[5..], [json!("10.0.0.5"), json!("node1"), json!("<none>"), json!("<none>")]);

    let pending =
        json!({"metadata": meta("p"), "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
    assert_eq!(cells("", "pods", &pending, T0)[1..4], [json!("0/1"), json!("Pending"), json!("0")]);

    let init = json!({
        "metadata": meta("p"),
        "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
            {"name": "i2", "state": {"running": {}}},
        ]},
    });
    assert_eq!(cells("", "pods", &init, T0)[2], "Init:1/2");

    let deleting = json!({
        "metadata": {"name": "p", "creationTimestamp": CREATED, "deletionTimestamp": CREATED},
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Running"},
    });
    assert_eq!(cells("", "pods", &deleting, T0)[2], "Terminating");
}

#[test]
fn workloads() {
    let names: Vec<_> = headers("apps", "deployments");
    assert_eq!(
        names,
        [
            ("Name", 0),
            ("Ready", 0),
            ("Up-to-date", 0),
            ("Available", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1)
        ]
    );
    let d = json!({
        "metadata": meta("nginx"),
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx", "tier": "web"},
                 "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]},
                 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"},
                                                      {"name": "side", "image": "busybox"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    });
    assert_eq!(
        cells("apps", "deployments", &d, T0 + 600),
        [
            json!("nginx"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("10m"),
            json!("nginx,side"),
            json!("nginx:1.27,busybox"),
            json!("app=nginx,env in (dev,prod),tier=web"),
        ]
    );
    let rs =
        json!({"metadata": meta("nginx-1"), "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1}});
    assert_eq!(cells("apps", "replicasets", &rs, T0)[1..4], [json!(2), json!(2), json!(1)]);

    let job = json!({
        "metadata": meta("pi"),
        "spec": {"completions": 1},
        "status": {"succeeded": 1, "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:35Z",
                   "conditions": [{"type": "Complete", "status": "True"}]},
    });
    assert_eq!(cells("batch", "jobs", &job, T0 + 60)[1..4], [json!("Complete"), json!("1/1"), json!("35s")]);
    let running = json!({"metadata": meta("j"), "spec": {"parallelism": 3}, "status": {"startTime": CREATED}});
    assert_eq!(cells("batch", "jobs", &running, T0 + 7)[1..4], [json!("Running"), json!("0/1 of 3"), json!("7s")]);

    let cj = json!({"metadata": meta("hello"), "spec": {"schedule": "*/5 * * * *", "suspend": false,
                    "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}}});
    let c = cells("batch", "cronjobs", &cj, T0);
    assert_eq!(c[1..6], [json!("*/5 * * * *"), json!("<none>"), json!("False"), json!(0), json!("<none>")]);
    assert_eq!(c[7..9], [json!("c"), json!("busybox")]);
}

#[test]
fn services_nodes_events_bindings() {
    let svc = json!({"metadata": meta("web"), "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.10"],
        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        "selector": {"app": "web"}}});
    assert_eq!(
        cells("", "services", &svc, T0),
        [
            json!("web"),
            json!("NodePort"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP"),
            json!("0s"),
            json!("app=web")
        ]
    );
    let lb = json!({"metadata": meta("lb"), "spec": {"type": "LoadBalancer"}});
    assert_eq!(cells("", "services", &lb, T0)[3], "<pending>");

    let node = json!({"metadata": {"name": "n1", "creationTimestamp": CREATED,
                                   "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.32.0"},
                   "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}]}});
    let c = cells("", "nodes", &node, T0);
    assert_eq!(
        c[..5],
        [json!("n1"), json!("Ready,SchedulingDisabled"), json!("control-plane"), json!("0s"), json!("v1.32.0")]
    );
    assert_eq!(c[5..7], [json!("192.168.1.2"), json!("<none>")]);

    let ev = json!({"metadata": meta("web-0.1"), "type": "Normal", "reason": "Scheduled", "message": " ok ",
        "involvedObject": {"kind": "Pod", "name": "web-0"}, "source": {"component": "scheduler"},
        "firstTimestamp": CREATED, "lastTimestamp": "2026-01-01T00:00:30Z"});
    let c = cells("", "events", &ev, T0 + 60);
    assert_eq!(c[..4], [json!("30s"), json!("Normal"), json!("Scheduled"), json!("pod/web-0")]);
    assert_eq!(c[5..], [json!("scheduler"), json!("ok"), json!("60s"), json!(1), json!("web-0.1")]);

    let rb = json!({"metadata": meta("b"), "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
                     {"kind": "User", "name": "bob"}]});
    let c = cells("rbac.authorization.k8s.io", "rolebindings", &rb, T0);
    assert_eq!(c, [json!("b"), json!("ClusterRole/view"), json!("0s"), json!("alice, bob"), json!(""), json!("ns/sa")]);
    let role = json!({"metadata": {"name": "r", "creationTimestamp": "2026-01-01T01:00:00+01:00"}});
    assert_eq!(cells("rbac.authorization.k8s.io", "roles", &role, T0), [json!("r"), json!(CREATED)]);
}

#[test]
fn kinds_without_a_printer_get_name_and_created_at() {
    let p = printer("example.com", "widgets");
    assert_eq!(
        p.columns.iter().map(|c| (c.name, c.type_)).collect::<Vec<_>>(),
        [("Name", "string"), ("Created At", "date")]
    );
    assert_eq!((p.cells)(&json!({"metadata": meta("w")}), T0), [json!("w"), json!(CREATED)]);
}

#[test]
fn table_shapes() {
    let list = json!({"metadata": {"resourceVersion": "42", "continue": "tok"},
                      "items": [{"metadata": {"name": "a", "uid": "u1", "creationTimestamp": CREATED}, "data": {"x": "y"}}]});
    let opts =
        TableOptions { api_version: "meta.k8s.io/v1", include_object: IncludeObject::Metadata, no_headers: false };
    let t = from_list(printer("", "configmaps"), &list, opts, T0);
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["metadata"], json!({"resourceVersion": "42", "continue": "tok"}));
    assert_eq!(
        t["columnDefinitions"][0],
        json!({"name": "Name", "type": "string", "format": "name",
        "description": DEFAULT.columns[0].description, "priority": 0})
    );
    assert_eq!(t["rows"][0]["cells"], json!(["a", 1, "0s"]));
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(t["rows"][0]["object"]["metadata"]["uid"], "u1");

    let none = TableOptions { include_object: IncludeObject::None, no_headers: true, ..opts };
    let t = from_object(printer("", "configmaps"), &list["items"][0], none, T0);
    assert!(t["rows"][0].get("object").is_none());
    assert!(t["columnDefinitions"].is_null());
    let full = TableOptions { include_object: IncludeObject::Object, ..opts };
    assert_eq!(
        from_object(printer("", "configmaps"), &list["items"][0], full, T0)["rows"][0]["object"]["data"]["x"],
        "y"
    );
    assert!(IncludeObject::parse(Some("Everything")).is_err());

    let pl = partial_metadata_list(&list, "meta.k8s.io/v1");
    assert_eq!(pl["kind"], "PartialObjectMetadataList");
    assert_eq!(pl["items"][0]["metadata"]["name"], "a");
    assert!(pl["items"][0].get("data").is_none());
}

#[test]
fn apiservices() {
    let g = "apiregistration.k8s.io";
    assert_eq!(headers(g, "apiservices"), [("Name", 0), ("Service", 0), ("Available", 0), ("Age", 0)]);
    let local = json!({"metadata": meta("v1.apps"), "spec": {"group": "apps", "version": "v1"},
        "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
    assert_eq!(
        cells(g, "apiservices", &local, T0 + 60),
        [json!("v1.apps"), json!("Local"), json!("True"), json!("60s")]
    );
    let down = json!({"metadata": meta("v1.x.io"), "spec": {"service": {"namespace": "ns", "name": "api"}},
        "status": {"conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]}});
    assert_eq!(cells(g, "apiservices", &down, T0)[1..3], [json!("ns/api"), json!("False (ServiceNotFound)")]);
    let unchecked = json!({"metadata": meta("v1.y.io"), "spec": {"service": {"namespace": "ns", "name": "api"}}});
    assert_eq!(cells(g, "apiservices", &unchecked, T0)[2], json!("Unknown"));
}
