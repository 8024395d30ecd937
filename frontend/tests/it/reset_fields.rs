//! Server-side apply's reset fields on writes that are not applies (kube's `ResetFieldsFor`):
//! a create or update through the object of a kind with `/status` owns no `status` field (a
//! Pod's `status.phase: Pending`, set on create, is nobody's), and an update through
//! `/status` owns no `spec` field, as kube-apiserver records them.

use serde_json::{json, Value};

use crate::harness::{in_memory, Backend, Cluster, Credentials};

in_memory!(writes_own_no_fields_their_strategy_resets);

/// The managedFields entry of `manager` in `obj`.
fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|m| m.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no entry of {manager}: {obj}"))
}

async fn writes_own_no_fields_their_strategy_resets(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "message": "set by the client"}});
    let r = c
        .request(
            Credentials::Admin,
            "POST",
            &format!("{pods}?fieldManager=creator"),
            Some("application/json"),
            pod.to_string(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let created = r.json();
    assert_eq!(created["status"]["phase"], "Pending", "the strategy sets a new Pod's status");
    let creator = entry(&created, "creator");
    assert_eq!((&creator["operation"], creator.get("subresource")), (&json!("Update"), None));
    // The spec (as sent and defaulted), no status.
    let owned: Vec<&String> = creator["fieldsV1"].as_object().expect("fieldsV1").keys().collect();
    assert_eq!(owned, ["f:spec"], "{creator}");
    assert_eq!(creator["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:image"], json!({}));

    // A kubelet's status update owns the status it changed, and none of the spec it sent back.
    let mut status = created.clone();
    status["status"] = json!({"phase": "Running", "hostIP": "10.0.0.1"});
    status["metadata"].as_object_mut().expect("metadata").remove("managedFields");
    let r = c
        .request(
            Credentials::Admin,
            "PUT",
            &format!("{pods}/p/status?fieldManager=kubelet"),
            Some("application/json"),
            status.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let updated = r.json();
    let kubelet = entry(&updated, "kubelet");
    assert_eq!(kubelet["subresource"], "status");
    assert_eq!(kubelet["fieldsV1"], json!({"f:status": {"f:hostIP": {}, "f:phase": {}}}), "{kubelet}");
    assert_eq!(entry(&updated, "creator")["fieldsV1"], creator["fieldsV1"], "the creator's entry is unchanged");

    // An update through the object that sends a status back owns none of it either.
    let mut again = updated.clone();
    again["metadata"]["labels"] = json!({"app": "web"});
    again["status"]["phase"] = "Failed".into();
    again["metadata"].as_object_mut().expect("metadata").remove("managedFields");
    let r = c
        .request(
            Credentials::Admin,
            "PUT",
            &format!("{pods}/p?fieldManager=editor"),
            Some("application/json"),
            again.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let edited = r.json();
    assert_eq!(edited["status"]["phase"], "Running", "the object's update kept the status");
    assert_eq!(entry(&edited, "editor")["fieldsV1"], json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}));
}
