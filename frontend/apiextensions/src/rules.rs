//! `x-kubernetes-validations`: CEL rules on a schema node, checked on every write of a custom
//! resource (kube's CEL validator) with the cel-rust interpreter. `self` is the value at the
//! node; `oldSelf` the stored value at the same place on an update (a transition rule, skipped
//! on create and where the old value cannot be found). A rule that compiles is checked when a
//! definition is admitted ([`compile_errors`]).
//!
//! A failed rule is reported at the node's path (plus its `fieldPath`) as kube reports it:
//! `Invalid value: "<type>": <message>` (or `Forbidden`, `Required`, `Duplicate` per its
//! `reason`), the message being `message`, else `messageExpression`'s value, else
//! `failed rule: <rule>`.

use serde_json::Value;

use ballast_apiserver::error::{FieldError, FieldErrorKind};

/// One rule as written.
struct Rule<'a> {
    rule: &'a str,
    message: Option<&'a str>,
    message_expression: Option<&'a str>,
    reason: Option<&'a str>,
    field_path: Option<&'a str>,
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
        })
        .collect()
}

const REASONS: &[&str] = &["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

/// The findings of a definition's rules that do not compile, with kube's paths.
pub fn compile_errors(schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (i, r) in rules(schema).iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        if r.rule.trim().is_empty() {
            errs.push(FieldError::required(format!("{at}.rule"), "rule is not specified"));
            continue;
        }
        if let Err(e) = cel::Program::compile(r.rule) {
            errs.push(FieldError::invalid(format!("{at}.rule"), r.rule, format!("compilation failed: {e}")));
        }
        if let Some(m) = r.message {
            if m.contains('\n') {
                errs.push(FieldError::invalid(format!("{at}.message"), m, "must not contain line breaks"));
            }
        }
        if let Some(expr) = r.message_expression {
            if let Err(e) = cel::Program::compile(expr) {
                errs.push(FieldError::invalid(
                    format!("{at}.messageExpression"),
                    expr,
                    format!("messageExpression compilation failed: {e}"),
                ));
            }
        }
        if let Some(reason) = r.reason {
            if !REASONS.contains(&reason) {
                errs.push(FieldError::not_supported(format!("{at}.reason"), reason, REASONS));
            }
        }
    }
}

fn evaluate(program: &cel::Program, value: &Value, old: Option<&Value>) -> Result<cel::Value, String> {
    let mut context = cel::Context::default();
    context.add_variable("self", value).map_err(|e| e.to_string())?;
    if let Some(old) = old {
        context.add_variable("oldSelf", old).map_err(|e| e.to_string())?;
    }
    program.execute(&context).map_err(|e| e.to_string())
}

fn type_name(schema: &Value, v: &Value) -> String {
    match schema["type"].as_str() {
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

fn failure(rule: &Rule<'_>, path: &str, type_name: String, message: String) -> FieldError {
    let field = match rule.field_path {
        Some(p) => {
            format!("{path}{}", if p.starts_with('.') || p.starts_with('[') { p.to_string() } else { format!(".{p}") })
        }
        None => path.to_string(),
    };
    let kind = match rule.reason {
        Some("FieldValueForbidden") => FieldErrorKind::Forbidden { detail: message },
        Some("FieldValueRequired") => FieldErrorKind::Required { detail: message },
        Some("FieldValueDuplicate") => {
            return FieldError { field, kind: FieldErrorKind::Invalid { value: type_name.into(), detail: message } };
        }
        _ => FieldErrorKind::Invalid { value: type_name.into(), detail: message },
    };
    FieldError { field, kind }
}

fn check_node(schema: &Value, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    for r in rules(schema) {
        let Ok(program) = cel::Program::compile(r.rule) else { continue };
        let transition = program.references().has_variable("oldSelf");
        if transition && old.is_none() {
            continue;
        }
        match evaluate(&program, v, old.filter(|_| transition)) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                let message = match (r.message, r.message_expression) {
                    (Some(m), _) => m.to_string(),
                    (None, Some(expr)) => match cel::Program::compile(expr).map(|p| evaluate(&p, v, old)) {
                        Ok(Ok(cel::Value::String(s))) if !s.trim().is_empty() => s.to_string(),
                        _ => format!("failed rule: {}", r.rule),
                    },
                    (None, None) => format!("failed rule: {}", r.rule),
                };
                errs.push(failure(&r, path, type_name(schema, v), message));
            }
            Ok(other) => errs.push(FieldError::invalid(
                path,
                type_name(schema, v),
                format!("rule evaluation error: {} returned {other:?}, not a bool", r.rule),
            )),
            Err(e) => {
                errs.push(FieldError::invalid(path, type_name(schema, v), format!("rule evaluation error: {e}")));
            }
        }
    }
}

/// Checks every rule of `schema` and below against `v` (and `old`, the stored value, on an
/// update), appending failures to `errs`. `metadata` at the root is skipped.
pub fn validate(schema: &Value, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if !path.is_empty() {
        check_node(schema, v, old, path, errs);
    }
    match v {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, value) in map {
                if path.is_empty() && key == "metadata" {
                    continue;
                }
                if let Some(sub) = props.and_then(|p| p.get(key)).or(additional) {
                    let old_value = old.and_then(|o| o.get(key));
                    validate(sub, value, old_value, &crate::schema::join(path, key), errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                let keys = crate::schema::list_map_keys(schema);
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    // Items of a list-map correlate with the stored item of the same keys; others
                    // have no old value (kube's rule for transition rules in lists).
                    let old_item = (schema["x-kubernetes-list-type"] == "map" && !keys.is_empty())
                        .then(|| old_items.into_iter().flatten().find(|o| keys.iter().all(|k| o[*k] == item[*k])))
                        .flatten();
                    validate(item_schema, item, old_item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
    if path.is_empty() {
        // Rules at the root see the whole object; kube prints the root's path as `<nil>`.
        check_node(schema, v, old, "<nil>", errs);
    }
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
        validate(&schema(), new, old, "", &mut errs);
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

    #[test]
    fn rules_that_do_not_compile_are_found() {
        let mut errs = Vec::new();
        compile_errors(&json!({"x-kubernetes-validations": [{"rule": "self.x >"}, {"rule": ""}]}), "s", &mut errs);
        assert_eq!(errs.len(), 2);
        assert!(errs[0]
            .to_string()
            .starts_with("s.x-kubernetes-validations[0].rule: Invalid value: \"self.x >\": compilation failed"));
        assert_eq!(errs[1].to_string(), "s.x-kubernetes-validations[1].rule: Required value: rule is not specified");
    }
}
