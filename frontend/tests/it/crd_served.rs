//! When a definition's resources are served, as kube-apiserver serves them: once kubectl reads
//! `Established`, creates of the resource succeed however many other definitions come and go
//! meanwhile (`kubectl create -f crd.yaml && kubectl wait --for condition=established && kubectl
//! create -f cr.yaml`, with another installer's definitions landing at the same time); and a
//! change of a definition (a schema change, a new version) does not fail the requests under way
//! when it lands: they finish by the definition they started with, new ones use the new one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::crd::{cluster, write};
use crate::harness::{both_backends, in_memory, Backend, Cluster, Credentials};

in_memory!(
    objects_are_created_once_their_definition_is_established,
    an_established_definition_stays_served_while_others_arrive,
    requests_under_way_survive_a_definition_change
);
both_backends!(a_definition_changed_under_load_fails_no_create);

/// A definition of `<plural>.<group>` with kind `kind`, one version `v1` whose `spec.size` is an
/// integer of at most `maximum` (defaulted to 1), and `/status`.
fn definition(group: &str, plural: &str, kind: &str, maximum: i64) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "maximum": maximum, "default": 1}}}}}}}]}
    })
}

/// `objects` as one YAML stream (JSON documents are YAML), as an installer's manifest file.
fn documents(objects: &[Value]) -> String {
    objects.iter().map(|o| format!("---\n{o}\n")).collect()
}

const DEFINITIONS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// How many definitions the other installer creates in each round.
const NOISE: usize = 20;

/// Another installer: creates [`NOISE`] definitions of group `noise.example.com` one after
/// another, each a watch event (and a status write) the definition controller works through
/// while the round's own definitions are created.
fn installer(c: &Arc<Cluster>, round: usize) -> tokio::task::JoinHandle<()> {
    let c = c.clone();
    tokio::spawn(async move {
        for n in 0..NOISE {
            let def = definition("noise.example.com", &format!("noise{round}x{n}s"), &format!("Noise{round}x{n}"), 10);
            let r = c.request(Credentials::Admin, "POST", DEFINITIONS, Some("application/json"), def.to_string()).await;
            assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        }
    })
}

