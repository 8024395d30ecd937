//! `x-kubernetes-validations`: CEL rules on a schema node, checked on every write of a custom
//! resource (kube's CEL validator) with the cel-rust interpreter. `self` is the value at the
//! node; `oldSelf` the stored value at the same place on an update (a transition rule, skipped
//! on create and where the old value cannot be found, unless it sets `optionalOldSelf`: then it
//! runs there too, `oldSelf` being an optional of the old value, none where there is none). When a definition is admitted, its
//! rules are checked as written ([`compile_errors`]), then compiled, type-checked and costed
//! (`cel_admit`). A rule counts its cost as kube's interpreter does while it runs
//! (`cel_meter`): it stops at kube's per-call limit, and what it cost is taken from the
//! object's budget (`cel_cost`); past either, it and every rule after it are refused with
//! kube's texts.
//!
//! A failed rule is reported at the node's path (plus its `fieldPath`) as kube reports it:
//! `Invalid value: "<type>": <message>` (or `Forbidden`, `Required`, `Duplicate` per its
//! `reason`), the message being `message`, else `messageExpression`'s value, else
//! `failed rule: <rule>`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use ballast_apiserver::error::{FieldError, FieldErrorKind};

use std::sync::Arc;

use crate::cel_cost::{message_over_call_limit, over_call_limit, RuntimeBudget, MESSAGE_OUT_OF_BUDGET, OUT_OF_BUDGET};
use crate::cel_decl::Decl;
use crate::cel_meter::{Counted, Meter, MeterVal, Metered, METER_VARIABLE};
use crate::cel_view::{Reads, Spelling};

/// One rule as written.
struct Rule<'a> {
    rule: &'a str,
    message: Option<&'a str>,
    message_expression: Option<&'a str>,
    reason: Option<&'a str>,
    field_path: Option<&'a str>,
    optional_old_self: bool,
}

fn rules(schema: &Value) -> Vec<Rule<'_>> {
    schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| Rule {
            rule: r["rule"].as_str().unwrap_or(""),
            message: r["message"].as_str().filter(|m| !m.is_empty()),
            message_expression: r["messageExpression"].as_str().filter(|m| !m.is_empty()),
            reason: r["reason"].as_str(),
            field_path: r["fieldPath"].as_str().filter(|p| !p.is_empty()),
            optional_old_self: r["optionalOldSelf"] == true,
        })
        .collect()
}

const REASONS: &[&str] = &["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

/// The findings of a definition's rules as written (before they are compiled), with kube's
/// paths.
pub fn compile_errors(schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (i, r) in rules(schema).iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        if r.rule.trim().is_empty() {
            errs.push(FieldError::required(format!("{at}.rule"), "rule is not specified"));
            continue;
        }
        if let Some(m) = r.message {
            if m.contains('\n') {
                errs.push(FieldError::invalid(format!("{at}.message"), m, "must not contain line breaks"));
            }
        }
        if let Some(reason) = r.reason {
            if !REASONS.contains(&reason) {
                errs.push(FieldError::not_supported(format!("{at}.reason"), reason, REASONS));
            }
        }
    }
}

/// The context one node's rules run in: `self`, and `oldSelf` where there is an old value and a
/// rule reads it, each only as far as the rules read it ([`Reads`]) and borrowing the object's
/// strings. Each is converted once per node for all of its rules, and the old value only for a
/// node with transition rules.
struct NodeContext<'a> {
    context: Result<cel::Context<'a, 'a>, String>,
    /// The meter each evaluation in the context counts on ([`METER_VARIABLE`]).
    meter: Arc<Meter>,
}

