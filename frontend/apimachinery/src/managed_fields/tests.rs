//! The field manager on built-in kinds: FieldsV1 encodings as kube writes them (lists by key,
//! sets, atomic lists and structs, nested maps), and the apply rules (prune, shared ownership,
//! conflicts, caps).

use serde_json::{json, Value};

use super::*;
use crate::typed::TypeSchema;

fn schema(group: &str, kind: &str) -> TypeSchema {
    let version = "v1";
    TypeSchema::from_message(crate::schema::lookup(group, version, kind).expect("built-in kind"))
}

const NOW: &str = "2026-11-26T10:00:00Z";

/// Applies `config` to `live` as `manager`; returns (object, managedFields).
fn apply(s: &TypeSchema, gv: &str, live: &Value, config: &Value, manager: &str) -> Result<(Value, Value), ApplyError> {
    let fm = FieldManager { schema: s, api_version: gv, subresource: "", versions: None, reset: &[] };
    let mut live = live.clone();
    let (obj, managed) = fm.apply(&mut live, config, manager, false, NOW, "test")?;
    let mut obj = obj.unwrap_or(live);
    let managed = managed.unwrap_or(Value::Null);
    obj["metadata"]["managedFields"] = managed.clone();
    Ok((obj, managed))
}

fn fields_of(managed: &Value, manager: &str) -> Value {
    managed
        .as_array()
        .and_then(|l| l.iter().find(|e| e["manager"] == manager))
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn apply_encodings_of_built_in_kinds() {
    let cases = [
        // kube's documented ConfigMap example.
        (
            "",
            "v1",
            "ConfigMap",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "test-cm", "namespace": "default", "labels": {"test-label": "test"}},
                   "data": {"key": "some value"}}),
            json!({"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {"f:test-label": {}}}}),
        ),
        // Containers by name, ports by containerPort and protocol (defaulted to TCP), env by
        // name; atomic lists (args, tolerations), an atomic struct (the label selector) and an
        // atomic map (nodeSelector) are leaves; resource maps are granular.
        (
            "apps",
            "apps/v1",
            "Deployment",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                            "template": {"metadata": {"labels": {"app": "d"}},
                                         "spec": {"containers": [{"name": "nginx", "image": "nginx", "args": ["-g"],
                                                                  "ports": [{"containerPort": 80}],
                                                                  "env": [{"name": "A", "value": "1"}],
                                                                  "resources": {"limits": {"cpu": "1"}}}],
                                                  "tolerations": [{"key": "k", "operator": "Exists"}],
                                                  "nodeSelector": {"disk": "ssd"}}}}}),
            json!({"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {r#"k:{"name":"nginx"}"#: {
                        ".": {}, "f:args": {}, "f:env": {r#"k:{"name":"A"}"#: {".": {}, "f:name": {}, "f:value": {}}},
                        "f:image": {}, "f:name": {},
                        "f:ports": {r#"k:{"containerPort":80,"protocol":"TCP"}"#: {".": {}, "f:containerPort": {}}},
                        "f:resources": {"f:limits": {"f:cpu": {}}}}},
                    "f:nodeSelector": {},
                    "f:tolerations": {}}}}}),
        ),
        // Service ports by port and protocol; finalizers are a set; owner references by uid (an
        // atomic struct, so the element has nothing below it); the selector map is atomic.
        (
            "",
            "v1",
            "Service",
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "s", "finalizers": ["example.com/a"],
                                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-1"}]},
                   "spec": {"ports": [{"port": 80, "protocol": "UDP", "targetPort": 8080}], "selector": {"app": "s"}}}),
            json!({"f:metadata": {"f:finalizers": {r#"v:"example.com/a""#: {}},
                                  "f:ownerReferences": {r#"k:{"uid":"u-1"}"#: {}}},
                   "f:spec": {"f:ports": {r#"k:{"port":80,"protocol":"UDP"}"#: {".": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}},
                              "f:selector": {}}}),
        ),
        // Volumes by name, with a nested granular struct; an empty struct is a leaf.
        (
            "",
            "v1",
            "Pod",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "c", "image": "i", "command": ["sh"],
                                            "volumeMounts": [{"name": "data", "mountPath": "/d"}]}],
                            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "x"}}]}}),
            json!({"f:spec": {
                "f:containers": {r#"k:{"name":"c"}"#: {".": {}, "f:command": {}, "f:image": {}, "f:name": {},
                    "f:volumeMounts": {r#"k:{"mountPath":"/d"}"#: {".": {}, "f:mountPath": {}, "f:name": {}}}}},
                "f:volumes": {
                    r#"k:{"name":"cfg"}"#: {".": {}, "f:configMap": {"f:name": {}}, "f:name": {}},
                    r#"k:{"name":"data"}"#: {".": {}, "f:emptyDir": {}, "f:name": {}}}}}),
        ),
    ];
    for (group, gv, kind, config, want) in cases {
        let s = schema(group, kind);
        let live = json!({"apiVersion": gv, "kind": kind, "metadata": {"name": config["metadata"]["name"]}});
        let (_, managed) = apply(&s, gv, &live, &config, "kubectl").expect("apply");
        assert_eq!(fields_of(&managed, "kubectl"), want, "{kind}");
        // The encoding is the wire text kube writes: keys in element order, "." first.
        let set = crate::fieldpath::from_fields_v1(&want).expect("decodes");
        let text = crate::fieldpath::to_fields_v1(&set);
        assert_eq!(serde_json::from_str::<Value>(&text).expect("json"), want);
    }
}

/// Reset fields (kube's `ResetFieldsFor`): a manager never owns them, on create or update,
/// even when its earlier entry did; an update changing only them leaves no entry.
#[test]
fn updates_own_no_reset_fields() {
    let s = schema("", "Pod");
    let status = [crate::fieldpath::PathElement::Field("status".into())];
    let reset: &[&[crate::fieldpath::PathElement]] = &[&status];
    let fm = FieldManager { schema: &s, api_version: "v1", subresource: "", versions: None, reset };
    let new = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}});
    let managed = fm.update(None, &new, None, "creator", NOW).expect("tracked");
    assert_eq!(fields_of(&managed, "creator"), json!({"f:spec": {"f:nodeName": {}}}));

    // An earlier entry that owned status (written before, or by a server without reset
    // fields) loses it at the manager's next write.
    let mut live = new.clone();
    live["metadata"]["managedFields"] = json!([{"manager": "creator", "operation": "Update", "apiVersion": "v1",
        "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:nodeName": {}}, "f:status": {"f:phase": {}}}}]);
    let mut next = new.clone();
    next["spec"]["hostname"] = "h".into();
    let managed = fm.update(Some(&live), &next, None, "creator", NOW).expect("tracked");
    assert_eq!(fields_of(&managed, "creator"), json!({"f:spec": {"f:hostname": {}, "f:nodeName": {}}}));

    // A status change alone through the object records nothing for its manager.
    let mut changed = new.clone();
    changed["status"]["phase"] = "Running".into();
    let mut live = new.clone();
    live["metadata"]["managedFields"] = managed.clone();
    let managed = fm.update(Some(&live), &changed, None, "other", NOW).expect("tracked");
    assert_eq!(fields_of(&managed, "other"), Value::Null);
}

