//! The built-in kinds through kubectl: discovery as kube-apiserver 1.33 serves it, workloads
//! and other kinds created from manifests with kube's defaults, validation errors, and kinds
//! served under two group versions over one storage.
//!
//! kubectl's part (`create -f`, `create <kind> --dry-run=client`, `get`, `replace`, `delete`
//! and their output) is checked once per command; the rest of the objects are created and
//! read by the in-process client, since what is checked there is the server's defaults and
//! messages.

use serde_json::{json, Value};

use crate::harness::{in_memory, Backend, Cluster, Credentials};

in_memory!(
    api_resources_and_versions_match_kube_1_33,
    workloads_from_manifests_get_kube_defaults,
    kubectl_create_deployment_body_gets_kube_defaults,
    invalid_objects_are_refused_with_kube_messages,
    shared_storage_serves_both_group_versions,
    hpa_cpu_default_reads_back_in_both_versions,
);

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Writes `manifest` to a file in the cluster's directory and runs `kubectl create -f` on it.
pub(crate) async fn kubectl_create(c: &Cluster, manifest: &Value) -> String {
    let file = c.dir.path().join(format!("{}.json", rand_name()));
    std::fs::write(&file, manifest.to_string()).expect("write manifest");
    c.must_kubectl(&["create", "--validate=false", "-f", file.to_str().expect("utf-8 path")]).await
}

/// Runs `kubectl replace -f` on `manifest`.
pub(crate) async fn replace(c: &Cluster, manifest: &Value) -> crate::harness::KubectlOutput {
    let file = c.dir.path().join(format!("{}.json", rand_name()));
    std::fs::write(&file, manifest.to_string()).expect("write manifest");
    c.kubectl(&["replace", "--validate=false", "-f", file.to_str().expect("utf-8 path")]).await
}

fn rand_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("manifest-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

pub(crate) async fn get_json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    parse(&c.must_kubectl(&all).await)
}

pub(crate) fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}})
}

async fn api_resources_and_versions_match_kube_1_33(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let versions = c.must_kubectl(&["api-versions"]).await;
    let expected = [
        "admissionregistration.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "apiregistration.k8s.io/v1",
        "apps/v1",
        "authentication.k8s.io/v1",
        "authorization.k8s.io/v1",
        "autoscaling/v1",
        "autoscaling/v2",
        "batch/v1",
        "certificates.k8s.io/v1",
        "coordination.k8s.io/v1",
        "discovery.k8s.io/v1",
        "events.k8s.io/v1",
        "flowcontrol.apiserver.k8s.io/v1",
        "networking.k8s.io/v1",
        "node.k8s.io/v1",
        "policy/v1",
        "rbac.authorization.k8s.io/v1",
        "scheduling.k8s.io/v1",
        "storage.k8s.io/v1",
        "v1",
    ];
    assert_eq!(versions.lines().collect::<Vec<_>>(), expected);

    let out = c.must_kubectl(&["api-resources"]).await;
    let rows: Vec<Vec<&str>> = out.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    // kube-apiserver 1.33 lists 60 resources at preferred versions, as here.
    assert_eq!(rows.len(), 60, "{out}");
    for row in [
        vec!["bindings", "v1", "true", "Binding"],
        vec!["endpoints", "ep", "v1", "true", "Endpoints"],
        vec!["pods", "po", "v1", "true", "Pod"],
        vec!["services", "svc", "v1", "true", "Service"],
        vec!["nodes", "no", "v1", "false", "Node"],
        vec!["deployments", "deploy", "apps/v1", "true", "Deployment"],
        vec!["horizontalpodautoscalers", "hpa", "autoscaling/v2", "true", "HorizontalPodAutoscaler"],
        vec!["cronjobs", "cj", "batch/v1", "true", "CronJob"],
        vec!["customresourcedefinitions", "crd,crds", "apiextensions.k8s.io/v1", "false", "CustomResourceDefinition"],
        vec!["leases", "coordination.k8s.io/v1", "true", "Lease"],
        vec!["events", "ev", "events.k8s.io/v1", "true", "Event"],
        vec!["ingresses", "ing", "networking.k8s.io/v1", "true", "Ingress"],
        vec!["ipaddresses", "ip", "networking.k8s.io/v1", "false", "IPAddress"],
        vec!["poddisruptionbudgets", "pdb", "policy/v1", "true", "PodDisruptionBudget"],
        vec!["clusterroles", "rbac.authorization.k8s.io/v1", "false", "ClusterRole"],
        vec!["priorityclasses", "pc", "scheduling.k8s.io/v1", "false", "PriorityClass"],
        vec!["flowschemas", "flowcontrol.apiserver.k8s.io/v1", "false", "FlowSchema"],
        vec!["selfsubjectaccessreviews", "authorization.k8s.io/v1", "false", "SelfSubjectAccessReview"],
        vec!["selfsubjectreviews", "authentication.k8s.io/v1", "false", "SelfSubjectReview"],
    ] {
        assert!(rows.contains(&row), "{row:?} missing from:\n{out}");
    }
    // The `all` category is what `kubectl get all` expands.
    let all = c.must_kubectl(&["api-resources", "--categories=all", "-o", "name"]).await;
    let mut names: Vec<&str> = all.lines().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cronjobs.batch",
            "daemonsets.apps",
            "deployments.apps",
            "horizontalpodautoscalers.autoscaling",
            "jobs.batch",
            "pods",
            "replicasets.apps",
            "replicationcontrollers",
            "services",
            "statefulsets.apps",
        ]
    );
}