/// The context every rule runs in: the standard library, the strings extension (kube's
/// `charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
/// `substring`, `trim`, `join`, `format`) and kube's libraries, registered once; each node's
/// variables live in a scope below it.
static LIBRARIES: std::sync::LazyLock<Result<cel::Context<'static, 'static>, String>> =
    std::sync::LazyLock::new(|| {
        let mut env = cel::Env::stdlib();
        env.add_extension(cel::extensions::strings).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_quantity::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_lists::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_regex::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_ip::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_cidr::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_url::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_format::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_sets::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_semver::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_time::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_comprehensions::extension).map_err(|e| e.to_string())?;
        env.add_extension(crate::cel_meter::extension).map_err(|e| e.to_string())?;
        let mut context = cel::Context::with_env(std::sync::Arc::new(env));
        crate::cel_quantity::register(&mut context)?;
        crate::cel_lists::register(&mut context)?;
        Ok(context)
    });

/// The context rules run in (the meter's tests).
#[cfg(test)]
pub(crate) fn libraries() -> Result<&'static cel::Context<'static, 'static>, String> {
    LIBRARIES.as_ref().map_err(Clone::clone)
}

/// Evaluates `expr` in the context rules run in, without variables (the libraries' tests).
#[cfg(test)]
pub(crate) fn evaluate_in_libraries(expr: &str) -> Result<cel::Value, String> {
    let context = LIBRARIES.as_ref().map_err(Clone::clone)?;
    let program = crate::cel_parse::compile(expr).map_err(|e| format!("{e:?}"))?;
    program.execute(context).map_err(|e| crate::cel_error::text(&e))
}

impl<'a> NodeContext<'a> {
    /// `decl`, the node's type, names fields by their CEL spelling when `renames`, and gives
    /// strings of a format rules read as another type (durations, timestamps, bytes) that type
    /// when `formatted`. With `optional_old` (rules with `optionalOldSelf`), `oldSelf` is an
    /// optional of the old value, none where there is none (on a create).
    fn new(
        reads: &Reads,
        decl: Option<&Decl>,
        spelling: Spelling,
        value: &'a Value,
        old: Option<&'a Value>,
        optional_old: bool,
        meter: Arc<Meter>,
    ) -> Self {
        let context = || -> Result<cel::Context<'a, 'a>, String> {
            let libraries: &'a cel::Context<'a, 'a> = LIBRARIES.as_ref().map_err(Clone::clone)?;
            let mut context = libraries.new_inner_scope();
            context.add_variable_as_val(METER_VARIABLE, Box::new(MeterVal(meter.clone())));
            context.add_variable_as_val("self", reads.value(decl, spelling, value));
            let old = old.map(|o| reads.value(decl, spelling, o));
            if optional_old {
                let optional = match old {
                    Some(old) => cel::common::types::CelOptional::of(old),
                    None => cel::common::types::CelOptional::none(),
                };
                context.add_variable_as_val("oldSelf", Box::new(optional));
            } else if let Some(old) = old {
                context.add_variable_as_val("oldSelf", old);
            }
            Ok(context)
        };
        NodeContext { context: context(), meter }
    }

    /// Runs `program`, counting its cost; rules that do not read `oldSelf` give the same
    /// answer whether it is bound or not, so all of a node's rules share one context.
    fn evaluate(&self, program: &Metered) -> Counted {
        match &self.context {
            Ok(c) => self.meter.evaluate(program, c),
            Err(e) => Counted { result: Err(e.clone()), cost: 0, over_limit: false },
        }
    }
}

fn type_name(declared: Option<&str>, v: &Value) -> String {
    match declared {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => match v {
            Value::Object(_) => "object".into(),
            Value::Array(_) => "array".into(),
            Value::String(_) => "string".into(),
            Value::Bool(_) => "boolean".into(),
            Value::Number(n) if n.is_f64() => "number".into(),
            Value::Number(_) => "integer".into(),
            Value::Null => "null".into(),
        },
    }
}

fn failure(rule: &CompiledRule, path: &str, type_name: String, message: String) -> FieldError {
    let field = match rule.field_path.as_deref() {
        Some(p) => {
            format!("{path}{}", if p.starts_with('.') || p.starts_with('[') { p.to_string() } else { format!(".{p}") })
        }
        None => path.to_string(),
    };
    let kind = match rule.reason.as_deref() {
        Some("FieldValueForbidden") => FieldErrorKind::Forbidden { detail: message },
        Some("FieldValueRequired") => FieldErrorKind::Required { detail: message },
        Some("FieldValueDuplicate") => {
            return FieldError { field, kind: FieldErrorKind::Invalid { value: type_name.into(), detail: message } };
        }
        _ => FieldErrorKind::Invalid { value: type_name.into(), detail: message },
    };
    FieldError { field, kind }
}

