//! The autoscaling/v1 form of a HorizontalPodAutoscaler stored at autoscaling/v2, as kube's
//! conversion makes it.
//!
//! v1 has one metric field, the CPU utilization target (`spec.targetCPUUtilizationPercentage`,
//! and `status.currentCPUUtilizationPercentage`). What else v2 holds travels in annotations of
//! the v1 form, so that a v1 client reading and writing the object back loses nothing:
//!
//! | annotation                                        | holds                                                                 |
//! |---------------------------------------------------|-----------------------------------------------------------------------|
//! | `autoscaling.alpha.kubernetes.io/metrics`         | the spec metrics other than a CPU utilization target, as v1 `MetricSpec`s |
//! | `autoscaling.alpha.kubernetes.io/current-metrics` | every status metric, as v1 `MetricStatus`es                            |
//! | `autoscaling.alpha.kubernetes.io/behavior`        | the behavior, in kube's internal form: Go field names (`ScaleUp`, `StabilizationWindowSeconds`, ...), absent values `null` |
//! | `autoscaling.alpha.kubernetes.io/conditions`      | the conditions, as v1 conditions                                        |
//!
//! Each value is the JSON Go's encoder writes: compact, fields in the Go types' order, `<`,
//! `>` and `&` escaped. A v1 write reads them back (one that does not decode is ignored, as
//! kube ignores it): the other metrics come first and the CPU target last, status metrics
//! from the annotation replace the one the CPU utilization gives. The four annotations never reach storage, and a v1 read
//! shows only the ones the conversion made (those a client set through v2 are dropped both
//! ways, as kube drops them).
//!
//! Kube's JSON of the status prints the zeros of its fields without `omitempty`: at v2
//! `desiredReplicas: 0` and `currentMetrics: null` (and never `currentReplicas: 0`), at v1
//! `currentReplicas: 0` and `desiredReplicas: 0`; so a new HPA reads back with
//! `{"currentMetrics": null, "desiredReplicas": 0}` or `{"currentReplicas": 0,
//! "desiredReplicas": 0}`, never `{}`.

use serde_json::{json, Map, Value};

use ballast_apiserver::registry::strategy::{map_field_mut, Object};

/// The spec metrics v1 cannot express.
pub const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// The status metrics.
pub const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// The conditions.
pub const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// The behavior.
pub const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// The annotations the conversion owns.
const ROUND_TRIP: [&str; 4] = [METRICS, BEHAVIOR, CURRENT_METRICS, CONDITIONS];

/// Removes the conversion's annotations (and the annotation map, if that leaves it empty).
pub fn drop_round_trip(obj: &mut Object) {
    let Some(Value::Object(meta)) = obj.get_mut("metadata") else { return };
    let Some(Value::Object(annotations)) = meta.get_mut("annotations") else { return };
    if !ROUND_TRIP.iter().any(|k| annotations.contains_key(*k)) {
        return;
    }
    for k in ROUND_TRIP {
        annotations.remove(k);
    }
    if annotations.is_empty() {
        meta.remove("annotations");
    }
}

/// Gives a status at autoscaling/v2 the fields kube's JSON always prints (`desiredReplicas`,
/// `currentMetrics`) and drops the one it omits at zero (`currentReplicas`).
pub fn v2_status_zeros(obj: &mut Object) {
    let Some(Value::Object(status)) = obj.get_mut("status") else { return };
    status.entry("desiredReplicas").or_insert_with(|| 0.into());
    status.entry("currentMetrics").or_insert(Value::Null);
    if status.get("currentReplicas").and_then(Value::as_i64) == Some(0) {
        status.remove("currentReplicas");
    }
}

/// Whether `m` is the metric v1's CPU target stands for: a `Resource` `cpu` metric with a
/// utilization target.
fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && !m["resource"]["target"]["averageUtilization"].is_null()
}

