//! Column definitions and cell functions per kind, keyed by (group, resource): the facts of
//! kube's server-side printers (column names, types, formats, and which columns are wide-only
//! with priority 1), computed from the object's JSON so any kind in the kinds table can
//! use them as soon as it is served. Kinds without a printer get kube's default: Name and
//! Created At.
//!
//! Cells are computed for every column, wide ones included: kube always prints wide and lets
//! the client drop priority-1 columns (kubectl does unless `-o wide`).

use std::collections::BTreeSet;

use serde_json::Value;

use ballast_apiserver::registry::table::age::{age, human_duration, parse_rfc3339};
use ballast_apiserver::registry::table::printer::{col, created_at, wide, Column, Printer, AGE, DEFAULT, NAME};

const CONTAINERS: Column = wide("Containers", "string", "Names of the containers in the pod template.");
const IMAGES: Column = wide("Images", "string", "Images of the containers in the pod template.");
const SELECTOR: Column = wide("Selector", "string", "The label selector of the pods this object manages.");

/// Returns the printer for `group`/`resource`, or the default one.
pub fn printer(group: &str, resource: &str) -> &'static Printer {
    match (group, resource) {
        ("", "namespaces") => &NAMESPACES,
        ("", "configmaps") => &CONFIGMAPS,
        ("", "secrets") => &SECRETS,
        ("", "serviceaccounts") => &SERVICEACCOUNTS,
        ("", "pods") => &PODS,
        ("", "services") => &SERVICES,
        ("", "nodes") => &NODES,
        ("", "events") => &EVENTS,
        ("", "endpoints") => &ENDPOINTS,
        ("apps", "deployments") => &DEPLOYMENTS,
        ("apps", "replicasets") => &REPLICASETS,
        ("apps", "statefulsets") => &STATEFULSETS,
        ("apps", "daemonsets") => &DAEMONSETS,
        ("batch", "jobs") => &JOBS,
        ("batch", "cronjobs") => &CRONJOBS,
        ("coordination.k8s.io", "leases") => &LEASES,
        ("apiregistration.k8s.io", "apiservices") => &APISERVICES,
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => &ROLES,
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => &ROLEBINDINGS,
        _ => &DEFAULT,
    }
}

// ---- JSON helpers ----

/// Follows a dot-separated path.
fn at<'a>(obj: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(obj, |v, k| &v[k])
}

fn str_at<'a>(obj: &'a Value, path: &str) -> &'a str {
    at(obj, path).as_str().unwrap_or("")
}

fn int_at(obj: &Value, path: &str) -> i64 {
    at(obj, path).as_i64().unwrap_or(0)
}

fn len_at(obj: &Value, path: &str) -> i64 {
    match at(obj, path) {
        Value::Object(m) => m.len() as i64,
        Value::Array(a) => a.len() as i64,
        _ => 0,
    }
}

fn items<'a>(obj: &'a Value, path: &str) -> &'a [Value] {
    at(obj, path).as_array().map_or(&[], Vec::as_slice)
}

fn name(obj: &Value) -> &str {
    str_at(obj, "metadata.name")
}

fn age_of(obj: &Value, now: i64) -> Value {
    age(at(obj, "metadata.creationTimestamp").as_str(), now).into()
}

fn or_none(s: String) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s
    }
}