async fn workloads_from_manifests_get_kube_defaults(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    assert_eq!(kubectl_create(&c, &deployment("web")).await.trim(), "deployment.apps/web created");
    let d = get_json(&c, &["get", "deploy", "web"]).await;
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(d["status"], json!({}));
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(
        (&pod["restartPolicy"], &pod["dnsPolicy"], &pod["terminationGracePeriodSeconds"], &pod["schedulerName"]),
        (&json!("Always"), &json!("ClusterFirst"), &json!(30), &json!("default-scheduler"))
    );
    let container = &pod["containers"][0];
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["terminationMessagePolicy"], "File");

    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "pi", "image": "perl:5.34"}]}}}});
    c.must_post(&job).await;
    let job = c.must_get("/apis/batch/v1/namespaces/default/jobs/pi").await;
    let uid = job["metadata"]["uid"].as_str().expect("uid");
    assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
    assert_eq!(job["spec"]["template"]["metadata"]["labels"]["job-name"], "pi");
    assert_eq!((&job["spec"]["backoffLimit"], &job["spec"]["completions"]), (&json!(6), &json!(1)));
    assert_eq!(job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");

    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
    c.must_post(&svc).await;
    let svc = c.must_get("/api/v1/namespaces/default/services/web").await;
    assert_eq!(svc["spec"]["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
    assert_eq!((&svc["spec"]["type"], &svc["spec"]["sessionAffinity"]), (&json!("ClusterIP"), &json!("None")));

    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]});
    c.must_post(&role).await;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read"}, "subjects": [{"kind": "User", "name": "alice"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}});
    c.must_post(&binding).await;
    let mut rb = c.must_get("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/read").await;
    assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    rb["roleRef"]["name"] = "other".into();
    let refused = replace(&c, &rb).await;
    assert!(
        refused.stderr.contains("roleRef: Invalid value") && refused.stderr.contains("cannot change roleRef"),
        "{}",
        refused.stderr
    );

    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}});
    c.must_post(&lease).await;
    let lease = c.must_get("/apis/coordination.k8s.io/v1/namespaces/default/leases/leader").await;
    assert_eq!(lease["spec"]["holderIdentity"], "me");

    // kubectl names a deleted object by its kind's group; the rest go in-process.
    assert_eq!(c.must_kubectl(&["delete", "deployment/web"]).await.trim(), "deployment.apps \"web\" deleted");
    for path in [
        "/apis/batch/v1/namespaces/default/jobs/pi",
        "/api/v1/namespaces/default/services/web",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/reader",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/read",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/leader",
    ] {
        let r = c.request(Credentials::Admin, "DELETE", path, None, "").await;
        assert_eq!(r.status, 200, "DELETE {path}: {}", String::from_utf8_lossy(&r.body));
    }
    let left = get_json(&c, &["get", "deploy,job,svc,role,rolebinding,lease"]).await;
    assert_eq!(left["items"], json!([]));
}