#[test]
fn update_on_create_marks_new_maps_and_elements() {
    let s = schema("", "ConfigMap");
    let fm = FieldManager { schema: &s, api_version: "v1", subresource: "", versions: None, reset: &[] };
    let new = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "uid": "x", "labels": {"a": "b"}},
                     "data": {"k": "v"}});
    let managed = fm.update(None, &new, None, "kubectl-create", NOW).expect("tracked");
    assert_eq!(
        managed,
        json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": NOW, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}}}])
    );
    // The wire text of the set is kube's, byte for byte.
    let set = crate::fieldpath::from_fields_v1(&managed[0]["fieldsV1"]).expect("set");
    assert_eq!(
        crate::fieldpath::to_fields_v1(&set),
        r#"{"f:data":{".":{},"f:k":{}},"f:metadata":{"f:labels":{".":{},"f:a":{}}}}"#
    );
    // An update that changes nothing leaves the entry (and its time) alone.
    let mut live = new.clone();
    live["metadata"]["managedFields"] = managed.clone();
    assert_eq!(fm.update(Some(&live), &new, None, "other", "2030-01-01T00:00:00Z"), Some(managed));
}

#[test]
fn apply_prunes_only_what_no_one_else_owns() {
    let s = schema("", "ConfigMap");
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let v1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2", "c": "3"}});
    let (obj, _) = apply(&s, "v1", &live, &v1, "one").expect("first apply");
    // Another manager shares `b`.
    let share = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"b": "2"}});
    let (obj, _) = apply(&s, "v1", &obj, &share, "two").expect("shared");
    let v2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"c": "3"}});
    let (obj, managed) = apply(&s, "v1", &obj, &v2, "one").expect("second apply");
    assert_eq!(obj["data"], json!({"b": "2", "c": "3"}));
    assert_eq!(fields_of(&managed, "one"), json!({"f:data": {"f:c": {}}}));
    assert_eq!(fields_of(&managed, "two"), json!({"f:data": {"f:b": {}}}));
}

