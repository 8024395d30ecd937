//! Custom resource scenarios: the same requests as the ConfigMap ones, on resources a
//! CustomResourceDefinition declares, so one run compares them on the same frontend.
//!
//! * `cr_get_c16`, `cr_create_c16`: as `get_c16` and `create_c16`, on `BenchWidget`s (a small
//!   definition of the usual shape: a schema with a default, an enum, a bound and a CEL rule,
//!   `/status`), each about the size of the ConfigMaps (a 256-byte string).
//! * `list_cm1k_c4`, `cr_list1k_c4`: LIST of 1,000 ConfigMaps / BenchWidgets, 4 in flight.
//! * `cr_list10k_c1`: as `list_pods10k_c1`, LIST of 10,000 BenchWidgets of about a pod's size
//!   (1.5 KiB), the frontend's memory sampled: custom resources stream like built-ins.
//! * `cr_create_large_c4`: POST of `DatabaseCluster`s, the large definition of
//!   `frontend/apiextensions/testdata/large-crd.yaml` (thousands of schema lines, a pod
//!   template, CEL rules), each object the 6 KiB (as JSON) `large-object.yaml`; with `--server-pid`,
//!   the server CPU per create. `cr_create_large_noschema_c4` POSTs the same objects to a
//!   definition that keeps any fields (no schema to check): the difference in CPU per create
//!   is what validating against the large schema costs.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use rand::Rng;
use serde_json::{json, Value};

use crate::client::{Conn, Target};
use crate::scenario::{closed_loop, configmap, ensure_namespace, list_of, preload};
use crate::stats::Outcome;

const GROUP: &str = "bench.ballast.dev";

const LARGE_CRD: &str = include_str!("../../../frontend/apiextensions/testdata/large-crd.yaml");
const LARGE_OBJECT: &str = include_str!("../../../frontend/apiextensions/testdata/large-object.yaml");

fn widgets_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("benchwidgets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "benchwidgets", "singular": "benchwidget", "kind": "BenchWidget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["key"],
                        "x-kubernetes-validations": [{"rule": "self.replicas <= 100", "message": "at most 100 replicas"}],
                        "properties": {
                            "key": {"type": "string", "maxLength": 4096},
                            "replicas": {"type": "integer", "minimum": 0, "default": 1},
                            "mode": {"type": "string", "enum": ["fast", "safe"]}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}
    })
}

fn widget(name: &str, key_bytes: usize) -> Bytes {
    let body = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "BenchWidget",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"key": "v".repeat(key_bytes), "mode": "fast"}});
    Bytes::from(body.to_string())
}

/// The large definition, and one served with the same objects but no schema.
fn large_crds() -> anyhow::Result<(Value, Value)> {
    let large: Value = serde_yaml_ng::from_str(LARGE_CRD).context("large-crd.yaml")?;
    let mut blob = large.clone();
    let plural = format!("{}blobs", large["spec"]["names"]["plural"].as_str().unwrap_or(""));
    let kind = format!("{}Blob", large["spec"]["names"]["kind"].as_str().unwrap_or(""));
    blob["metadata"] = json!({"name": format!("{plural}.{}", large["spec"]["group"].as_str().unwrap_or(""))});
    blob["spec"]["names"] = json!({"plural": plural, "kind": kind});
    for v in blob["spec"]["versions"].as_array_mut().into_iter().flatten() {
        v["schema"] = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
        if let Some(v) = v.as_object_mut() {
            v.remove("additionalPrinterColumns");
            v.remove("selectableFields");
        }
    }
    Ok((large, blob))
}