/// What an evaluation failure names the rule by: its message when it has one, else its text.
fn rule_error_string(rule: &CompiledRule) -> &str {
    rule.message.as_deref().filter(|m| !m.trim().is_empty()).unwrap_or(&rule.rule).trim()
}

/// The detail of a rule whose evaluation failed (a missing key, a library function's error),
/// framed as kube frames it; an overload the type checker could not see (an int-or-string
/// value, say) gets kube's longer explanation.
fn evaluation_error(error: &str, rule: &CompiledRule) -> String {
    if error.starts_with("no such overload") {
        format!(
            "'{error}': call arguments did not match a supported operator, function or macro signature for rule: {}",
            rule_error_string(rule)
        )
    } else {
        format!("{error} evaluating rule: {}", rule_error_string(rule))
    }
}

/// One rule, compiled.
struct CompiledRule {
    program: cel::Program,
    /// The rule as evaluated: counting its cost as it goes.
    metered: Metered,
    /// `messageExpression`, when it compiles.
    message_program: Option<cel::Program>,
    message_metered: Option<Metered>,
    message_expression: Option<String>,
    /// Whether the rule reads `oldSelf` (a transition rule).
    transition: bool,
    /// Whether the rule or its `messageExpression` reads `oldSelf`.
    reads_old: bool,
    /// `optionalOldSelf`: the rule runs on creates too, `oldSelf` an optional.
    optional_old_self: bool,
    rule: String,
    message: Option<String>,
    reason: Option<String>,
    field_path: Option<String>,
}

impl std::fmt::Debug for CompiledRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledRule").field("rule", &self.rule).finish_non_exhaustive()
    }
}

/// The CEL rules of one schema, compiled once per served version: a tree shaped like the
/// schema that holds only the nodes with rules at or below them, so a write walks only the
/// parts of an object some rule looks at, and no rule is parsed again per write.
#[derive(Debug, Default)]
pub struct CompiledRules {
    rules: Vec<CompiledRule>,
    /// The node's declared `type` (kube names it in a failure's value).
    type_name: Option<String>,
    properties: BTreeMap<String, CompiledRules>,
    additional: Option<Box<CompiledRules>>,
    items: Option<Box<CompiledRules>>,
    /// The `x-kubernetes-list-map-keys` of a list-type map (its items correlate with the stored
    /// items of the same keys).
    map_keys: Option<Vec<String>>,
    /// The CEL type of the node (with rules only).
    decl: Option<Box<Decl>>,
    /// Whether the node's CEL type names a field other than the object does (`__namespace__`),
    /// so values are read under the CEL names.
    renames: bool,
    /// Whether the node's CEL type holds strings of a format rules read as another type
    /// (durations, timestamps, bytes), so values are converted by the type.
    formatted: bool,
    /// What the rules read of the node's value.
    reads: Reads,
}

impl CompiledRules {
    /// Compiles the rules of `schema` and below; `None` when there are none. Rules that do
    /// not compile are left out (admission refuses them; a stored one is never enforced).
    pub fn compile(schema: &Value) -> Option<CompiledRules> {
        crate::cel_parse::with_stack(|| Self::compile_node(schema, true))
    }

