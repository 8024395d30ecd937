//! The checks of a definition's CEL rules when it is admitted, as kube makes them: each rule
//! and `messageExpression` compiles and type-checks against the schema (`compilation failed:
//! ERROR: <input>:1:6: undefined field 'foo'`), a rule evaluates to a bool and a message
//! expression to a string, and neither costs more than kube allows: a rule's estimated cost
//! times how many times it can run (the product of `maxItems`/`maxProperties` above it, or
//! how many of its node fit in a request) against [`STATIC_ESTIMATED_COST_LIMIT`], and the sum
//! over the schema against [`STATIC_ESTIMATED_CRD_COST_LIMIT`].

use serde_json::Value;

use ballast_apiserver::error::{FieldError, FieldErrorKind};

use crate::cel_check::{check_in, parse_issues, Expressions, OldSelf};
use crate::cel_cost::{
    over_budget, MAX_REQUEST_SIZE_BYTES, STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT,
};
use crate::cel_decl::Decl;
use crate::cel_parse::Refused;

/// The estimated cost of a schema's rules so far, and the costliest of them.
#[derive(Default)]
struct TotalCost {
    total: u64,
    /// Up to four rules costing at least 1% of the schema's limit, costliest first.
    most_expensive: Vec<(String, u64)>,
}

impl TotalCost {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.most_expensive.truncate(4);
    }
}

/// The rules and message expressions a definition held before an update (kube's
/// `preexistingExpressions`): checked as stored expressions, the others as new ones.
#[derive(Debug, Default)]
pub(crate) struct Preexisting {
    rules: std::collections::HashSet<String>,
    messages: std::collections::HashSet<String>,
}

impl Preexisting {
    /// Those of `old`, the stored definition (none on a create), in any of its schemas.
    pub(crate) fn of(old: Option<&Value>) -> Preexisting {
        let mut found = Preexisting::default();
        if let Some(spec) = old.map(|o| &o["spec"]) {
            found.collect(&spec["validation"]["openAPIV3Schema"]);
            for v in spec["versions"].as_array().into_iter().flatten() {
                found.collect(&v["schema"]["openAPIV3Schema"]);
            }
        }
        found
    }

    fn collect(&mut self, schema: &Value) {
        match schema {
            Value::Object(m) => {
                for r in m.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(rule) = r["rule"].as_str() {
                        self.rules.insert(rule.to_string());
                    }
                    if let Some(message) = r["messageExpression"].as_str().filter(|m| !m.is_empty()) {
                        self.messages.insert(message.to_string());
                    }
                }
                m.iter().filter(|(k, _)| *k != "x-kubernetes-validations").for_each(|(_, v)| self.collect(v));
            }
            Value::Array(items) => items.iter().for_each(|v| self.collect(v)),
            _ => {}
        }
    }

    fn rule(&self, source: &str) -> Expressions {
        if self.rules.contains(source) {
            Expressions::Stored
        } else {
            Expressions::New
        }
    }

    fn message(&self, source: &str) -> Expressions {
        if self.messages.contains(source) {
            Expressions::Stored
        } else {
            Expressions::New
        }
    }
}

/// Checks every rule of the version schema `schema` (at `path`, its
/// `...openAPIV3Schema`), appending kube's findings to `errs`; a rule or message expression
/// in `preexisting` is checked as stored, the others as new.
pub(crate) fn check_schema(schema: &Value, path: &str, preexisting: &Preexisting, errs: &mut Vec<FieldError>) {
    crate::cel_parse::with_stack(|| check_schema_here(schema, path, preexisting, errs));
}

