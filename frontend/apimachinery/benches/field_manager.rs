//! CPU of the field manager on a server-side apply of a typical Deployment (two containers with
//! ports, env, resources and probes, stored with kube's defaults), each apply a new image tag
//! by one manager, as `benches/kube-load`'s `apply_deploy_c16` sends them. Prints microseconds
//! per apply; run under `perf record` to see where they go.
//!
//!   cargo bench -p ballast-apimachinery --bench field_manager [-- ITERATIONS]

use ballast_apimachinery::clock::monotonic_now;
use ballast_apimachinery::managed_fields::FieldManager;
use ballast_apimachinery::typed::TypeSchema;
use serde_json::{json, Value};

fn container(name: &str, port: u16, tag: &str) -> Value {
    json!({"name": name, "image": format!("registry.k8s.io/{name}:{tag}"),
        "ports": [{"containerPort": port, "name": "http"}],
        "env": [{"name": "MODE", "value": "bench"}, {"name": "LOG", "value": "info"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": port}, "periodSeconds": 5}})
}

fn config(tag: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "apply-1", "labels": {"app": "apply-1", "tier": "web"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "apply-1"}},
            "template": {"metadata": {"labels": {"app": "apply-1", "tier": "web"}},
                "spec": {"containers": [container("web", 8080, tag), container("sidecar", 9090, tag)]}}}})
}

/// What kube's defaulting adds to a stored Deployment and its containers.
fn with_defaults(mut obj: Value) -> Value {
    obj["metadata"]["namespace"] = "default".into();
    obj["metadata"]["uid"] = "6b1f4a8e-0000-4000-8000-000000000001".into();
    obj["metadata"]["resourceVersion"] = "1234".into();
    obj["metadata"]["generation"] = 7.into();
    obj["metadata"]["creationTimestamp"] = "2026-11-26T10:00:00Z".into();
    let spec = &mut obj["spec"];
    spec["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}});
    spec["revisionHistoryLimit"] = 10.into();
    spec["progressDeadlineSeconds"] = 600.into();
    let pod = &mut spec["template"]["spec"];
    for (k, v) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("securityContext", json!({})),
        ("schedulerName", json!("default-scheduler")),
    ] {
        pod[k] = v;
    }
    for c in pod["containers"].as_array_mut().into_iter().flatten() {
        c["terminationMessagePath"] = "/dev/termination-log".into();
        c["terminationMessagePolicy"] = "File".into();
        c["imagePullPolicy"] = "IfNotPresent".into();
        c["ports"][0]["protocol"] = "TCP".into();
        let probe = &mut c["readinessProbe"];
        probe["httpGet"]["scheme"] = "HTTP".into();
        for (k, v) in [("timeoutSeconds", 1), ("successThreshold", 1), ("failureThreshold", 3)] {
            probe[k] = v.into();
        }
    }
    obj["status"] = json!({"observedGeneration": 7, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
        "availableReplicas": 3, "conditions": [{"type": "Available", "status": "True",
        "lastUpdateTime": "2026-11-26T10:00:00Z", "lastTransitionTime": "2026-11-26T10:00:00Z",
        "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."}]});
    obj
}

fn main() {
    let iterations: u32 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20_000);
    let message = ballast_apimachinery::schema::lookup("apps", "v1", "Deployment").expect("Deployment schema");
    let schema = TypeSchema::from_message(message);
    let fm = FieldManager { schema: &schema, api_version: "apps/v1", subresource: "", versions: None, reset: &[] };
    let now = "2026-11-26T10:00:00Z";
    let describe = "default/apply-1; apps/v1, Kind=Deployment";
    // The stored object after a first apply.
    let mut live = with_defaults(config("first"));
    let (merged, managed) =
        fm.apply(&mut live.clone(), &config("first"), "bench", true, now, describe).expect("first apply");
    live = merged.unwrap_or(live);
    live["metadata"]["managedFields"] = managed.expect("managers");
    let configs: Vec<Value> = (0..64).map(|i| config(&format!("tag-{i}"))).collect();
    let start = monotonic_now();
    let mut changed = 0u32;
    for i in 0..iterations {
        let config = &configs[i as usize % configs.len()];
        // The server applies to its own copy of the stored object.
        let (merged, _) = fm.apply(&mut live.clone(), config, "bench", true, now, describe).expect("apply");
        changed += u32::from(merged.is_some());
    }
    let micros = start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
    println!("field_manager/apply_deployment: {micros:.1} µs per apply ({iterations} applies, {changed} changed)");
}