/// The v1 form of `obj`, an object at autoscaling/v2 (its `apiVersion` is left to the caller).
pub fn to_v1(obj: &mut Object) {
    drop_round_trip(obj);
    let mut annotations: Vec<(&str, String)> = Vec::new();
    if let Some(Value::Object(spec)) = obj.get_mut("spec") {
        let metrics = match spec.remove("metrics") {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        if let Some(cpu) = metrics.iter().find(|m| is_cpu_utilization(m)) {
            spec.insert(
                "targetCPUUtilizationPercentage".into(),
                cpu["resource"]["target"]["averageUtilization"].clone(),
            );
        }
        let others: Vec<Go> = metrics.iter().filter(|m| !is_cpu_utilization(m)).map(metric_spec_to_v1).collect();
        if !others.is_empty() {
            annotations.push((METRICS, Go::List(others).encode()));
        }
        if let Some(behavior) = spec.remove("behavior").filter(|b| !b.is_null()) {
            annotations.push((BEHAVIOR, behavior_to_internal(&behavior).encode()));
        }
    }
    if let Some(Value::Object(status)) = obj.get_mut("status") {
        let current = match status.remove("currentMetrics") {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        // kube's loop keeps the last CPU utilization it meets.
        let cpu = current.iter().rev().find_map(|m| {
            let r = &m["resource"];
            (m["type"] == "Resource" && r["name"] == "cpu" && !r["current"]["averageUtilization"].is_null())
                .then(|| r["current"]["averageUtilization"].clone())
        });
        if let Some(c) = cpu {
            status.insert("currentCPUUtilizationPercentage".into(), c);
        }
        if !current.is_empty() {
            annotations.push((CURRENT_METRICS, Go::List(current.iter().map(metric_status_to_v1).collect()).encode()));
        }
        let conditions = match status.remove("conditions") {
            Some(Value::Array(c)) => c,
            _ => Vec::new(),
        };
        if !conditions.is_empty() {
            annotations.push((CONDITIONS, Go::List(conditions.iter().map(condition).collect()).encode()));
        }
        // Neither is `omitempty` at v1.
        for printed in ["currentReplicas", "desiredReplicas"] {
            status.entry(printed).or_insert_with(|| 0.into());
        }
    }
    if annotations.is_empty() {
        return;
    }
    let meta = map_field_mut(obj, "metadata");
    let map = match meta.entry("annotations").or_insert_with(|| Value::Object(Map::new())) {
        Value::Object(m) => m,
        other => {
            *other = Value::Object(Map::new());
            other.as_object_mut().expect("invariant: just made an object")
        }
    };
    for (k, v) in annotations {
        map.insert(k.into(), v.into());
    }
}

/// The autoscaling/v2 form of `obj`, an object at autoscaling/v1 (its `apiVersion` is left to
/// the caller).
pub fn to_v2(obj: &mut Object) {
    let annotation = |key: &str| -> Option<Value> {
        let text = obj.get("metadata")?.get("annotations")?.get(key)?.as_str()?;
        serde_json::from_str(text).ok()
    };
    let other_metrics = annotation(METRICS).and_then(|v| decoded_list(v, metric_spec_to_v2));
    let behavior = annotation(BEHAVIOR).and_then(|v| behavior_from_internal(&v));
    let current_metrics = annotation(CURRENT_METRICS).and_then(|v| decoded_list(v, metric_status_to_v2));
    let conditions = annotation(CONDITIONS).and_then(|v| decoded_list(v, condition_to_v2));

    let spec = map_field_mut(obj, "spec");
    let mut metrics = other_metrics.unwrap_or_default();
    if let Some(target) = spec.remove("targetCPUUtilizationPercentage").filter(|t| !t.is_null()) {
        metrics.push(cpu_metric(&target));
    }
    // A v1 object without any metric gets kube's CPU default from the kind's defaulting,
    // after the write's ownership is worked out.
    if !metrics.is_empty() {
        spec.insert("metrics".into(), Value::Array(metrics));
    }
    if let Some(b) = behavior {
        spec.insert("behavior".into(), b);
    }

    let current_cpu = match obj.get_mut("status") {
        Some(Value::Object(status)) => status.remove("currentCPUUtilizationPercentage").filter(|c| !c.is_null()),
        _ => None,
    };
    let current = match (current_metrics, current_cpu) {
        // The annotation's statuses have more than the utilization alone.
        (Some(list), _) => Some(list),
        (None, Some(c)) => Some(vec![json!({"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": c}}})]),
        (None, None) => None,
    };
    if current.is_some() || conditions.is_some() {
        let status = map_field_mut(obj, "status");
        if let Some(list) = current {
            status.insert("currentMetrics".into(), Value::Array(list));
        }
        if let Some(list) = conditions {
            status.insert("conditions".into(), Value::Array(list));
        }
    }
    v2_status_zeros(obj);
    drop_round_trip(obj);
}