fn check_schema_here(schema: &Value, path: &str, preexisting: &Preexisting, errs: &mut Vec<FieldError>) {
    let mut total = TotalCost::default();
    let root = Place { path: path.to_string(), resource_root: true, cardinality: Some(1), uncorrelatable: None };
    walk(schema, &root, preexisting, &mut total, errs);
    if total.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (rule_path, _) in &total.most_expensive {
            errs.push(FieldError::forbidden(
                rule_path.clone(),
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        errs.push(FieldError::forbidden(
            path,
            over_budget(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                total.total,
                STATIC_ESTIMATED_CRD_COST_LIMIT,
            ),
        ));
    }
}

fn embedded(schema: &Value) -> bool {
    schema["x-kubernetes-embedded-resource"] == true
}

/// How many times each child of `schema` can occur per occurrence of `schema` (kube's
/// `extractMaxElements`): `maxItems` of a list, `maxProperties` of a map, 1 for an object's
/// fields; `None` for a list or map without a limit.
fn child_factor(schema: &Value) -> Option<u64> {
    let limit = |key: &str| schema[key].as_i64().map(|n| n.max(0) as u64);
    match schema["type"].as_str() {
        Some("object") if schema.get("additionalProperties").is_some_and(Value::is_object) => limit("maxProperties"),
        Some("array") => limit("maxItems"),
        _ => Some(1),
    }
}

/// Where a schema node is, as its rules' checks need to know.
struct Place {
    /// Its field path.
    path: String,
    /// Whether it is the root of a resource or of an embedded one.
    resource_root: bool,
    /// How many times it can occur in one object (`None`: no list or map limit bounds it).
    cardinality: Option<u64>,
    /// The highest node above it where stored and new values cannot be paired (an atomic or
    /// set list's items, an atomic map's fields): rules there cannot read `oldSelf`.
    uncorrelatable: Option<String>,
}

impl Place {
    fn child(&self, schema: &Value, sub: &Value, segment: &str, correlatable: bool) -> Place {
        Place {
            path: format!("{}.{segment}", self.path),
            resource_root: embedded(sub),
            cardinality: self.cardinality.zip(child_factor(schema)).map(|(c, f)| c.saturating_mul(f)),
            uncorrelatable: self.uncorrelatable.clone().or_else(|| (!correlatable).then(|| self.path.clone())),
        }
    }
}

fn walk(schema: &Value, at: &Place, pre: &Preexisting, total: &mut TotalCost, errs: &mut Vec<FieldError>) {
    // Children first, then the node's own rules: kube's order of findings.
    if let Some(sub) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        walk(sub, &at.child(schema, sub, "additionalProperties", true), pre, total, errs);
    }
    let granular = schema["x-kubernetes-map-type"] != "atomic";
    for (key, sub) in schema["properties"].as_object().into_iter().flatten() {
        walk(sub, &at.child(schema, sub, &format!("properties[{key}]"), granular), pre, total, errs);
    }
    if let Some(sub) = schema.get("items").filter(|a| a.is_object()) {
        let keyed = schema["x-kubernetes-list-type"] == "map";
        walk(sub, &at.child(schema, sub, "items", keyed), pre, total, errs);
    }
    if schema["x-kubernetes-validations"].as_array().is_some_and(|r| !r.is_empty()) {
        check_rules(schema, at, pre, total, errs);
    }
}

/// A rule as kube prints it in a finding: Go's `%#v` of its `ValidationRule`. kube prints a
/// set `reason` or `optionalOldSelf` as a pointer's address, which tells a reader nothing; a
/// fixed one stands in for it.
fn printed_rule(r: &Value) -> String {
    // Go's `%#v` quotes a string as `strconv.Quote` does.
    let s = |k: &str| crate::cel_ip::go_quote(r[k].as_str().unwrap_or(""));
    let pointer = |k: &str, ty: &str| {
        if r.get(k).is_some_and(|v| !v.is_null()) {
            format!("({ty})(0xc000000000)")
        } else {
            format!("({ty})(nil)")
        }
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        s("rule"),
        s("message"),
        s("messageExpression"),
        pointer("reason", "*apiextensions.FieldValueErrorReason"),
        s("fieldPath"),
        pointer("optionalOldSelf", "*bool"),
    )
}

fn invalid(field: String, rule: &Value, detail: String) -> FieldError {
    FieldError { field, kind: FieldErrorKind::InvalidPrinted { value: printed_rule(rule), detail } }
}

/// What compiling an expression found.
#[derive(Clone, Copy)]
struct Compiled {
    /// The estimated cost of one evaluation.
    cost: u64,
    /// Whether it reads `oldSelf`.
    reads_old: bool,
}

/// Compiles `source` and checks it against `decl`, or gives kube's words for why it does not
/// compile (`what` names it: `compilation failed` or `messageExpression compilation
/// failed`). `result` says what the expression must evaluate to.
fn compile(
    source: &str,
    decl: Option<&Decl>,
    (old, expressions): (OldSelf, Expressions),
    what: &str,
    result: Result_,
) -> Result<Compiled, String> {
    let program = crate::cel_parse::compile(source).map_err(|e| match e {
        Refused::Limit(text) => format!("{what}: {text}"),
        Refused::Parse(e) => format!("{what}: {}", parse_issues(source, &e)),
    })?;
    let reads_old = program.references().has_variable("oldSelf");
    let mut cost = 0;
    if let Some(decl) = decl {
        let checked = check_in(&program, source, decl, old, expressions);
        if let Some(issues) = checked.issues {
            return Err(format!("{what}: {issues}"));
        }
        match result {
            Result_::Bool if checked.not_bool() => return Err("cel expression must evaluate to a bool".into()),
            Result_::String if checked.not_string() => {
                return Err("messageExpression must evaluate to a string".into());
            }
            _ => cost = checked.max_cost,
        }
    }
    // kube compiles constant regular expressions when it builds the program.
    if let Some(e) = crate::cel_regex::constant_pattern_error(program.expression()) {
        let instantiation = match result {
            Result_::Bool => "program instantiation failed",
            Result_::String => "messageExpression instantiation failed",
        };
        return Err(format!("{instantiation}: {e}"));
    }
    Ok(Compiled { cost, reads_old })
}

/// How rule `r` sees `oldSelf`: an optional with `optionalOldSelf: true`.
fn old_self(r: &Value) -> OldSelf {
    if r["optionalOldSelf"] == true {
        OldSelf::Optional
    } else {
        OldSelf::Value
    }
}

/// What an expression must evaluate to.
#[derive(Clone, Copy)]
enum Result_ {
    Bool,
    String,
}

fn check_rules(schema: &Value, place: &Place, pre: &Preexisting, total: &mut TotalCost, errs: &mut Vec<FieldError>) {
    let path = &place.path;
    let decl = crate::cel_decl::of_schema(schema, place.resource_root);
    // Under an unbounded list or map, as many times as the smallest such node fits in a request.
    let cardinality =
        place.cardinality.unwrap_or_else(|| MAX_REQUEST_SIZE_BYTES / (decl.as_ref().map_or(1, |d| d.min_size) + 1));
    for (i, r) in schema["x-kubernetes-validations"].as_array().into_iter().flatten().enumerate() {
        let source = r["rule"].as_str().unwrap_or("");
        if source.trim().is_empty() {
            continue;
        }
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        let env = (old_self(r), pre.rule(source));
        let compiled = compile(source, decl.as_ref(), env, "compilation failed", Result_::Bool);
        let cost = compiled.as_ref().map_or(0, |c| c.cost).saturating_mul(cardinality);
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            errs.push(FieldError::forbidden(
                format!("{at}.rule"),
                over_budget("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT),
            ));
        }
        total.observe(format!("{at}.rule"), cost);
        let reads_old = match compiled {
            Err(e) => {
                errs.push(invalid(format!("{at}.rule"), r, e));
                continue;
            }
            Ok(c) => c.reads_old,
        };
        let message = r["messageExpression"].as_str().filter(|m| !m.trim().is_empty());
        if let Some(message) = message {
            check_message(r, message, &at, (decl.as_ref(), pre.message(message)), total, errs);
        }
        if let (true, Some(within)) = (reads_old, &place.uncorrelatable) {
            errs.push(FieldError::invalid(
                format!("{at}.rule"),
                source,
                format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"),
            ));
        } else if let Some(optional) = r.get("optionalOldSelf").filter(|o| !o.is_null() && !reads_old) {
            errs.push(FieldError::invalid(
                format!("{at}.optionalOldSelf"),
                optional.clone(),
                "may not be set if oldSelf is not used in rule",
            ));
        }
    }
}

/// Checks rule `r`'s `messageExpression` (`message`): it compiles, evaluates to a string and
/// costs no more than kube allows (once: kube does not multiply it by the rule's cardinality).
fn check_message(
    r: &Value,
    message: &str,
    at: &str,
    (decl, expressions): (Option<&Decl>, Expressions),
    total: &mut TotalCost,
    errs: &mut Vec<FieldError>,
) {
    let env = (old_self(r), expressions);
    match compile(message, decl, env, "messageExpression compilation failed", Result_::String) {
        Err(e) => errs.push(invalid(format!("{at}.messageExpression"), r, e)),
        Ok(Compiled { cost, .. }) => {
            if cost > STATIC_ESTIMATED_COST_LIMIT {
                errs.push(FieldError::forbidden(
                    format!("{at}.messageExpression"),
                    over_budget("estimated messageExpression cost", cost, STATIC_ESTIMATED_COST_LIMIT),
                ));
            }
            total.observe(format!("{at}.messageExpression"), cost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn findings(schema: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        check_schema(schema, "s", &Preexisting::default(), &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    /// kube's semver library comes with the version served: a rule the stored definition held
    /// may call it, a new one may not (kube checks new rules in the previous version's
    /// environment), nor a new message expression.
    #[test]
    fn the_newest_library_is_for_stored_rules_only() {
        let schema = json!({"type": "object", "properties": {"v": {"type": "string", "maxLength": 10}},
            "x-kubernetes-validations": [{"rule": "semver(self.v).major() == 1",
                "messageExpression": "isSemver(self.v) ? 'wrong major' : 'not a version'"}]});
        let new = findings(&schema);
        assert_eq!(new.len(), 1, "{new:?}");
        assert!(
            new[0]
                .contains("compilation failed: ERROR: <input>:1:7: undeclared reference to 'semver' (in container '')"),
            "{new:?}"
        );
        assert!(new[0].contains("ERROR: <input>:1:21: undeclared reference to 'major' (in container '')"), "{new:?}");
        let old = json!({"spec": {"versions": [{"schema": {"openAPIV3Schema": schema.clone()}}]}});
        let mut errs = Vec::new();
        check_schema(&schema, "s", &Preexisting::of(Some(&old)), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        // The rule stored, a new message expression.
        let mut changed = schema.clone();
        changed["x-kubernetes-validations"][0]["messageExpression"] = json!("isSemver(self.v) ? 'a' : 'b'");
        let mut errs = Vec::new();
        check_schema(&changed, "s", &Preexisting::of(Some(&old)), &mut errs);
        let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains(
                "messageExpression compilation failed: ERROR: <input>:1:9: undeclared reference to 'isSemver'"
            ),
            "{errs:?}"
        );
        // Two-variable comprehensions came a version before: new rules have them.
        let two = json!({"type": "array", "maxItems": 4, "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(i, v, v > i)"}]});
        assert!(findings(&two).is_empty());
    }

    fn list_of_strings(max_items: Option<u64>, rule: &str) -> Value {
        let mut list = json!({"type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": rule}]});
        if let Some(m) = max_items {
            list["maxItems"] = json!(m);
        }
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"names": list}}}})
    }

    #[test]
    fn a_rule_over_the_budget_is_refused_in_kube_words() {
        let rule = "self.all(x, self.all(y, x == y))";
        assert_eq!(
            findings(&list_of_strings(None, rule)),
            vec![
                "s.properties[spec].properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
                "s.properties[spec].properties[names].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                "s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
            ]
        );
        assert!(findings(&list_of_strings(Some(10), "self.all(x, x.size() < 10)")).is_empty());
    }

    #[test]
    fn cardinality_multiplies_a_rule_under_lists() {
        // A rule on strings in an unbounded list runs once per string that fits in a request.
        let item_rule = json!({"type": "object", "properties": {"l": {"type": "array",
            "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self.contains('x')"}]}}}});
        let errs = findings(&item_rule);
        assert!(errs[0].starts_with("s.properties[l].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"), "{errs:?}");
        let bounded = json!({"type": "object", "properties": {"l": {"type": "array", "maxItems": 100,
            "items": {"type": "string", "maxLength": 64, "x-kubernetes-validations": [{"rule": "self.contains('x')"}]}}}});
        assert!(findings(&bounded).is_empty());
    }

    #[test]
    fn optional_old_self_needs_a_rule_reading_old_self() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self > 0", "optionalOldSelf": true},
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true}]}}});
        assert_eq!(
            findings(&schema),
            vec!["s.properties[n].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"]
        );
    }

    #[test]
    fn old_self_is_refused_where_values_cannot_be_paired() {
        let rule = json!([{"rule": "self == oldSelf"}]);
        let schema = json!({"type": "object", "properties": {
            "set": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 10,
                "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": rule}},
            "keyed": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                "maxItems": 10, "items": {"type": "object",
                    "properties": {"k": {"type": "string", "maxLength": 10, "x-kubernetes-validations": rule}}}},
            "atomic": {"type": "object", "x-kubernetes-map-type": "atomic",
                "properties": {"a": {"type": "object", "properties": {"b": {"type": "string", "x-kubernetes-validations": rule}}}}}}});
        assert_eq!(
            findings(&schema),
            vec![
                "s.properties[atomic].properties[a].properties[b].x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within s.properties[atomic]",
                "s.properties[set].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within s.properties[set]",
            ]
        );
    }

    #[test]
    fn the_large_fixture_is_admitted() {
        let crd: Value = serde_yaml_ng::from_str(include_str!("../testdata/large-crd.yaml")).expect("fixture");
        assert!(findings(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]).is_empty());
    }

    #[test]
    fn a_message_built_with_string_is_refused_as_kube_refuses_it() {
        // kube's estimator cannot size `string(x)`, so the concatenation is unbounded.
        let schema = json!({"type": "object", "properties": {"worker": {"type": "object",
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.min <= self.max",
                "messageExpression": "'min (' + string(self.min) + ') exceeds max'"}]}}});
        let errs = findings(&schema);
        let at = "s.properties[worker].x-kubernetes-validations[0].messageExpression";
        assert_eq!(
            errs,
            vec![
                format!("{at}: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
                format!("{at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"),
                "s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)".to_string(),
            ]
        );
    }

    /// Constant arguments kube checks when it compiles a rule, and the patterns it compiles
    /// when it builds the program.
    #[test]
    fn constant_arguments_that_do_not_convert_are_refused() {
        let rules = [
            "self.s.matches('[')",
            "duration(self.d) < duration('1x')",
            "timestamp(self.t) > timestamp('2020-13-01T00:00:00Z')",
            "matches(self.s, 'a(')",
            "self.s.find('a**') == ''",
            "self.s.matches('^[a-z]+$') && duration(self.d) < duration('1h30m') && timestamp(self.t) > timestamp('2020-02-29T23:59:59.5+01:00')",
        ];
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"s": {"type": "string"}, "d": {"type": "string"}, "t": {"type": "string"}},
            "x-kubernetes-validations": rules.iter().map(|r| json!({"rule": r})).collect::<Vec<_>>()}}});
        let detail = |e: &String| e.split_once("OptionalOldSelf:(*bool)(nil)}: ").map(|(_, d)| d.to_string());
        let details: Vec<Option<String>> = findings(&schema).iter().map(detail).collect();
        assert_eq!(
            details,
            [
                "compilation failed: ERROR: <input>:1:16: invalid matches argument\n | self.s.matches('[')\n | ...............^",
                "compilation failed: ERROR: <input>:1:29: invalid duration argument\n | duration(self.d) < duration('1x')\n | ............................^",
                "compilation failed: ERROR: <input>:1:31: invalid timestamp argument\n | timestamp(self.t) > timestamp('2020-13-01T00:00:00Z')\n | ..............................^",
                "program instantiation failed: error parsing regexp: missing closing ): `a(`",
                "program instantiation failed: error parsing regexp: invalid nested repetition operator: `**`",
            ]
            .map(|d| Some(d.to_string()))
        );
    }

    #[test]
    fn compile_errors_print_the_rule_as_kube_does() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"a": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.foo == 1", "message": "m"}, {"rule": "self.a"},
                {"rule": "self.a > 1", "messageExpression": "self.a"}, {"rule": "self.a >"}]}}});
        assert_eq!(
            findings(&schema),
            vec![
                "s.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.foo == 1\", Message:\"m\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: undefined field 'foo'\n | self.foo == 1\n | ....^",
                "s.properties[spec].x-kubernetes-validations[1].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.a\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: cel expression must evaluate to a bool",
                "s.properties[spec].x-kubernetes-validations[2].messageExpression: Invalid value: apiextensions.ValidationRule{Rule:\"self.a > 1\", Message:\"\", MessageExpression:\"self.a\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: messageExpression must evaluate to a string",
                "s.properties[spec].x-kubernetes-validations[3].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.a >\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:9: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | self.a >\n | ........^",
            ]
        );
    }
}