#[test]
fn conflicts_name_each_field_and_manager() {
    let s = schema("", "ConfigMap");
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let mine =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    let (obj, _) = apply(&s, "v1", &live, &mine, "kubectl").expect("apply");
    let theirs =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9", "b": "9"}});
    let err = apply(&s, "v1", &obj, &theirs, "other").expect_err("conflicts");
    assert_eq!(err.to_string(), "Apply failed with 2 conflicts: conflicts with \"kubectl\":\n- .data.a\n- .data.b");
    let one = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9"}});
    let err = apply(&s, "v1", &obj, &one, "other").expect_err("conflict");
    assert_eq!(err.to_string(), r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#);
    // An updater is named with its apiVersion.
    let id = ManagerId::new("kube-controller-manager", Operation::Update, "apps/v1", "");
    assert_eq!(id.describe(), r#""kube-controller-manager" using apps/v1"#);
    assert_eq!(ManagerId::new("m", Operation::Apply, "v1", "status").describe(), r#""m" with subresource "status""#);
}

#[test]
fn apply_refuses_bad_lists_and_managed_fields() {
    let s = schema("apps", "Deployment");
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
    let no_key = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                        "spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
    let err = apply(&s, "apps/v1", &live, &no_key, "m").expect_err("no key");
    assert_eq!(
        err.to_string(),
        "failed to create typed patch object (test): .spec.template.spec.containers: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)"
    );
    let dup = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                     "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}});
    let err = apply(&s, "apps/v1", &live, &dup, "m").expect_err("duplicate");
    assert!(
        err.to_string().ends_with(r#".spec.template.spec.containers: duplicate entries for key [name="a"]"#),
        "{err}"
    );
    let managed =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "managedFields": []}});
    assert_eq!(
        apply(&s, "apps/v1", &live, &managed, "m"),
        Err(ApplyError::BadRequest("metadata.managedFields must be nil".into()))
    );
}

#[test]
fn update_entries_are_capped_into_ancient_changes() {
    let s = schema("", "ConfigMap");
    let fm = FieldManager { schema: &s, api_version: "v1", subresource: "", versions: None, reset: &[] };
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "uid": "u"}, "data": {}});
    obj["metadata"]["managedFields"] = fm.update(None, &obj, None, "creator", "2026-01-01T00:00:00Z").expect("tracked");
    for i in 0..12 {
        let mut new = obj.clone();
        new["data"][format!("k{i}")] = json!("v");
        new["metadata"].as_object_mut().expect("meta").remove("managedFields");
        let time = format!("2026-01-01T00:00:{:02}Z", i + 1);
        let managed = fm.update(Some(&obj), &new, None, &format!("m{i:02}"), &time).expect("tracked");
        new["metadata"]["managedFields"] = managed;
        obj = new;
    }
    let entries = obj["metadata"]["managedFields"].as_array().expect("entries");
    assert_eq!(entries.len(), MAX_UPDATE_MANAGERS);
    let ancient = entries.iter().find(|e| e["manager"] == ANCIENT_CHANGES).expect("ancient-changes");
    assert!(ancient["fieldsV1"]["f:data"].get("f:k0").is_some(), "{ancient}");
    assert!(entries.iter().any(|e| e["manager"] == "m11"));
}

#[test]
fn managed_fields_decode_errors_are_kubes() {
    assert_eq!(
        Managers::decode(&json!([{"manager": "m", "operation": "Bogus", "apiVersion": "v1"}])),
        Err("operation must be `Apply` or `Update`".into())
    );
    assert_eq!(
        Managers::decode(&json!([{"manager": "m", "operation": "Update", "apiVersion": "v1"}])),
        Err("missing fieldsType in managed fields entry 0".into())
    );
    assert_eq!(
        Managers::decode(&json!([{"manager": "m", "operation": "Update"}])),
        Err("apiVersion must not be empty".into())
    );
}