fn cpu_metric(target: &Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": target}}})
}

/// The items of an annotation's list, each converted; `None` when it is not a list of
/// objects (Go's decoder fails, and kube then ignores the annotation).
fn decoded_list(v: Value, convert: fn(&Value) -> Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(items) if items.iter().all(Value::is_object) => Some(items.iter().map(convert).collect()),
        Value::Null => Some(Vec::new()),
        _ => None,
    }
}

// ---- Go's JSON encoding of kube's types ----

/// A value as Go's encoder writes it: struct fields in their declared order.
#[derive(Debug, Clone, PartialEq)]
enum Go {
    /// A scalar, or a map (whose keys Go sorts, as `serde_json` does).
    Raw(Value),
    /// A struct: its fields in order, those Go omits already left out.
    Struct(Vec<(&'static str, Go)>),
    List(Vec<Go>),
}

impl Go {
    fn encode(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        // Go escapes these in strings (where alone they can occur in JSON).
        out.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
    }

    fn write(&self, out: &mut String) {
        match self {
            Go::Raw(v) => out.push_str(&v.to_string()),
            Go::Struct(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(*k).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
            Go::List(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
        }
    }
}

/// Builds a struct from `(field, value)` pairs, leaving out the `None`s (Go's `omitempty` of
/// an absent pointer).
fn st(fields: Vec<(&'static str, Option<Go>)>) -> Go {
    Go::Struct(fields.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect())
}

/// `v[key]` when present and not null.
fn opt(v: &Value, key: &str) -> Option<Go> {
    v.get(key).filter(|x| !x.is_null()).map(|x| Go::Raw(x.clone()))
}

/// A string field Go always writes (`""` when absent).
fn string(v: &Value, key: &str) -> Option<Go> {
    Some(Go::Raw(v.get(key).filter(|x| x.is_string()).cloned().unwrap_or_else(|| "".into())))
}

/// A `resource.Quantity` Go always writes (`"0"` when absent).
fn quantity(v: &Value, key: &str) -> Option<Go> {
    Some(Go::Raw(v.get(key).filter(|x| !x.is_null()).cloned().unwrap_or_else(|| "0".into())))
}

/// A `metav1.LabelSelector`.
fn selector(v: &Value, key: &str) -> Option<Go> {
    let s = v.get(key).filter(|x| x.is_object())?;
    let expressions = s.get("matchExpressions").and_then(Value::as_array).filter(|e| !e.is_empty()).map(|e| {
        Go::List(
            e.iter()
                .map(|r| {
                    st(vec![
                        ("key", string(r, "key")),
                        ("operator", string(r, "operator")),
                        ("values", opt(r, "values")),
                    ])
                })
                .collect(),
        )
    });
    let labels = s.get("matchLabels").filter(|l| l.as_object().is_some_and(|m| !m.is_empty())).cloned().map(Go::Raw);
    Some(st(vec![("matchLabels", labels), ("matchExpressions", expressions)]))
}

/// A v1 `CrossVersionObjectReference` from a v2 one.
fn reference(r: &Value) -> Option<Go> {
    Some(st(vec![("kind", string(r, "kind")), ("name", string(r, "name")), ("apiVersion", opt(r, "apiVersion"))]))
}

/// How a v1 metric names one side of a v2 metric: the spec's targets or the status's current
/// values, and which of its values Go always writes (a non-pointer `resource.Quantity`).
struct Side {
    /// The v2 field holding the values (`target`, `current`).
    v2: &'static str,
    /// The v1 names of the value, the average value and the average utilization.
    names: [&'static str; 3],
    /// Whether a resource's average value and an external value are always written.
    always: bool,
}

const SPEC: Side =
    Side { v2: "target", names: ["targetValue", "targetAverageValue", "targetAverageUtilization"], always: false };
const STATUS: Side =
    Side { v2: "current", names: ["currentValue", "currentAverageValue", "currentAverageUtilization"], always: true };

/// A v2 `MetricSpec` as a v1 one.
fn metric_spec_to_v1(m: &Value) -> Go {
    metric_to_v1(m, &SPEC)
}

/// A v2 `MetricStatus` as a v1 one.
fn metric_status_to_v1(m: &Value) -> Go {
    metric_to_v1(m, &STATUS)
}

fn metric_to_v1(m: &Value, side: &Side) -> Go {
    let [value, average, utilization] = side.names;
    let sometimes = |v: &Value, key: &str| if side.always { quantity(v, key) } else { opt(v, key) };
    let sub = |key: &str| m.get(key).filter(|s| s.is_object());
    let object = sub("object").map(|o| {
        let (metric, values) = (&o["metric"], &o[side.v2]);
        st(vec![
            ("target", reference(&o["describedObject"])),
            ("metricName", string(metric, "name")),
            (value, quantity(values, "value")),
            ("selector", selector(metric, "selector")),
            ("averageValue", opt(values, "averageValue")),
        ])
    });
    let pods = sub("pods").map(|p| {
        let (metric, values) = (&p["metric"], &p[side.v2]);
        st(vec![
            ("metricName", string(metric, "name")),
            (average, quantity(values, "averageValue")),
            ("selector", selector(metric, "selector")),
        ])
    });
    let resource = |r: &Value, container: bool| {
        let values = &r[side.v2];
        st(vec![
            ("name", string(r, "name")),
            (utilization, opt(values, "averageUtilization")),
            (average, sometimes(values, "averageValue")),
            ("container", container.then(|| string(r, "container")).flatten()),
        ])
    };
    let external = sub("external").map(|e| {
        let (metric, values) = (&e["metric"], &e[side.v2]);
        st(vec![
            ("metricName", string(metric, "name")),
            ("metricSelector", selector(metric, "selector")),
            (value, sometimes(values, "value")),
            (average, opt(values, "averageValue")),
        ])
    });
    st(vec![
        ("type", string(m, "type")),
        ("object", object),
        ("pods", pods),
        ("resource", sub("resource").map(|r| resource(r, false))),
        ("containerResource", sub("containerResource").map(|r| resource(r, true))),
        ("external", external),
    ])
}

/// A v2 condition as a v1 one: Go writes a zero `lastTransitionTime` as `null` and leaves out
/// an empty reason or message.
fn condition(c: &Value) -> Go {
    let non_empty = |key: &str| c.get(key).filter(|v| v.as_str().is_some_and(|s| !s.is_empty())).cloned().map(Go::Raw);
    st(vec![
        ("type", string(c, "type")),
        ("status", string(c, "status")),
        ("lastTransitionTime", Some(Go::Raw(c.get("lastTransitionTime").cloned().unwrap_or(Value::Null)))),
        ("reason", non_empty("reason")),
        ("message", non_empty("message")),
    ])
}

/// The v2 behavior as kube's internal type marshals: Go field names, nothing left out.
fn behavior_to_internal(b: &Value) -> Go {
    let null = || Some(Go::Raw(Value::Null));
    let rules = |r: Option<&Value>| match r.filter(|r| r.is_object()) {
        None => null(),
        Some(r) => {
            let policies = r.get("policies").and_then(Value::as_array).map(|p| {
                Go::List(
                    p.iter()
                        .map(|p| {
                            st(vec![
                                ("Type", string(p, "type")),
                                ("Value", Some(Go::Raw(p.get("value").cloned().unwrap_or_else(|| 0.into())))),
                                (
                                    "PeriodSeconds",
                                    Some(Go::Raw(p.get("periodSeconds").cloned().unwrap_or_else(|| 0.into()))),
                                ),
                            ])
                        })
                        .collect(),
                )
            });
            Some(st(vec![
                ("StabilizationWindowSeconds", opt(r, "stabilizationWindowSeconds").or_else(null)),
                ("SelectPolicy", opt(r, "selectPolicy").or_else(null)),
                ("Policies", policies.or_else(null)),
                ("Tolerance", opt(r, "tolerance").or_else(null)),
            ]))
        }
    };
    st(vec![("ScaleUp", rules(b.get("scaleUp"))), ("ScaleDown", rules(b.get("scaleDown")))])
}

/// `obj[key]`, the key matched as Go's decoder matches it: exactly, else ignoring case.
fn field<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    let map = obj.as_object()?;
    map.get(key)
        .or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
        .filter(|v| !v.is_null())
}

/// Copies `from[from_key]` (Go's key matching) to `to[to_key]` when present.
fn copy(to: &mut Map<String, Value>, to_key: &str, from: &Value, from_key: &str) {
    if let Some(v) = field(from, from_key) {
        to.insert(to_key.into(), v.clone());
    }
}

/// The behavior annotation read back into the v2 behavior; `None` when it does not decode or
/// holds neither direction's rules (kube then leaves the behavior unset).
fn behavior_from_internal(v: &Value) -> Option<Value> {
    if !v.is_object() {
        return None;
    }
    let rules = |r: &Value| -> Option<Value> {
        let mut out = Map::new();
        copy(&mut out, "stabilizationWindowSeconds", r, "StabilizationWindowSeconds");
        copy(&mut out, "selectPolicy", r, "SelectPolicy");
        if let Some(p) = field(r, "Policies").and_then(Value::as_array) {
            let policies = p
                .iter()
                .map(|p| {
                    json!({"type": field(p, "Type").cloned().unwrap_or_else(|| "".into()),
                        "value": field(p, "Value").cloned().unwrap_or_else(|| 0.into()),
                        "periodSeconds": field(p, "PeriodSeconds").cloned().unwrap_or_else(|| 0.into())})
                })
                .collect();
            out.insert("policies".into(), Value::Array(policies));
        }
        copy(&mut out, "tolerance", r, "Tolerance");
        Some(Value::Object(out))
    };
    let mut out = Map::new();
    for (go, json) in [("ScaleUp", "scaleUp"), ("ScaleDown", "scaleDown")] {
        match field(v, go) {
            None => {}
            Some(r) if r.is_object() => {
                out.insert(json.into(), rules(r)?);
            }
            Some(_) => return None,
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// The `metric` identifier of a v1 source (`metricName` and the selector under `selector_key`).
fn identifier(s: &Value, selector_key: &str) -> Value {
    let mut id = Map::new();
    id.insert("name".into(), field(s, "metricName").cloned().unwrap_or_else(|| "".into()));
    copy(&mut id, "selector", s, selector_key);
    Value::Object(id)
}

/// A v1 `CrossVersionObjectReference` read back.
fn reference_to_v2(r: Option<&Value>) -> Value {
    let mut out = Map::new();
    let r = r.cloned().unwrap_or(Value::Null);
    out.insert("kind".into(), field(&r, "kind").cloned().unwrap_or_else(|| "".into()));
    out.insert("name".into(), field(&r, "name").cloned().unwrap_or_else(|| "".into()));
    copy(&mut out, "apiVersion", &r, "apiVersion");
    Value::Object(out)
}

/// A v1 `MetricSpec` as a v2 one.
fn metric_spec_to_v2(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), field(m, "type").cloned().unwrap_or_else(|| "".into()));
    if let Some(o) = field(m, "object") {
        let mut target = Map::new();
        let average = field(o, "averageValue");
        target.insert("type".into(), if average.is_some() { "AverageValue" } else { "Value" }.into());
        // kube's conversion always takes the (non-pointer) target value.
        target.insert("value".into(), field(o, "targetValue").cloned().unwrap_or_else(|| "0".into()));
        copy(&mut target, "averageValue", o, "averageValue");
        out.insert(
            "object".into(),
            json!({"describedObject": reference_to_v2(field(o, "target")),
                "metric": identifier(o, "selector"), "target": target}),
        );
    }
    if let Some(p) = field(m, "pods") {
        let average = field(p, "targetAverageValue").cloned().unwrap_or_else(|| "0".into());
        out.insert(
            "pods".into(),
            json!({"metric": identifier(p, "selector"), "target": {"type": "AverageValue", "averageValue": average}}),
        );
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        let Some(r) = field(m, key) else { continue };
        let mut target = Map::new();
        let utilization = field(r, "targetAverageUtilization");
        target.insert("type".into(), if utilization.is_some() { "Utilization" } else { "AverageValue" }.into());
        copy(&mut target, "averageValue", r, "targetAverageValue");
        copy(&mut target, "averageUtilization", r, "targetAverageUtilization");
        let mut v = Map::new();
        v.insert("name".into(), field(r, "name").cloned().unwrap_or_else(|| "".into()));
        if container {
            v.insert("container".into(), field(r, "container").cloned().unwrap_or_else(|| "".into()));
        }
        v.insert("target".into(), Value::Object(target));
        out.insert(key.into(), Value::Object(v));
    }
    if let Some(e) = field(m, "external") {
        let mut target = Map::new();
        let value = field(e, "targetValue");
        target.insert("type".into(), if value.is_some() { "Value" } else { "AverageValue" }.into());
        copy(&mut target, "value", e, "targetValue");
        copy(&mut target, "averageValue", e, "targetAverageValue");
        out.insert("external".into(), json!({"metric": identifier(e, "metricSelector"), "target": target}));
    }
    Value::Object(out)
}

/// A v1 `MetricStatus` as a v2 one.
fn metric_status_to_v2(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), field(m, "type").cloned().unwrap_or_else(|| "".into()));
    if let Some(o) = field(m, "object") {
        let mut current = Map::new();
        current.insert("value".into(), field(o, "currentValue").cloned().unwrap_or_else(|| "0".into()));
        copy(&mut current, "averageValue", o, "averageValue");
        out.insert(
            "object".into(),
            json!({"metric": identifier(o, "selector"), "current": current,
                "describedObject": reference_to_v2(field(o, "target"))}),
        );
    }
    if let Some(p) = field(m, "pods") {
        let average = field(p, "currentAverageValue").cloned().unwrap_or_else(|| "0".into());
        out.insert("pods".into(), json!({"metric": identifier(p, "selector"), "current": {"averageValue": average}}));
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        let Some(r) = field(m, key) else { continue };
        let mut current = Map::new();
        current.insert("averageValue".into(), field(r, "currentAverageValue").cloned().unwrap_or_else(|| "0".into()));
        copy(&mut current, "averageUtilization", r, "currentAverageUtilization");
        let mut v = Map::new();
        v.insert("name".into(), field(r, "name").cloned().unwrap_or_else(|| "".into()));
        if container {
            v.insert("container".into(), field(r, "container").cloned().unwrap_or_else(|| "".into()));
        }
        v.insert("current".into(), Value::Object(current));
        out.insert(key.into(), Value::Object(v));
    }
    if let Some(e) = field(m, "external") {
        let mut current = Map::new();
        current.insert("value".into(), field(e, "currentValue").cloned().unwrap_or_else(|| "0".into()));
        copy(&mut current, "averageValue", e, "currentAverageValue");
        out.insert("external".into(), json!({"metric": identifier(e, "metricSelector"), "current": current}));
    }
    Value::Object(out)
}

/// A v1 condition as a v2 one.
fn condition_to_v2(c: &Value) -> Value {
    let mut out = Map::new();
    for k in ["type", "status", "lastTransitionTime", "reason", "message"] {
        copy(&mut out, k, c, k);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Object {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    fn annotation(o: &Object, key: &str) -> String {
        o["metadata"]["annotations"][key].as_str().expect("the annotation").to_string()
    }

    /// An HPA with a CPU target, a memory and a pods metric, a behavior, status metrics and
    /// a condition, at v2.
    fn full_v2() -> Object {
        obj(json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"team": "a"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps", "selector": {"matchLabels": {"b": "2", "a": "1"}}},
                        "target": {"type": "AverageValue", "averageValue": "1k"}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300,
                    "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 2,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 40, "averageValue": "200m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True",
                    "lastTransitionTime": "2026-11-27T03:00:00Z", "reason": "ReadyForNewScale",
                    "message": "recommended size matches current size"}]}}))
    }

    #[test]
    fn v1_carries_what_it_cannot_express_in_annotations_as_go_writes_them() {
        let mut h = full_v2();
        to_v1(&mut h);
        assert_eq!(h["spec"]["targetCPUUtilizationPercentage"], 50);
        assert!(h["spec"].get("metrics").is_none() && h["spec"].get("behavior").is_none());
        assert_eq!(h["status"]["currentCPUUtilizationPercentage"], 40);
        assert!(h["status"].get("currentMetrics").is_none() && h["status"].get("conditions").is_none());
        assert_eq!(h["metadata"]["annotations"]["team"], "a");
        assert_eq!(
            annotation(&h, METRICS),
            r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"500Mi"}},{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"1k","selector":{"matchLabels":{"a":"1","b":"2"}}}}]"#
        );
        assert_eq!(
            annotation(&h, CURRENT_METRICS),
            r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":40,"currentAverageValue":"200m"}}]"#
        );
        assert_eq!(
            annotation(&h, BEHAVIOR),
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":null,"Policies":[{"Type":"Percent","Value":10,"PeriodSeconds":60}],"Tolerance":null}}"#
        );
        assert_eq!(
            annotation(&h, CONDITIONS),
            r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-11-27T03:00:00Z","reason":"ReadyForNewScale","message":"recommended size matches current size"}]"#
        );
    }

    #[test]
    fn a_v1_write_back_keeps_everything() {
        let original = full_v2();
        let mut h = original.clone();
        to_v1(&mut h);
        to_v2(&mut h);
        h.insert("apiVersion".into(), "autoscaling/v2".into());
        // The CPU target comes last, after the metrics of the annotation, as kube orders them.
        let m = h["spec"]["metrics"].as_array().expect("metrics");
        assert_eq!(m.len(), 3);
        assert_eq!(m[2], original["spec"]["metrics"][0]);
        assert_eq!(m[0], original["spec"]["metrics"][1]);
        assert_eq!(m[1], original["spec"]["metrics"][2]);
        assert_eq!(h["spec"]["behavior"], original["spec"]["behavior"]);
        assert_eq!(h["status"], original["status"]);
        assert_eq!(h["metadata"], original["metadata"], "the annotations are gone again");
    }

    #[test]
    fn annotations_that_do_not_decode_are_ignored_and_dropped() {
        let mut h = obj(json!({"metadata": {"annotations": {METRICS: "not json", BEHAVIOR: "{}",
            CONDITIONS: "[1]", CURRENT_METRICS: "{\"a\": 1}"}},
            "spec": {"maxReplicas": 3, "targetCPUUtilizationPercentage": 60}}));
        to_v2(&mut h);
        assert_eq!(h["spec"]["metrics"], json!([cpu_metric(&60.into())]));
        assert!(h["spec"].get("behavior").is_none(), "a zero behavior is none");
        assert!(h.get("status").is_none());
        assert!(h["metadata"].get("annotations").is_none());
    }

    #[test]
    fn status_zeros_are_printed_as_kube_prints_them_in_each_version() {
        let mut h = obj(json!({"spec": {"maxReplicas": 3}, "status": {}}));
        to_v1(&mut h);
        assert_eq!(h["status"], json!({"currentReplicas": 0, "desiredReplicas": 0}));
        // A v1 status write with zeros: v2 omits `currentReplicas: 0` and prints the other two.
        to_v2(&mut h);
        assert_eq!(h["status"], json!({"currentMetrics": null, "desiredReplicas": 0}));
        let mut h = obj(json!({"status": {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": null}}));
        to_v1(&mut h);
        assert_eq!(h["status"], json!({"currentReplicas": 2, "desiredReplicas": 3}));
    }

    #[test]
    fn behavior_keys_match_as_go_matches_them() {
        let b = behavior_from_internal(&json!({"scaleup": {"selectpolicy": "Min",
            "POLICIES": [{"type": "Pods", "value": 2, "periodSeconds": 30}]}}));
        assert_eq!(
            b,
            Some(
                json!({"scaleUp": {"selectPolicy": "Min", "policies": [{"type": "Pods", "value": 2, "periodSeconds": 30}]}})
            )
        );
    }

    #[test]
    fn go_escapes_html_characters() {
        let mut h = obj(json!({"status": {"conditions": [{"type": "ScalingActive", "status": "False",
            "reason": "FailedGetResourceMetric", "message": "a < b && c > d"}]}}));
        to_v1(&mut h);
        assert_eq!(
            annotation(&h, CONDITIONS),
            r#"[{"type":"ScalingActive","status":"False","lastTransitionTime":null,"reason":"FailedGetResourceMetric","message":"a \u003c b \u0026\u0026 c \u003e d"}]"#
        );
    }

    #[test]
    fn every_metric_source_round_trips() {
        let metrics = json!([
            {"type": "Object", "object": {"describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
                "metric": {"name": "rps"}, "target": {"type": "Value", "value": "10k"}}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                "target": {"type": "Utilization", "averageUtilization": 60}}},
            {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchExpressions": [
                {"key": "q", "operator": "In", "values": ["a"]}]}}, "target": {"type": "AverageValue", "averageValue": "30"}}}]);
        let mut h = obj(json!({"spec": {"maxReplicas": 3, "metrics": metrics}}));
        to_v1(&mut h);
        assert_eq!(
            annotation(&h, METRICS),
            concat!(
                r#"[{"type":"Object","object":{"target":{"kind":"Ingress","name":"main","apiVersion":"networking.k8s.io/v1"},"metricName":"rps","targetValue":"10k"}},"#,
                r#"{"type":"ContainerResource","containerResource":{"name":"cpu","targetAverageUtilization":60,"container":"app"}},"#,
                r#"{"type":"External","external":{"metricName":"queue","metricSelector":{"matchExpressions":[{"key":"q","operator":"In","values":["a"]}]},"targetAverageValue":"30"}}]"#
            )
        );
        assert!(h["spec"].get("targetCPUUtilizationPercentage").is_none());
        to_v2(&mut h);
        assert_eq!(h["spec"]["metrics"], metrics);
    }
}