/// `kubectl create deployment` builds this body; it sends it as protobuf, which this branch
/// decodes only for the core kinds, so the test sends kubectl's own JSON rendering of it.
async fn kubectl_create_deployment_body_gets_kube_defaults(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let body =
        c.must_kubectl(&["create", "deployment", "web2", "--image=nginx", "--dry-run=client", "-o", "json"]).await;
    c.must_post(&parse(&body)).await;
    let d = c.must_get("/apis/apps/v1/namespaces/default/deployments/web2").await;
    let expected = json!({
        "progressDeadlineSeconds": 600,
        "replicas": 1,
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "web2"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": {
            "metadata": {"creationTimestamp": null, "labels": {"app": "web2"}},
            "spec": {
                "containers": [{"image": "nginx", "imagePullPolicy": "Always", "name": "nginx", "resources": {},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
                "securityContext": {},
                "terminationGracePeriodSeconds": 30,
            },
        },
    });
    assert_eq!(d["spec"], expected);
    assert_eq!(d["metadata"]["labels"], json!({"app": "web2"}));
    assert_eq!((&d["metadata"]["generation"], &d["status"]), (&json!(1), &json!({})));

    let job = c.must_kubectl(&["create", "job", "once", "--image=busybox", "--dry-run=client", "-o", "json"]).await;
    c.must_post(&parse(&job)).await;
    let job = c.must_get("/apis/batch/v1/namespaces/default/jobs/once").await;
    let uid = job["metadata"]["uid"].as_str().expect("uid").to_string();
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert_eq!(job["metadata"]["labels"]["batch.kubernetes.io/controller-uid"], uid.as_str());
    assert_eq!(job["spec"]["podReplacementPolicy"], "TerminatingOrFailed");

    let svc = c
        .must_kubectl(&["create", "service", "clusterip", "front", "--tcp=80:8080", "--dry-run=client", "-o", "json"])
        .await;
    c.must_post(&parse(&svc)).await;
    let svc = c.must_get("/api/v1/namespaces/default/services/front").await;
    assert_eq!(svc["spec"]["ports"][0], json!({"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}));
    assert_eq!(svc["spec"]["selector"], json!({"app": "front"}));
}

async fn invalid_objects_are_refused_with_kube_messages(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let mut bad = deployment("bad");
    bad["spec"]["selector"]["matchLabels"]["app"] = "other".into();
    let file = c.dir.path().join("bad.json");
    std::fs::write(&file, bad.to_string()).expect("write");
    let out = c.kubectl(&["create", "--validate=false", "-f", file.to_str().expect("path")]).await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains(r#"The Deployment "bad" is invalid: spec.template.metadata.labels: Invalid value"#)
            && out.stderr.contains("`selector` does not match template `labels`"),
        "{}",
        out.stderr
    );
    // The server's messages, which kubectl prints as they are (above).
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1web"},
        "spec": {"ports": [{"port": 80}]}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]}});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    for (obj, expected) in [
        (svc, r#"metadata.name: Invalid value: "1web": a DNS-1035 label must consist"#),
        (pod, r#"Pod "p" is invalid: spec.containers[0].image: Required value"#),
        (job, r#"spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never""#),
    ] {
        let path = c.collection_of(&obj).await;
        let r = c.request(Credentials::Admin, "POST", &path, Some("application/json"), obj.to_string()).await;
        assert_eq!((r.status, &r.json()["reason"]), (422, &json!("Invalid")), "{expected}");
        let message = r.json()["message"].as_str().unwrap_or("").to_string();
        assert!(message.contains(expected), "{expected:?} missing from {message}");
    }
}

async fn shared_storage_serves_both_group_versions(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "default"},
        "reason": "Started", "message": "started container", "type": "Normal"});
    c.must_post(&event).await;
    let new_style = c.must_get("/apis/events.k8s.io/v1/namespaces/default/events/e1").await;
    assert_eq!(new_style["apiVersion"], "events.k8s.io/v1");
    assert_eq!(new_style["note"], "started container");
    assert_eq!(new_style["regarding"]["name"], "web-0");

    let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}});
    c.must_post(&hpa).await;
    let v2 = c.must_get("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web").await;
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(v2["spec"]["minReplicas"], 1);
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    let v1 = c.must_get("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web").await;
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    assert!(v1["spec"].get("metrics").is_none());
}