#[test]
fn create_of_a_defaulted_deployment_records_what_kube_records() {
    // `kubectl create deployment nginx --image=nginx` after defaulting, and the entry kube
    // writes for it: no `.` on the structs Go always holds (spec.strategy, spec.template),
    // `.` on the maps, pointer structs and list elements the create added.
    let s = schema("apps", "Deployment");
    let fm = FieldManager { schema: &s, api_version: "apps/v1", subresource: "", versions: None, reset: &[] };
    let new = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "uid": "u", "labels": {"app": "nginx"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "nginx"}}, "progressDeadlineSeconds": 600,
                 "revisionHistoryLimit": 10,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx", "imagePullPolicy": "Always",
                                                       "resources": {}, "terminationMessagePath": "/dev/termination-log",
                                                       "terminationMessagePolicy": "File"}],
                                       "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                                       "schedulerName": "default-scheduler", "securityContext": {},
                                       "terminationGracePeriodSeconds": 30}}},
        "status": {}});
    let managed = fm.update(None, &new, None, "kubectl-create", NOW).expect("tracked");
    assert_eq!(
        managed[0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
               "f:spec": {"f:progressDeadlineSeconds": {}, "f:replicas": {}, "f:revisionHistoryLimit": {}, "f:selector": {},
                          "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
                          "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                         "f:spec": {"f:containers": {r#"k:{"name":"nginx"}"#: {
                                                        ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                                                        "f:resources": {}, "f:terminationMessagePath": {},
                                                        "f:terminationMessagePolicy": {}}},
                                                    "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                                                    "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}}})
    );
}

/// Two versions of one kind whose field is `old` in `example.com/v1` and `new` in
/// `example.com/v2`.
struct Renamed;

impl KindVersions for Renamed {
    fn schema(&self, api_version: &str) -> Option<std::sync::Arc<TypeSchema>> {
        matches!(api_version, "example.com/v1" | "example.com/v2").then(|| std::sync::Arc::new(TypeSchema::deduced()))
    }

    fn convert(&self, obj: &Value, from: &str, to: &str) -> Option<Value> {
        let field = |v: &str| if v == "example.com/v1" { "old" } else { "new" };
        let mut obj = obj.as_object()?.clone();
        if let Some(v) = obj.remove(field(from)) {
            obj.insert(field(to).into(), v);
        }
        obj.insert("apiVersion".into(), to.into());
        Some(Value::Object(obj))
    }
}

fn renamed(version: &str, value: &str) -> Value {
    let field = if version == "example.com/v1" { "old" } else { "new" };
    json!({"apiVersion": version, "kind": "Thing", "metadata": {"name": "t"}, field: value})
}