/// Creates `crd` (or finds it) and waits until its resources are served.
async fn ensure_crd(c: &Conn, crd: &Value) -> anyhow::Result<String> {
    let a =
        c.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Bytes::from(crd.to_string())).await?;
    if a.status != 201 && a.status != 409 {
        bail!("creating {}: {} {}", crd["metadata"]["name"], a.status, String::from_utf8_lossy(&a.body));
    }
    let spec = &crd["spec"];
    let version = spec["versions"][0]["name"].as_str().unwrap_or("v1");
    let path = format!(
        "/apis/{}/{version}/namespaces/default/{}",
        spec["group"].as_str().unwrap_or(""),
        spec["names"]["plural"].as_str().unwrap_or("")
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if c.call("GET", &format!("{path}?limit=1"), Bytes::new()).await?.status == 200 {
            return Ok(path);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{} was not served within 30 s", crd["metadata"]["name"])
}

pub(crate) async fn get(t: &Target, workers: usize, duration: Duration) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let path = ensure_crd(&conns[0], &widgets_crd()).await?;
    let objects = 1000;
    let bodies = (0..objects).map(|i| (path.clone(), widget(&format!("get-{i}"), 256))).collect();
    preload(&conns, bodies, 32).await?;
    Ok(closed_loop(&conns, workers, duration, move |c, _, _| {
        let path = path.clone();
        async move {
            let i = rand::thread_rng().gen_range(0..objects);
            let t0 = Instant::now();
            let a = c.call("GET", &format!("{path}/get-{i}"), Bytes::new()).await;
            a.is_ok_and(|a| a.status == 200).then(|| t0.elapsed())
        }
    })
    .await)
}

pub(crate) async fn create(t: &Target, workers: usize, duration: Duration) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let path = ensure_crd(&conns[0], &widgets_crd()).await?;
    let run: u32 = rand::thread_rng().gen();
    Ok(closed_loop(&conns, workers, duration, move |c, w, seq| {
        let path = path.clone();
        async move {
            let body = widget(&format!("create-{run:08x}-{w}-{seq}"), 256);
            let t0 = Instant::now();
            let a = c.call("POST", &path, body).await;
            a.is_ok_and(|a| a.status == 201).then(|| t0.elapsed())
        }
    })
    .await)
}

pub(crate) async fn list_configmaps(t: &Target, duration: Duration) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let ns = "bench-list-cm";
    ensure_namespace(&conns[0], ns).await?;
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    list_of(&conns, &path, 1000, &|i| configmap(&format!("cm-{i:04}")), 4, duration, None).await
}

pub(crate) async fn list(
    t: &Target,
    count: usize,
    key_bytes: usize,
    workers: usize,
    duration: Duration,
    pid: Option<u32>,
) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    ensure_crd(&conns[0], &widgets_crd()).await?;
    let ns = format!("bench-list-cr{count}");
    ensure_namespace(&conns[0], &ns).await?;
    let path = format!("/apis/{GROUP}/v1/namespaces/{ns}/benchwidgets");
    list_of(&conns, &path, count, &|i| widget(&format!("w-{i:05}"), key_bytes), workers, duration, pid).await
}

pub(crate) async fn create_large(
    t: &Target,
    schema: bool,
    workers: usize,
    duration: Duration,
) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let (large, blob) = large_crds()?;
    let crd = if schema { large } else { blob };
    let path = ensure_crd(&conns[0], &crd).await?;
    let mut object: Value = serde_yaml_ng::from_str(LARGE_OBJECT).context("large-object.yaml")?;
    let version = crd["spec"]["versions"][0]["name"].as_str().unwrap_or("v1");
    object["apiVersion"] = format!("{}/{version}", crd["spec"]["group"].as_str().unwrap_or("")).into();
    object["kind"] = crd["spec"]["names"]["kind"].clone();
    let run: u32 = rand::thread_rng().gen();
    // Checked once before timing: a refusal here would make every timed create an error.
    object["metadata"]["name"] = format!("probe-{run:08x}").into();
    let a = conns[0].call("POST", &path, Bytes::from(object.to_string())).await?;
    if a.status != 201 {
        bail!("creating a {}: {} {}", object["kind"], a.status, String::from_utf8_lossy(&a.body));
    }
    let object = std::sync::Arc::new(object);
    Ok(closed_loop(&conns, workers, duration, move |c, w, seq| {
        let (path, object) = (path.clone(), object.clone());
        async move {
            let mut obj = (*object).clone();
            obj["metadata"]["name"] = format!("create-{run:08x}-{w}-{seq}").into();
            let body = Bytes::from(obj.to_string());
            let t0 = Instant::now();
            let a = c.call("POST", &path, body).await;
            a.is_ok_and(|a| a.status == 201).then(|| t0.elapsed())
        }
    })
    .await)
}