    /// `resource_root`: the node is the root of a resource or an embedded one.
    fn compile_node(schema: &Value, resource_root: bool) -> Option<CompiledRules> {
        let rules: Vec<CompiledRule> = rules(schema)
            .into_iter()
            .filter_map(|r| {
                let program = crate::cel_parse::compile(r.rule).ok()?;
                let transition = program.references().has_variable("oldSelf");
                let message_program = r.message_expression.and_then(|e| crate::cel_parse::compile(e).ok());
                let reads_old =
                    transition || message_program.as_ref().is_some_and(|p| p.references().has_variable("oldSelf"));
                Some(CompiledRule {
                    metered: crate::cel_meter::instrument(program.expression()),
                    message_metered: message_program.as_ref().map(|p| crate::cel_meter::instrument(p.expression())),
                    program,
                    message_program,
                    transition,
                    reads_old,
                    optional_old_self: r.optional_old_self,
                    rule: r.rule.to_string(),
                    message: r.message.map(String::from),
                    message_expression: r.message_expression.map(String::from),
                    reason: r.reason.map(String::from),
                    field_path: r.field_path.map(String::from),
                })
            })
            .collect();
        let properties: BTreeMap<String, CompiledRules> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, sub)| Some((k.clone(), CompiledRules::compile_child(sub)?)))
            .collect();
        let additional =
            schema.get("additionalProperties").filter(|a| a.is_object()).and_then(Self::compile_child).map(Box::new);
        let items = schema.get("items").filter(|i| i.is_object()).and_then(Self::compile_child).map(Box::new);
        if rules.is_empty() && properties.is_empty() && additional.is_none() && items.is_none() {
            return None;
        }
        let keys = crate::schema::list_map_keys(schema);
        let map_keys = (schema["x-kubernetes-list-type"] == "map" && !keys.is_empty())
            .then(|| keys.into_iter().map(String::from).collect());
        let decl =
            if rules.is_empty() { None } else { crate::cel_decl::of_schema(schema, resource_root).map(Box::new) };
        let reads = Reads::of(rules.iter().flat_map(|r| std::iter::once(&r.program).chain(&r.message_program)));
        Some(CompiledRules {
            rules,
            type_name: schema["type"].as_str().map(String::from),
            properties,
            additional,
            items,
            map_keys,
            renames: decl.as_ref().is_some_and(|d| d.renames()),
            formatted: decl.as_ref().is_some_and(|d| d.formatted()),
            decl,
            reads,
        })
    }

    fn compile_child(schema: &Value) -> Option<CompiledRules> {
        Self::compile_node(schema, schema["x-kubernetes-embedded-resource"] == true)
    }

    fn check_node(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        budget: &mut RuntimeBudget,
        errs: &mut Vec<FieldError>,
    ) {
        if self.rules.is_empty() || budget.exhausted {
            return;
        }
        let declared = self.type_name.as_deref();
        // kube refuses a node's rules once nothing is left of the object's budget.
        if budget.is_spent() {
            budget.exhausted = true;
            errs.push(FieldError::invalid(path, type_name(declared, v), OUT_OF_BUDGET));
            return;
        }
        // The old value is converted only where a rule reads it.
        let old = old.filter(|_| self.rules.iter().any(|r| r.reads_old));
        let spelling = Spelling { renames: self.renames, formatted: self.formatted };
        let decl = self.decl.as_deref();
        let meter = Arc::new(Meter::for_programs(
            self.rules.iter().flat_map(|r| std::iter::once(&r.metered).chain(&r.message_metered)),
        ));
        let optional_context = self
            .rules
            .iter()
            .any(|r| r.optional_old_self)
            .then(|| NodeContext::new(&self.reads, decl, spelling, v, old, true, meter.clone()));
        let context = NodeContext::new(&self.reads, decl, spelling, v, old, false, meter);
        for r in &self.rules {
            if r.transition && old.is_none() && !r.optional_old_self {
                continue;
            }
            let context = match &optional_context {
                Some(optional) if r.optional_old_self => optional,
                _ => &context,
            };
            // As kube: what the evaluation cost is taken from the budget first (past it, the
            // budget's text), then a stop at the per-call limit is reported.
            let counted = context.evaluate(&r.metered);
            if budget.spend(counted.cost).is_err() {
                errs.push(FieldError::invalid(path, type_name(declared, v), OUT_OF_BUDGET));
                return;
            }
            if counted.over_limit {
                budget.exhausted = true;
                let detail = over_call_limit(r.message.as_deref().unwrap_or(&r.rule).trim());
                errs.push(FieldError::invalid(path, type_name(declared, v), detail));
                return;
            }
            match counted.result {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => {
                    let message = match (&r.message, &r.message_metered) {
                        (Some(m), _) => m.clone(),
                        (None, Some(p)) => {
                            let counted = context.evaluate(p);
                            let refused = if budget.spend(counted.cost).is_err() {
                                Some(MESSAGE_OUT_OF_BUDGET.to_string())
                            } else if counted.over_limit {
                                budget.exhausted = true;
                                Some(message_over_call_limit(r.message_expression.as_deref().unwrap_or("")))
                            } else {
                                None
                            };
                            if let Some(detail) = refused {
                                // Reported instead of the rule's failure, at its place.
                                let mut e = failure(r, path, String::new(), String::new());
                                e.kind = FieldErrorKind::Invalid { value: type_name(declared, v).into(), detail };
                                errs.push(e);
                                return;
                            }
                            match counted.result {
                                Ok(cel::Value::String(s)) if !s.trim().is_empty() => s.to_string(),
                                _ => format!("failed rule: {}", r.rule),
                            }
                        }
                        (None, None) => format!("failed rule: {}", r.rule),
                    };
                    errs.push(failure(r, path, type_name(declared, v), message));
                }
                Ok(other) => errs.push(FieldError::invalid(
                    path,
                    type_name(declared, v),
                    format!("{other:?} is not a bool evaluating rule: {}", rule_error_string(r)),
                )),
                Err(e) => errs.push(FieldError::invalid(path, type_name(declared, v), evaluation_error(&e, r))),
            }
        }
    }

    /// Checks the rules against a custom resource (`old`, the stored object, on an update),
    /// appending failures to `errs`. `metadata` at the root is skipped.
    pub fn validate_root(
        &self,
        obj: &Map<String, Value>,
        old: Option<&Map<String, Value>>,
        errs: &mut Vec<FieldError>,
    ) {
        // Up to kube's per-object cost budget: seconds of CPU (see `blocking`).
        crate::blocking::off_the_runtime(|| crate::cel_parse::with_stack(|| self.validate_root_here(obj, old, errs)));
    }

    fn validate_root_here(
        &self,
        obj: &Map<String, Value>,
        old: Option<&Map<String, Value>>,
        errs: &mut Vec<FieldError>,
    ) {
        // One budget for all of the object's rules (kube's per-object runtime budget), spent
        // in kube's order: a node's own rules before those below it.
        let budget = &mut RuntimeBudget::default();
        if !self.rules.is_empty() {
            // Rules at the root see the whole object; kube prints the root's path as `<nil>`.
            let v = Value::Object(obj.clone());
            let old = old.map(|o| Value::Object(o.clone()));
            self.check_node(&v, old.as_ref(), "<nil>", budget, errs);
        }
        for (key, value) in obj {
            if key == "metadata" {
                continue;
            }
            if let Some(sub) = self.properties.get(key).or(self.additional.as_deref()) {
                sub.validate(value, old.and_then(|o| o.get(key)), key, budget, errs);
            }
        }
    }

    fn validate(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        budget: &mut RuntimeBudget,
        errs: &mut Vec<FieldError>,
    ) {
        self.check_node(v, old, path, budget, errs);
        match v {
            Value::Object(map) => {
                for (key, value) in map {
                    if let Some(sub) = self.properties.get(key).or(self.additional.as_deref()) {
                        sub.validate(
                            value,
                            old.and_then(|o| o.get(key)),
                            &crate::schema::join(path, key),
                            budget,
                            errs,
                        );
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_rules) = &self.items else { return };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    // Items of a list-map correlate with the stored item of the same keys;
                    // others have no old value (kube's rule for transition rules in lists).
                    let old_item = self.map_keys.as_ref().and_then(|keys| {
                        old_items.into_iter().flatten().find(|o| keys.iter().all(|k| o[k.as_str()] == item[k.as_str()]))
                    });
                    item_rules.validate(item, old_item, &format!("{path}[{i}]"), budget, errs);
                }
            }
            _ => {}
        }
    }
}