/// `k=v` pairs sorted by key and joined by commas (kube's `FormatLabels`, without `<none>`).
fn label_pairs(map: &Value) -> String {
    let Some(m) = map.as_object() else { return String::new() };
    let sorted: std::collections::BTreeMap<&String, &str> =
        m.iter().map(|(k, v)| (k, v.as_str().unwrap_or(""))).collect();
    sorted.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// A `metav1.LabelSelector` as selector text (`a=b,c in (d,e),!f`), requirements sorted by key.
fn selector_text(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = selector["matchLabels"].as_object() {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in items(selector, "matchExpressions") {
        let key = str_at(e, "key");
        let mut values: Vec<&str> = items(e, "values").iter().filter_map(Value::as_str).collect();
        values.sort_unstable();
        let text = match str_at(e, "operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",")
}

/// Container names and images of a pod spec, comma-joined.
fn containers_and_images(pod_spec: &Value) -> (String, String) {
    let cs = items(pod_spec, "containers");
    let names = cs.iter().map(|c| str_at(c, "name")).collect::<Vec<_>>().join(",");
    let images = cs.iter().map(|c| str_at(c, "image")).collect::<Vec<_>>().join(",");
    (names, images)
}

fn has_condition(obj: &Value, type_: &str) -> bool {
    items(obj, "status.conditions").iter().any(|c| c["type"] == type_ && c["status"] == "True")
}

// ---- printers ----

static NAMESPACES: Printer = Printer {
    columns: &[NAME, col("Status", "string", "The phase of the namespace."), AGE],
    cells: &|o, now| vec![name(o).into(), str_at(o, "status.phase").into(), age_of(o, now)],
};

static CONFIGMAPS: Printer = Printer {
    columns: &[NAME, col("Data", "string", "How many keys the config map holds."), AGE],
    cells: &|o, now| vec![name(o).into(), (len_at(o, "data") + len_at(o, "binaryData")).into(), age_of(o, now)],
};

static SECRETS: Printer = Printer {
    columns: &[
        NAME,
        col("Type", "string", "The secret's type."),
        col("Data", "string", "How many keys the secret holds."),
        AGE,
    ],
    cells: &|o, now| vec![name(o).into(), str_at(o, "type").into(), len_at(o, "data").into(), age_of(o, now)],
};

static SERVICEACCOUNTS: Printer = Printer {
    columns: &[NAME, col("Secrets", "string", "How many secrets the service account lists."), AGE],
    cells: &|o, now| vec![name(o).into(), len_at(o, "secrets").into(), age_of(o, now)],
};

static LEASES: Printer = Printer {
    columns: &[NAME, col("Holder", "string", "The identity holding the lease."), AGE],
    cells: &|o, now| vec![name(o).into(), str_at(o, "spec.holderIdentity").into(), age_of(o, now)],
};

static APISERVICES: Printer = Printer {
    columns: &[
        NAME,
        col("Service", "string", "The reference to the service that hosts this API endpoint."),
        col("Available", "string", "Whether this service is available."),
        AGE,
    ],
    cells: &|o, now| {
        let service = match (str_at(o, "spec.service.namespace"), str_at(o, "spec.service.name")) {
            (_, "") if at(o, "spec.service").is_null() => "Local".to_string(),
            (ns, svc) => format!("{ns}/{svc}"),
        };
        let available = at(o, "status.conditions")
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
            .map_or_else(
                || "Unknown".to_string(),
                |c| match (c["status"].as_str().unwrap_or(""), c["reason"].as_str().unwrap_or("")) {
                    ("True", _) => "True".to_string(),
                    (status, "") => status.to_string(),
                    (status, reason) => format!("{status} ({reason})"),
                },
            );
        vec![name(o).into(), service.into(), available.into(), age_of(o, now)]
    },
};

static ROLES: Printer = Printer {
    columns: &[NAME, col("Created At", "string", "When the object was created.")],
    cells: &|o, _| vec![name(o).into(), created_at(o).into()],
};

static ROLEBINDINGS: Printer = Printer {
    columns: &[
        NAME,
        col("Role", "string", "The role the binding grants, as Kind/name."),
        AGE,
        wide("Users", "string", "Users the binding names."),
        wide("Groups", "string", "Groups the binding names."),
        wide("ServiceAccounts", "string", "Service accounts the binding names, as namespace/name."),
    ],
    cells: &|o, now| {
        let subjects = items(o, "subjects");
        let of_kind = |kind: &str| {
            subjects
                .iter()
                .filter(|s| s["kind"] == kind)
                .map(|s| {
                    if kind == "ServiceAccount" {
                        format!("{}/{}", str_at(s, "namespace"), str_at(s, "name"))
                    } else {
                        str_at(s, "name").to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            name(o).into(),
            format!("{}/{}", str_at(o, "roleRef.kind"), str_at(o, "roleRef.name")).into(),
            age_of(o, now),
            of_kind("User").into(),
            of_kind("Group").into(),
            of_kind("ServiceAccount").into(),
        ]
    },
};

static PODS: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Ready containers out of all containers."),
        col("Status", "string", "The pod's phase, or the reason it is not running."),
        col("Restarts", "string", "Container restarts, with the time of the last one."),
        AGE,
        wide("IP", "string", "The pod's IP address."),
        wide("Node", "string", "The node the pod is bound to."),
        wide("Nominated Node", "string", "The node nominated by preemption."),
        wide("Readiness Gates", "string", "Readiness gates that are true, out of all."),
    ],
    cells: &pod_cells,
};

/// A container status's display reason, if it overrides the pod's.
fn container_reason(status: &Value) -> Option<String> {
    let waiting = &status["state"]["waiting"];
    let terminated = &status["state"]["terminated"];
    if let Some(r) = waiting["reason"].as_str().filter(|r| !r.is_empty()) {
        return Some(r.to_string());
    }
    if terminated.is_object() {
        if let Some(r) = terminated["reason"].as_str().filter(|r| !r.is_empty()) {
            return Some(r.to_string());
        }
        let signal = terminated["signal"].as_i64().unwrap_or(0);
        return Some(if signal != 0 {
            format!("Signal:{signal}")
        } else {
            format!("ExitCode:{}", terminated["exitCode"].as_i64().unwrap_or(0))
        });
    }
    None
}

fn pod_cells(o: &Value, now: i64) -> Vec<Value> {
    let total = items(o, "spec.containers").len();
    let mut reason = str_at(o, "status.phase").to_string();
    if let Some(r) = at(o, "status.reason").as_str().filter(|r| !r.is_empty()) {
        reason = r.to_string();
    }
    if items(o, "status.conditions").iter().any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated") {
        reason = "SchedulingGated".into();
    }
    let mut restarts = 0;
    let mut last_restart: Option<i64> = None;
    let mut note_restart = |s: &Value| {
        restarts += s["restartCount"].as_i64().unwrap_or(0);
        if let Some(t) = s["lastState"]["terminated"]["finishedAt"].as_str().and_then(parse_rfc3339) {
            last_restart = Some(last_restart.map_or(t, |l| l.max(t)));
        }
    };
    let init_specs = items(o, "spec.initContainers");
    let mut initializing = false;
    for (i, s) in items(o, "status.initContainerStatuses").iter().enumerate() {
        note_restart(s);
        let terminated = &s["state"]["terminated"];
        if terminated.is_object() && terminated["exitCode"].as_i64() == Some(0) {
            continue;
        }
        let sidecar = init_specs.iter().any(|c| c["name"] == s["name"] && c["restartPolicy"] == "Always");
        if sidecar && s["started"] == true {
            continue;
        }
        let waiting_reason = s["state"]["waiting"]["reason"].as_str().filter(|r| !r.is_empty());
        reason = if terminated.is_object() {
            match terminated["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None if terminated["signal"].as_i64().unwrap_or(0) != 0 => {
                    format!("Init:Signal:{}", terminated["signal"].as_i64().unwrap_or(0))
                }
                None => format!("Init:ExitCode:{}", terminated["exitCode"].as_i64().unwrap_or(0)),
            }
        } else if let Some(r) = waiting_reason.filter(|r| *r != "PodInitializing") {
            format!("Init:{r}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }
    let mut ready = 0;
    if !initializing || has_condition(o, "Initialized") {
        let mut running = false;
        for s in items(o, "status.containerStatuses").iter().rev() {
            note_restart(s);
            if let Some(r) = container_reason(s) {
                reason = r;
            } else if s["ready"] == true && s["state"]["running"].is_object() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = if has_condition(o, "Ready") { "Running".into() } else { "NotReady".into() };
        }
    }
    let deleting = at(o, "metadata.deletionTimestamp").is_string();
    let phase = str_at(o, "status.phase");
    if deleting && str_at(o, "status.reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    let restarts_text = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - t)),
        _ => restarts.to_string(),
    };
    let ip = items(o, "status.podIPs").first().map(|p| str_at(p, "ip").to_string());
    let ip = ip.or_else(|| at(o, "status.podIP").as_str().map(String::from)).unwrap_or_default();
    let gates = items(o, "spec.readinessGates");
    let gates_text = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_gates = gates.iter().filter(|g| has_condition(o, str_at(g, "conditionType"))).count();
        format!("{true_gates}/{}", gates.len())
    };
    vec![
        name(o).into(),
        format!("{ready}/{total}").into(),
        reason.into(),
        restarts_text.into(),
        age_of(o, now),
        or_none(ip).into(),
        or_none(str_at(o, "spec.nodeName").into()).into(),
        or_none(str_at(o, "status.nominatedNodeName").into()).into(),
        gates_text.into(),
    ]
}

static DEPLOYMENTS: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Ready replicas out of desired replicas."),
        col("Up-to-date", "integer", "Replicas running the newest template."),
        col("Available", "integer", "Replicas available to serve."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: &|o, now| {
        let (containers, images) = containers_and_images(at(o, "spec.template.spec"));
        let desired = at(o, "spec.replicas").as_i64().unwrap_or(1);
        vec![
            name(o).into(),
            format!("{}/{desired}", int_at(o, "status.readyReplicas")).into(),
            int_at(o, "status.updatedReplicas").into(),
            int_at(o, "status.availableReplicas").into(),
            age_of(o, now),
            containers.into(),
            images.into(),
            selector_text(at(o, "spec.selector")).into(),
        ]
    },
};

static REPLICASETS: Printer = Printer {
    columns: &[
        NAME,
        col("Desired", "integer", "Desired replicas."),
        col("Current", "integer", "Replicas that exist."),
        col("Ready", "integer", "Ready replicas."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: &|o, now| {
        let (containers, images) = containers_and_images(at(o, "spec.template.spec"));
        vec![
            name(o).into(),
            at(o, "spec.replicas").as_i64().unwrap_or(1).into(),
            int_at(o, "status.replicas").into(),
            int_at(o, "status.readyReplicas").into(),
            age_of(o, now),
            containers.into(),
            images.into(),
            selector_text(at(o, "spec.selector")).into(),
        ]
    },
};

static STATEFULSETS: Printer = Printer {
    columns: &[NAME, col("Ready", "string", "Ready replicas out of desired replicas."), AGE, CONTAINERS, IMAGES],
    cells: &|o, now| {
        let (containers, images) = containers_and_images(at(o, "spec.template.spec"));
        let desired = at(o, "spec.replicas").as_i64().unwrap_or(1);
        vec![
            name(o).into(),
            format!("{}/{desired}", int_at(o, "status.readyReplicas")).into(),
            age_of(o, now),
            containers.into(),
            images.into(),
        ]
    },
};

static DAEMONSETS: Printer = Printer {
    columns: &[
        NAME,
        col("Desired", "integer", "Nodes that should run the daemon pod."),
        col("Current", "integer", "Nodes running at least one daemon pod."),
        col("Ready", "integer", "Nodes whose daemon pod is ready."),
        col("Up-to-date", "integer", "Nodes running the newest template."),
        col("Available", "integer", "Nodes whose daemon pod is available."),
        col("Node Selector", "string", "The node selector of the pod template."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: &|o, now| {
        let (containers, images) = containers_and_images(at(o, "spec.template.spec"));
        vec![
            name(o).into(),
            int_at(o, "status.desiredNumberScheduled").into(),
            int_at(o, "status.currentNumberScheduled").into(),
            int_at(o, "status.numberReady").into(),
            int_at(o, "status.updatedNumberScheduled").into(),
            int_at(o, "status.numberAvailable").into(),
            or_none(label_pairs(at(o, "spec.template.spec.nodeSelector"))).into(),
            age_of(o, now),
            containers.into(),
            images.into(),
            selector_text(at(o, "spec.selector")).into(),
        ]
    },
};

static JOBS: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The job's state: Running, Complete, Failed, Suspended, ..."),
        col("Completions", "string", "Succeeded pods out of the desired completions."),
        col("Duration", "string", "How long the job ran or has been running."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: &|o, now| {
        let succeeded = int_at(o, "status.succeeded");
        let completions = match at(o, "spec.completions").as_i64() {
            Some(c) => format!("{succeeded}/{c}"),
            None => match at(o, "spec.parallelism").as_i64().unwrap_or(0) {
                p if p > 1 => format!("{succeeded}/1 of {p}"),
                _ => format!("{succeeded}/1"),
            },
        };
        let start = at(o, "status.startTime").as_str().and_then(parse_rfc3339);
        let end = at(o, "status.completionTime").as_str().and_then(parse_rfc3339);
        let duration = match (start, end) {
            (None, _) => String::new(),
            (Some(s), None) => human_duration(now - s),
            (Some(s), Some(e)) => human_duration(e - s),
        };
        let status = if has_condition(o, "Complete") {
            "Complete"
        } else if has_condition(o, "Failed") {
            "Failed"
        } else if at(o, "metadata.deletionTimestamp").is_string() {
            "Terminating"
        } else if has_condition(o, "Suspended") {
            "Suspended"
        } else if has_condition(o, "FailureTarget") {
            "FailureTarget"
        } else if has_condition(o, "SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else {
            "Running"
        };
        let (containers, images) = containers_and_images(at(o, "spec.template.spec"));
        vec![
            name(o).into(),
            status.into(),
            completions.into(),
            duration.into(),
            age_of(o, now),
            containers.into(),
            images.into(),
            selector_text(at(o, "spec.selector")).into(),
        ]
    },
};

static CRONJOBS: Printer = Printer {
    columns: &[
        NAME,
        col("Schedule", "string", "The cron schedule."),
        col("Timezone", "string", "The time zone of the schedule."),
        col("Suspend", "boolean", "Whether new runs are suspended."),
        col("Active", "integer", "Jobs running now."),
        col("Last Schedule", "string", "When a job was last scheduled."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: &|o, now| {
        let suspend = match at(o, "spec.suspend").as_bool() {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let last = match at(o, "status.lastScheduleTime").as_str() {
            Some(t) => age(Some(t), now),
            None => "<none>".into(),
        };
        let template = at(o, "spec.jobTemplate.spec");
        let (containers, images) = containers_and_images(at(template, "template.spec"));
        vec![
            name(o).into(),
            str_at(o, "spec.schedule").into(),
            or_none(str_at(o, "spec.timeZone").into()).into(),
            suspend.into(),
            len_at(o, "status.active").into(),
            last.into(),
            age_of(o, now),
            containers.into(),
            images.into(),
            selector_text(at(template, "selector")).into(),
        ]
    },
};

static SERVICES: Printer = Printer {
    columns: &[
        NAME,
        col("Type", "string", "How the service is exposed."),
        col("Cluster-IP", "string", "The service's cluster IP."),
        col("External-IP", "string", "External addresses of the service."),
        col("Port(s)", "string", "The service's ports."),
        AGE,
        wide("Selector", "string", "The labels of the pods the service routes to."),
    ],
    cells: &|o, now| {
        let cluster_ip = items(o, "spec.clusterIPs")
            .first()
            .and_then(Value::as_str)
            .or_else(|| at(o, "spec.clusterIP").as_str())
            .unwrap_or("")
            .to_string();
        let external: Vec<&str> = items(o, "spec.externalIPs").iter().filter_map(Value::as_str).collect();
        let external_ip = match str_at(o, "spec.type") {
            "ClusterIP" | "NodePort" | "" => or_none(external.join(",")),
            "LoadBalancer" => {
                let mut all: Vec<&str> = items(o, "status.loadBalancer.ingress")
                    .iter()
                    .filter_map(|i| i["ip"].as_str().filter(|s| !s.is_empty()).or_else(|| i["hostname"].as_str()))
                    .collect();
                all.extend(&external);
                if all.is_empty() {
                    "<pending>".into()
                } else {
                    all.join(",")
                }
            }
            "ExternalName" => str_at(o, "spec.externalName").into(),
            _ => "<unknown>".into(),
        };
        let ports = items(o, "spec.ports")
            .iter()
            .map(|p| {
                let proto = p["protocol"].as_str().unwrap_or("TCP");
                match p["nodePort"].as_i64().filter(|n| *n != 0) {
                    Some(n) => format!("{}:{n}/{proto}", int_at(p, "port")),
                    None => format!("{}/{proto}", int_at(p, "port")),
                }
            })
            .collect::<Vec<_>>()
            .join(",");
        vec![
            name(o).into(),
            str_at(o, "spec.type").into(),
            or_none(cluster_ip).into(),
            external_ip.into(),
            or_none(ports).into(),
            age_of(o, now),
            or_none(label_pairs(at(o, "spec.selector"))).into(),
        ]
    },
};

static ENDPOINTS: Printer = Printer {
    columns: &[NAME, col("Endpoints", "string", "Addresses and ports of the endpoints."), AGE],
    cells: &|o, now| {
        const SHOWN: usize = 3;
        let mut all = Vec::new();
        for subset in items(o, "subsets") {
            let addrs = items(subset, "addresses");
            let ports = items(subset, "ports");
            for a in addrs {
                let ip = str_at(a, "ip");
                if ports.is_empty() {
                    all.push(ip.to_string());
                }
                for p in ports {
                    all.push(format!("{ip}:{}", int_at(p, "port")));
                }
            }
        }
        let mut text = all.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(",");
        if all.len() > SHOWN {
            text.push_str(&format!(" + {} more...", all.len() - SHOWN));
        }
        vec![name(o).into(), or_none(text).into(), age_of(o, now)]
    },
};

static NODES: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "Whether the node is ready, and schedulable."),
        col("Roles", "string", "The node's roles, from its labels."),
        AGE,
        col("Version", "string", "The kubelet's version."),
        wide("Internal-IP", "string", "The node's internal address."),
        wide("External-IP", "string", "The node's external address."),
        wide("OS-Image", "string", "The node's operating system image."),
        wide("Kernel-Version", "string", "The node's kernel version."),
        wide("Container-Runtime", "string", "The node's container runtime and version."),
    ],
    cells: &|o, now| {
        let mut status = Vec::new();
        if let Some(c) = items(o, "status.conditions").iter().find(|c| c["type"] == "Ready") {
            status.push(if c["status"] == "True" { "Ready" } else { "NotReady" });
        }
        if status.is_empty() {
            status.push("Unknown");
        }
        if at(o, "spec.unschedulable") == true {
            status.push("SchedulingDisabled");
        }
        let mut roles = BTreeSet::new();
        for (k, v) in at(o, "metadata.labels").as_object().into_iter().flatten() {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/").filter(|r| !r.is_empty()) {
                roles.insert(role.to_string());
            } else if k == "kubernetes.io/role" {
                if let Some(v) = v.as_str().filter(|v| !v.is_empty()) {
                    roles.insert(v.to_string());
                }
            }
        }
        let address = |type_: &str| {
            items(o, "status.addresses")
                .iter()
                .find(|a| a["type"] == type_)
                .map_or_else(|| "<none>".to_string(), |a| str_at(a, "address").to_string())
        };
        let info = |field: &str| {
            let v = str_at(o, &format!("status.nodeInfo.{field}"));
            if v.is_empty() {
                "<unknown>".to_string()
            } else {
                v.to_string()
            }
        };
        vec![
            name(o).into(),
            status.join(",").into(),
            or_none(roles.into_iter().collect::<Vec<_>>().join(",")).into(),
            age_of(o, now),
            str_at(o, "status.nodeInfo.kubeletVersion").into(),
            address("InternalIP").into(),
            address("ExternalIP").into(),
            info("osImage").into(),
            info("kernelVersion").into(),
            info("containerRuntimeVersion").into(),
        ]
    },
};

static EVENTS: Printer = Printer {
    columns: &[
        col("Last Seen", "string", "When the event was last seen."),
        col("Type", "string", "Normal or Warning."),
        col("Reason", "string", "Why the event happened, in one word."),
        col("Object", "string", "The object the event is about, as kind/name."),
        wide("Subobject", "string", "The part of the object the event is about."),
        wide("Source", "string", "The component that reported the event."),
        col("Message", "string", "What happened."),
        wide("First Seen", "string", "When the event was first seen."),
        wide("Count", "string", "How many times the event happened."),
        Column { priority: 1, ..NAME },
    ],
    cells: &|o, now| {
        let micro_age = |path: &str| age(at(o, path).as_str(), now);
        let first = match at(o, "firstTimestamp").as_str() {
            Some(_) => micro_age("firstTimestamp"),
            None => micro_age("eventTime"),
        };
        let mut last = match at(o, "lastTimestamp").as_str() {
            Some(_) => micro_age("lastTimestamp"),
            None => first.clone(),
        };
        let mut count = int_at(o, "count");
        if at(o, "series").is_object() {
            last = micro_age("series.lastObservedTime");
            count = int_at(o, "series.count");
        } else if count == 0 {
            count = 1;
        }
        let kind = str_at(o, "involvedObject.kind").to_lowercase();
        let target = match str_at(o, "involvedObject.name") {
            "" => kind,
            n => format!("{kind}/{n}"),
        };
        let first_non_empty = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.to_string() };
        let component = first_non_empty(str_at(o, "source.component"), str_at(o, "reportingComponent"));
        let instance = first_non_empty(str_at(o, "source.host"), str_at(o, "reportingInstance"));
        let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
        vec![
            last.into(),
            str_at(o, "type").into(),
            str_at(o, "reason").into(),
            target.into(),
            str_at(o, "involvedObject.fieldPath").into(),
            source.into(),
            str_at(o, "message").trim().into(),
            first.into(),
            count.into(),
            name(o).into(),
        ]
    },
};

#[cfg(test)]
mod tests;