/// Creates 40 definitions of group `base.example.com`: definitions already there make each
/// watch event's work for the controller (and any gap in what it serves) longer.
async fn base_definitions(c: &Cluster) {
    for n in 0..40 {
        let def = definition("base.example.com", &format!("base{n}s"), &format!("Base{n}"), 10);
        let r = c.request(Credentials::Admin, "POST", DEFINITIONS, Some("application/json"), def.to_string()).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
}

/// Rounds of what an installer script does, each with new definitions, while another
/// installer adds definitions: kubectl creates the definitions, waits for `Established`, and
/// creates an object of each, which must succeed every time (kube serves a definition's
/// resources before it says `Established`, and never stops while the definition stays).
async fn objects_are_created_once_their_definition_is_established(backend: Backend) {
    let c = Arc::new(cluster(backend).await);
    base_definitions(&c).await;
    for round in 0..5 {
        let noise = installer(&c, round);
        let (plural, kind) = (format!("gadget{round}s"), format!("Gadget{round}"));
        // Three definitions in one file, as an installer's CRD directory sends them.
        let defs: Vec<Value> =
            ["a", "b", "c"].iter().map(|g| definition(&format!("{g}.example.com"), &plural, &kind, 10)).collect();
        let file = write(&c, &format!("defs{round}.yaml"), &documents(&defs));
        c.must_kubectl(&["create", "-f", &file]).await;
        let names: Vec<String> = ["a", "b", "c"].iter().map(|g| format!("crd/{plural}.{g}.example.com")).collect();
        let mut wait = vec!["wait", "--for", "condition=established", "--timeout=30s"];
        wait.extend(names.iter().map(String::as_str));
        c.must_kubectl(&wait).await;
        let objects: Vec<Value> = ["a", "b", "c"]
            .iter()
            .map(|g| {
                json!({"apiVersion": format!("{g}.example.com/v1"), "kind": kind,
                    "metadata": {"name": "one", "namespace": "default"}, "spec": {"size": 3}})
            })
            .collect();
        let file = write(&c, &format!("objects{round}.yaml"), &documents(&objects));
        let out = c.kubectl(&["create", "-f", &file]).await;
        assert!(out.ok, "round {round}: kubectl create of the objects failed:\n{}{}", out.stdout, out.stderr);
        noise.await.expect("installer");
    }
}

/// A definition read `Established` stays served while other definitions arrive and get their
/// own statuses (each an event the controller handles): every read of its collection from the
/// moment `Established` is visible answers 200, never a 404.
async fn an_established_definition_stays_served_while_others_arrive(backend: Backend) {
    let c = Arc::new(cluster(backend).await);
    base_definitions(&c).await;
    let mut answers = std::collections::BTreeMap::<u16, usize>::new();
    for round in 0..6 {
        let mut def = definition("a.example.com", &format!("gadget{round}s"), &format!("Gadget{round}"), 10);
        def["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = json!([
            {"rule": "!has(self.size) || self.size % 2 == 1 || self.size < 8"},
            {"rule": "!has(self.size) || [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].exists(x, x == self.size)"},
            {"rule": "!has(self.size) || string(self.size).size() < 3"}]);
        let noise = installer(&c, round);
        let r = c.request(Credentials::Admin, "POST", DEFINITIONS, Some("application/json"), def.to_string()).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let name = format!("{DEFINITIONS}/gadget{round}s.a.example.com");
        let established = crate::harness::wait_for(std::time::Duration::from_secs(30), async || {
            let d = c.must_get(&name).await;
            d["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
        .await;
        assert!(established, "round {round}: established");
        let collection = format!("/apis/a.example.com/v1/namespaces/default/gadget{round}s");
        let mut after_noise = 0;
        while after_noise < 20 {
            if noise.is_finished() {
                after_noise += 1;
            }
            let r = c.request(Credentials::Admin, "GET", &collection, None, "").await;
            *answers.entry(r.status).or_default() += 1;
        }
        noise.await.expect("installer");
    }
    assert_eq!(answers.keys().copied().collect::<Vec<_>>(), vec![200], "answers by status: {answers:?}");
}

/// Creates of `widgets.example.com` objects running while the definition's schema changes
/// several times (each change a new form of the resource) all succeed, each checked by the
/// schema it met: kube lets requests under way finish on the definition they started with.
async fn requests_under_way_survive_a_definition_change(backend: Backend) {
    let c = Arc::new(cluster(backend).await);
    a_definition_changed_under_load(&c, 300, 12).await;
}

async fn a_definition_changed_under_load_fails_no_create(backend: Backend) {
    let c = Arc::new(cluster(backend).await);
    a_definition_changed_under_load(&c, 120, 6).await;
}

/// `creates` objects created (and some read back, with a page of the collection) by four
/// clients while `changes` schema changes land; asserts every request succeeded, and that the
/// definition is served in its last form after.
async fn a_definition_changed_under_load(c: &Arc<Cluster>, creates: usize, changes: i64) {
    let def = definition("example.com", "widgets", "Widget", 100);
    let r = c.request(Credentials::Admin, "POST", DEFINITIONS, Some("application/json"), def.to_string()).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com"]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let changer = {
        let (c, stop) = (c.clone(), stop.clone());
        tokio::spawn(async move {
            let path = format!("{DEFINITIONS}/widgets.example.com");
            for maximum in 101..=100 + changes {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // Each maximum is a new spec: a new form of the resource to serve.
                let patch = json!([{"op": "replace",
                    "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/maximum",
                    "value": maximum}]);
                let r = c
                    .request(Credentials::Admin, "PATCH", &path, Some("application/json-patch+json"), patch.to_string())
                    .await;
                assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
    };
    let clients: Vec<_> = (0..4)
        .map(|client| {
            let c = c.clone();
            tokio::spawn(async move {
                let path = "/apis/example.com/v1/namespaces/default/widgets";
                let mut failures = Vec::new();
                for i in (client..creates).step_by(4) {
                    let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": format!("w{i}")}, "spec": {"size": 50}});
                    let r =
                        c.request(Credentials::Admin, "POST", path, Some("application/json"), obj.to_string()).await;
                    if r.status != 201 {
                        failures.push(format!("w{i}: {} {}", r.status, String::from_utf8_lossy(&r.body)));
                    }
                    // Reads meanwhile: the object just made, and a page of the collection.
                    if i % 3 == 0 {
                        for read in [format!("{path}/w{i}"), format!("{path}?limit=10")] {
                            let r = c.request(Credentials::Admin, "GET", &read, None, "").await;
                            if r.status != 200 {
                                failures.push(format!("{read}: {} {}", r.status, String::from_utf8_lossy(&r.body)));
                            }
                        }
                    }
                }
                failures
            })
        })
        .collect();
    let mut failures = Vec::new();
    for client in clients {
        failures.extend(client.await.expect("client"));
    }
    stop.store(true, Ordering::Relaxed);
    changer.await.expect("changer");
    assert!(failures.is_empty(), "{} requests failed ({creates} creates): {failures:#?}", failures.len());
    // The last form is the one served: its maximum refuses what it is below.
    let last = 100 + changes;
    let served = crate::harness::wait_for(std::time::Duration::from_secs(10), async || {
        let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "over"}, "spec": {"size": last + 1}});
        let r = c
            .request(
                Credentials::Admin,
                "POST",
                "/apis/example.com/v1/namespaces/default/widgets?dryRun=All",
                Some("application/json"),
                obj.to_string(),
            )
            .await;
        r.status == 422 && String::from_utf8_lossy(&r.body).contains(&format!("less than or equal to {last}"))
    })
    .await;
    assert!(served, "the definition's last schema is enforced");
}