/// kube gives an HPA without a metric a CPU utilization target of 80%: autoscaling/v1's
/// conversion adds it to one created without `targetCPUUtilizationPercentage`, autoscaling/v2's
/// defaulting to one created without `metrics`. Either way the object reads back through both
/// versions with the target in that version's form, the create's response already holds it,
/// and the creator owns it (kube defaults before its field manager sees the object). The
/// status holds the zeros kube's JSON prints in each version.
async fn hpa_cpu_default_reads_back_in_both_versions(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    let v1_spec =
        json!({"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 80});
    let cpu = json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}});
    let v2_spec = json!({"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 3, "metrics": [cpu]});
    let spec_in = |version: &str| if version == "v1" { &v1_spec } else { &v2_spec };
    let status_in = |version: &str| {
        if version == "v1" {
            json!({"currentReplicas": 0, "desiredReplicas": 0})
        } else {
            json!({"currentMetrics": null, "desiredReplicas": 0})
        }
    };
    let collection = |version: &str| format!("/apis/autoscaling/{version}/namespaces/default/horizontalpodautoscalers");
    for (created, read) in [("v1", "v1"), ("v1", "v2"), ("v2", "v1"), ("v2", "v2")] {
        let name = format!("from-{created}-read-{read}");
        let hpa = json!({"apiVersion": format!("autoscaling/{created}"), "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name}, "spec": {"scaleTargetRef": target, "maxReplicas": 3}});
        let path = format!("{}?fieldManager=creator", collection(created));
        let r = c.request(Credentials::Admin, "POST", &path, Some("application/json"), hpa.to_string()).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let response = r.json();
        assert_eq!(&response["spec"], spec_in(created), "the create's response through {created}");
        assert_eq!(response["status"], status_in(created), "the create's response through {created}");
        let managed = &response["metadata"]["managedFields"][0];
        assert_eq!(
            (&managed["manager"], &managed["apiVersion"]),
            (&json!("creator"), &json!(format!("autoscaling/{created}")))
        );
        let owned = if created == "v1" { "f:targetCPUUtilizationPercentage" } else { "f:metrics" };
        assert_eq!(managed["fieldsV1"]["f:spec"][owned], json!({}), "{managed}");
        assert!(managed["fieldsV1"].get("f:status").is_none(), "status is reset on create: {managed}");

        let got = c.must_get(&format!("{}/{name}", collection(read))).await;
        assert_eq!(got["apiVersion"], format!("autoscaling/{read}"));
        assert_eq!(&got["spec"], spec_in(read), "created through {created}, read through {read}");
        assert_eq!(got["status"], status_in(read), "created through {created}, read through {read}");
        assert!(got["metadata"].get("annotations").is_none(), "no conversion annotation: {got}");
    }
}