/// Checks every rule of `schema` and below against the object `v` (and `old`, the stored
/// object, on an update), appending failures to `errs`: [`CompiledRules`] compiled for one
/// call.
pub fn validate(schema: &Value, v: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let (Some(rules), Some(obj)) = (CompiledRules::compile(schema), v.as_object()) else { return };
    rules.validate_root(obj, old.and_then(Value::as_object), errs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"},
                {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable", "reason": "FieldValueForbidden"},
                {"rule": "has(self.name)", "messageExpression": "'name is needed, replicas=' + string(self.replicas)"},
            ],
            "properties": {"replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
                "mode": {"type": "string"}, "name": {"type": "string"}}}}})
    }

    fn run(new: &Value, old: Option<&Value>) -> Vec<String> {
        let mut errs = Vec::new();
        validate(&schema(), new, old, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rules_report_kube_messages() {
        assert_eq!(
            run(&json!({"spec": {"replicas": 5, "maxReplicas": 3, "mode": "a"}}), None),
            vec![
                "spec: Invalid value: \"object\": replicas must not exceed maxReplicas",
                "spec: Invalid value: \"object\": name is needed, replicas=5",
            ]
        );
        assert_eq!(
            run(
                &json!({"spec": {"replicas": 1, "maxReplicas": 3, "mode": "b", "name": "x"}}),
                Some(&json!({"spec": {"replicas": 1, "maxReplicas": 3, "mode": "a", "name": "x"}}))
            ),
            vec!["spec: Forbidden: mode is immutable"]
        );
    }

    /// Durations and timestamps as kube's rules have them: the functions, and fields of
    /// format duration, date, date-time and byte bound as durations, timestamps and bytes.
    #[test]
    fn formatted_fields_are_durations_timestamps_and_bytes() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.timeout < duration('1h') && self.timeout > duration('0s')", "message": "timeout"},
                {"rule": "duration(self.interval) > duration('0s')", "message": "interval"},
                {"rule": "self.start < timestamp('2030-01-01T00:00:00Z') && self.start.getFullYear() >= 2020", "message": "start"},
                {"rule": "self.day == timestamp('2024-02-29T00:00:00Z')", "message": "day"},
                {"rule": "size(self.data) == 3 && self.windows.all(w, w > duration('1s'))", "message": "data"},
                {"rule": "int(self.timeout) % 1000000000 == 0", "message": "whole seconds"},
            ],
            "properties": {"timeout": {"type": "string", "format": "duration"}, "interval": {"type": "string"},
                "start": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
                "data": {"type": "string", "format": "byte"},
                "windows": {"type": "array", "items": {"type": "string", "format": "duration"}}}}}});
        let run = |spec: Value| {
            let mut errs = Vec::new();
            validate(&schema, &json!({"spec": spec}), None, &mut errs);
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        let fine = json!({"timeout": "1m30s", "interval": "10s", "start": "2024-05-01T10:00:00+02:00",
            "day": "2024-02-29", "data": "YWJj", "windows": ["2s", "1 hour"]});
        assert!(run(fine.clone()).is_empty(), "{:?}", run(fine));
        let failing = |field: &str, value: &str| {
            let mut spec = fine.clone();
            spec[field] = json!(value);
            run(spec)
        };
        let failure = |m: &str| vec![format!("spec: Invalid value: \"object\": {m}")];
        assert_eq!(failing("timeout", "2h"), failure("timeout"));
        assert_eq!(failing("timeout", "1.5s"), failure("whole seconds"));
        assert_eq!(failing("interval", "-1s"), failure("interval"));
        assert_eq!(failing("start", "2031-01-01T00:00:00Z"), failure("start"));
        assert_eq!(failing("day", "2024-03-01"), failure("day"));
        assert_eq!(failing("data", "YWJjZA=="), failure("data"));
    }

    /// A rule with `optionalOldSelf` runs on creates too, `oldSelf` being an optional of the
    /// old value (none on a create); optional syntax reads values that may be absent.
    #[test]
    fn optional_old_self_runs_on_creates_with_no_value() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self.n >= oldSelf.value().n", "optionalOldSelf": true,
                    "message": "n may only grow"},
                {"rule": "oldSelf.hasValue() || self.?n.orValue(0) < 10", "optionalOldSelf": true,
                    "message": "n starts under 10"},
                {"rule": "self.n != oldSelf.n || true"},
            ],
            "properties": {"n": {"type": "integer"}}}}});
        let run = |new: Value, old: Option<Value>| {
            let mut errs = Vec::new();
            validate(&schema, &new, old.as_ref(), &mut errs);
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        assert_eq!(run(json!({"spec": {"n": 12}}), None), vec!["spec: Invalid value: \"object\": n starts under 10"]);
        assert!(run(json!({"spec": {"n": 3}}), None).is_empty());
        assert!(run(json!({"spec": {"n": 12}}), Some(json!({"spec": {"n": 3}}))).is_empty());
        assert_eq!(
            run(json!({"spec": {"n": 2}}), Some(json!({"spec": {"n": 3}}))),
            vec!["spec: Invalid value: \"object\": n may only grow"]
        );
    }

    #[test]
    fn message_expression_reads_old_value_of_a_plain_rule() {
        // The rule itself does not read `oldSelf`, its message does: the old value is still bound.
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.n < 10",
                "messageExpression": "'n went from ' + string(oldSelf.n) + ' to ' + string(self.n)"}],
            "properties": {"n": {"type": "integer"}}}}});
        let mut errs = Vec::new();
        validate(&schema, &json!({"spec": {"n": 12}}), Some(&json!({"spec": {"n": 3}})), &mut errs);
        let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(errs, vec!["spec: Invalid value: \"object\": n went from 3 to 12"]);
    }

    #[test]
    fn rules_as_written_are_checked() {
        let mut errs = Vec::new();
        let rules = json!({"x-kubernetes-validations": [{"rule": "self.x >"}, {"rule": ""}, {"rule": "true", "message": "a\nb"}]});
        compile_errors(&rules, "s", &mut errs);
        let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            vec![
                "s.x-kubernetes-validations[1].rule: Required value: rule is not specified",
                "s.x-kubernetes-validations[2].message: Invalid value: \"a\\nb\": must not contain line breaks",
            ]
        );
    }

    #[test]
    fn rules_beyond_kube_cost_limits_do_not_run() {
        let run = |schema: &Value, v: Value| {
            let mut errs = Vec::new();
            validate(schema, &json!({"spec": v}), None, &mut errs);
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        // A thousand items compared pairwise: about 5 million for one evaluation, over the
        // per-call limit.
        let pairs = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"l": {
            "type": "array", "maxItems": 1000, "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}]}}}}});
        assert_eq!(
            run(&pairs, json!({"l": vec![7; 1000]})),
            vec!["spec.l: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x == y))"]
        );
        // A 7000-character string searched for itself costs about 0.49 million: twenty fit in
        // the object's budget, the twenty-first does not, and no rule runs after it.
        let strings = |n: usize| {
            let props: serde_json::Map<String, Value> = (0..n)
                .map(|i| {
                    let s = json!({"type": "string", "x-kubernetes-validations": [{"rule": "self.contains(self)"}]});
                    (format!("s{i:02}"), s)
                })
                .collect();
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
        };
        let values = |n: usize| -> serde_json::Map<String, Value> {
            (0..n).map(|i| (format!("s{i:02}"), json!("a".repeat(7000)))).collect()
        };
        assert!(run(&strings(20), values(20).into()).is_empty());
        assert_eq!(
            run(&strings(22), values(22).into()),
            vec!["spec.s20: Invalid value: \"string\": validation failed due to running out of cost budget, no further validation rules will be run"]
        );
    }

    /// What kube's interpreter counts is what it evaluates: a rule whose worst case is far
    /// past the per-call limit runs when it short-circuits within it (a bound taken before
    /// evaluating refused it), and one that does not stops at the limit with kube's text.
    #[test]
    fn rules_are_charged_for_what_they_evaluate() {
        let rule = "self.size() > 10 || self.all(x, self.all(y, x == y))";
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"l": {
        "type": "array", "maxItems": 1000, "items": {"type": "integer"},
        "x-kubernetes-validations": [
            {"rule": rule},
            {"rule": "self.exists(x, self.all(y, y == x))"},
            {"rule": "self[0] == 7 ? true : self.map(x, self.filter(y, y == x).size()).size() > 0"},
        ]}}}}});
        let run = |l: Vec<i64>| {
            let mut errs = Vec::new();
            validate(&schema, &json!({"spec": {"l": l}}), None, &mut errs);
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        // A thousand items: the first rule stops at `self.size() > 10`, the second at its
        // first element, the third takes the cheap branch.
        assert!(run(vec![7; 1000]).is_empty(), "{:?}", run(vec![7; 1000]));
        // Ten items: every pair is compared (a few hundred), still within the limit.
        assert!(run(vec![8; 10]).is_empty());
        // A thousand items of which the first differs: the second rule fails after a short
        // look at each element; the third takes the expensive branch, which builds a list for
        // every element, and is stopped on the way.
        let mut l = vec![8; 1000];
        l[0] = 9;
        assert_eq!(
            run(l),
            vec![
                "spec.l: Invalid value: \"array\": failed rule: self.exists(x, self.all(y, y == x))",
                "spec.l: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self[0] == 7 ? true : self.map(x, self.filter(y, y == x).size()).size() > 0",
            ]
        );
    }

    #[test]
    fn rules_read_fields_by_their_cel_names() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.__namespace__ != self.max__dash__size"}],
            "properties": {"namespace": {"type": "string"}, "max-size": {"type": "string"}}}}});
        let mut errs = Vec::new();
        validate(&schema, &json!({"spec": {"namespace": "a", "max-size": "a"}}), None, &mut errs);
        let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            vec!["spec: Invalid value: \"object\": failed rule: self.__namespace__ != self.max__dash__size"]
        );
    }

    #[test]
    fn rules_see_the_strings_and_quantity_libraries() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "quantity(self.memory).isLessThan(quantity('1Gi'))", "message": "memory must be under 1Gi"},
                {"rule": "self.name.lowerAscii() == self.name && self.name.split('-').size() <= 2"},
                {"rule": "quantity(self.memory).asInteger() > 0"},
            ],
            "properties": {"memory": {"type": "string"}, "name": {"type": "string"}}}}});
        let run = |v: Value| {
            let mut errs = Vec::new();
            validate(&schema, &v, None, &mut errs);
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        assert!(run(json!({"spec": {"memory": "512Mi", "name": "web-a"}})).is_empty());
        assert_eq!(
            run(json!({"spec": {"memory": "2G", "name": "Web-a-b"}})),
            vec![
                "spec: Invalid value: \"object\": memory must be under 1Gi",
                "spec: Invalid value: \"object\": failed rule: self.name.lowerAscii() == self.name && self.name.split('-').size() <= 2",
            ]
        );
        assert_eq!(
            run(json!({"spec": {"memory": "1.5m", "name": "a"}})),
            vec!["spec: Invalid value: \"object\": cannot convert value to integer evaluating rule: quantity(self.memory).asInteger() > 0"]
        );
    }

    #[test]
    fn integers_are_cel_ints_so_arithmetic_with_literals_works() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.replicas + 1 <= self.limit * 2 - 9", "message": "too many"}],
            "properties": {"replicas": {"type": "integer"}, "limit": {"type": "integer"}}}}});
        let run = |v: Value| {
            let mut errs = Vec::new();
            validate(&schema, &v, None, &mut errs);
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        assert!(run(json!({"spec": {"replicas": 3, "limit": 10}})).is_empty());
        assert_eq!(
            run(json!({"spec": {"replicas": 11, "limit": 10}})),
            vec!["spec: Invalid value: \"object\": too many"]
        );
    }
}