#[test]
fn managers_of_other_versions_are_compared_in_their_own() {
    let s = TypeSchema::deduced();
    let v1 = FieldManager {
        schema: &s,
        api_version: "example.com/v1",
        subresource: "",
        versions: Some(&Renamed),
        reset: &[],
    };
    let v2 = FieldManager { api_version: "example.com/v2", ..v1 };
    // m1 applies `old` through v1; an entry of a version the kind is not served in rides along.
    let mut live = renamed("example.com/v1", "a");
    live["metadata"]["managedFields"] = json!([{"manager": "gone", "operation": "Update", "apiVersion": "example.com/v9",
        "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": {"f:new": {}}}]);
    let (obj, managed) =
        v1.apply(&mut live, &renamed("example.com/v1", "a"), "m1", false, NOW, "test").expect("applies");
    let mut live = obj.unwrap_or(live);
    assert_eq!(fields_of(managed.as_ref().expect("managers"), "m1"), json!({"f:old": {}}));
    assert_eq!(managed.as_ref().expect("managers").as_array().map(Vec::len), Some(1), "the v9 entry is dropped");
    live["metadata"]["managedFields"] = managed.expect("managers");

    // m2 applying another value through v2 conflicts with m1's v1 field, named as m1 owns it.
    let served_v2 = v1.versions.and_then(|v| v.convert(&live, "example.com/v1", "example.com/v2")).expect("converts");
    let err = v2.apply(&mut served_v2.clone(), &renamed("example.com/v2", "b"), "m2", false, NOW, "test");
    assert_eq!(
        err.err().map(|e| e.to_string()).as_deref(),
        Some(r#"Apply failed with 1 conflict: conflict with "m1": .old"#)
    );

    // An update through v2 takes the field from m1, compared in v1.
    let mut new = served_v2.clone();
    new["new"] = "b".into();
    new["metadata"].as_object_mut().map(|m| m.remove("managedFields"));
    let managed = v2.update(Some(&served_v2), &new, None, "u2", NOW).expect("managers");
    assert_eq!(fields_of(&managed, "m1"), Value::Null, "m1's only field moved");
    assert_eq!(fields_of(&managed, "u2"), json!({"f:new": {}}));
    assert_eq!(managed[0]["apiVersion"], "example.com/v2");

    // Without the versions, m1's field is looked for in v2's fields and stays m1's.
    let blind = FieldManager { versions: None, ..v2 };
    let managed = blind.update(Some(&served_v2), &new, None, "u2", NOW).expect("managers");
    assert_eq!(fields_of(&managed, "m1"), json!({"f:old": {}}));
}

#[test]
fn an_applier_moving_versions_is_pruned_in_its_last() {
    let s = TypeSchema::deduced();
    let v1 = FieldManager {
        schema: &s,
        api_version: "example.com/v1",
        subresource: "",
        versions: Some(&Renamed),
        reset: &[],
    };
    let v2 = FieldManager { api_version: "example.com/v2", ..v1 };
    let to_v2 = |obj: &Value| Renamed.convert(obj, "example.com/v1", "example.com/v2").expect("converts");
    let mut live = json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}});
    let (obj, managed) =
        v1.apply(&mut live, &renamed("example.com/v1", "a"), "m", false, NOW, "test").expect("applies");
    let mut live = to_v2(&obj.unwrap_or(live));
    live["metadata"]["managedFields"] = managed.expect("managers");
    // m applies through v2 without the field it set through v1: it goes.
    let empty =
        json!({"apiVersion": "example.com/v2", "kind": "Thing", "metadata": {"name": "t", "labels": {"x": "y"}}});
    let (obj, managed) = v2.apply(&mut live.clone(), &empty, "m", false, NOW, "test").expect("applies");
    let obj = obj.expect("changed");
    assert_eq!(obj.get("new"), None, "{obj}");
    let mine = fields_of(managed.as_ref().expect("managers"), "m");
    assert_eq!((mine.get("f:old"), mine.get("f:new")), (None, None), "{mine}");
    assert_eq!(managed.expect("managers")[0]["apiVersion"], "example.com/v2");
    // Co-owned through v2 by an updater, it stays.
    let mut shared = live.clone();
    let mut managed = shared["metadata"]["managedFields"].clone();
    managed.as_array_mut().expect("list").push(json!({"manager": "u", "operation": "Update",
        "apiVersion": "example.com/v2", "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": {"f:new": {}}}));
    shared["metadata"]["managedFields"] = managed;
    let (obj, _) = v2.apply(&mut shared, &empty, "m", false, NOW, "test").expect("applies");
    assert_eq!(obj.expect("changed")["new"], "a");
}

#[test]
fn create_marks_pointer_structs_as_each_go_type_declares_them() {
    // A ReplicationController's `spec.template` is a pointer in Go (a Deployment's is a value):
    // kube's zero value has none, so a create adds it, and it and every struct and list within
    // get `.` (the pod's `containers` too, which a Deployment's zero value holds as `null`).
    // The selector is an atomic map: one field. `status.replicas: 0` is the zero value's own
    // (Go prints it: no `omitempty`), so it is no change and nobody's.
    let s = schema("", "ReplicationController");
    let fm = FieldManager { schema: &s, api_version: "v1", subresource: "", versions: None, reset: &[] };
    let new = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "web", "namespace": "default", "uid": "u"},
        "spec": {"replicas": 1, "selector": {"app": "web"},
                 "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}], "restartPolicy": "Always",
                                       "securityContext": {}}}},
        "status": {"replicas": 0}});
    let managed = fm.update(None, &new, None, "kubectl-create", NOW).expect("tracked");
    assert_eq!(
        managed[0]["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}, "f:selector": {},
            "f:template": {".": {},
                "f:metadata": {".": {}, "f:creationTimestamp": {}, "f:labels": {".": {}, "f:app": {}}},
                "f:spec": {".": {}, "f:containers": {".": {}, r#"k:{"name":"c"}"#: {".": {}, "f:image": {}, "f:name": {}}},
                    "f:restartPolicy": {}, "f:securityContext": {}}}}})
    );

    // A custom resource has no Go type: kube's zero value is an empty object, so its `spec`
    // is added too (`f:spec: {.: {}}`, as kube records a custom resource's create).
    let s = TypeSchema::deduced();
    let fm = FieldManager { schema: &s, api_version: "example.com/v1", subresource: "", versions: None, reset: &[] };
    let new = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {"size": 1}});
    let managed = fm.update(None, &new, None, "m", NOW).expect("tracked");
    assert_eq!(
        managed[0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {".": {}, "f:size": {}}})
    );
}
