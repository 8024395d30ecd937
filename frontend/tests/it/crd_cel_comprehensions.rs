//! Two-variable comprehensions in CEL rules (kube 1.32's `all(i, v, ...)`, `exists`,
//! `existsOne`, `transformList`, `transformMap`, `transformMapEntry`), driven by kubectl: rules
//! over list indices and map keys run on objects; a rule using them wrongly, or a library kube
//! does not yet offer new rules at the version served (semver, the list extension), is refused
//! when the definition is applied, in kube's words.

use crate::crd::{cluster, write};
use crate::harness::{in_memory, Backend};

in_memory!(two_variable_comprehensions_check_objects_and_definitions);

/// A definition of `plural`.example.com whose `spec` has ports (a list) and labels (a map),
/// and `rules` (YAML list items at twelve spaces).
fn definition(plural: &str, kind: &str, rules: &str) -> String {
    const PORTS_AND_LABELS: &str = "              ports:
                type: array
                maxItems: 16
                items: {type: integer}
              labels:
                type: object
                maxProperties: 16
                additionalProperties: {type: string, maxLength: 63}";
    crate::crd_cel_cost::definition(plural, kind, PORTS_AND_LABELS, rules)
}

/// What kube prints of a refused rule.
fn invalid_rule(plural: &str, index: usize, rule: &str, detail: &str) -> String {
    format!(
        "The CustomResourceDefinition \"{plural}.example.com\" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[{index}].rule: Invalid value: apiextensions.ValidationRule{{Rule:{rule:?}, Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: {detail}"
    )
}

async fn two_variable_comprehensions_check_objects_and_definitions(backend: Backend) {
    let c = cluster(backend).await;
    let rules = [
        "            - rule: \"!has(self.ports) || self.ports.all(i, p, i == 0 || p > self.ports[i - 1])\"\n              message: ports must increase",
        "            - rule: \"!has(self.labels) || self.labels.all(k, v, !k.startsWith('x-') || v != '')\"\n              message: x- labels need a value",
        "            - rule: \"!has(self.labels) || !self.labels.exists(k, v, k == v)\"\n              message: a label may not be its own value",
        "            - rule: \"!has(self.ports) || self.ports.transformList(i, p, p > 1000, p).size() <= 1\"\n              message: one high port at most",
        "            - rule: \"!has(self.labels) || self.labels.transformMapEntry(k, v, v != '', {v: k}).size() >= 0\"",
    ];
    let services = definition("services", "Service", &rules.join("\n"));
    c.must_kubectl(&["apply", "-f", &write(&c, "services.yaml", &services)]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/services.example.com"]).await;
    let c = &c;
    let apply = |name: &str, spec: &str| {
        let manifest = format!(
            "apiVersion: example.com/v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n"
        );
        let file = write(c, &format!("{name}.yaml"), &manifest);
        async move { c.kubectl(&["apply", "-f", &file]).await }
    };
    let out = apply("a", "{ports: [80, 443, 8080], labels: {app: web, x-team: core}}").await;
    assert!(out.ok, "{}", out.stderr);
    let refused = |message: &str| format!("The Service \"b\" is invalid: spec: Invalid value: \"object\": {message}");
    for (spec, message) in [
        ("{ports: [443, 80]}", refused("ports must increase")),
        ("{labels: {x-team: ''}}", refused("x- labels need a value")),
        ("{labels: {web: web}}", refused("a label may not be its own value")),
        ("{ports: [1001, 1002]}", refused("one high port at most")),
        // Two labels of one value: a key twice in the map `transformMapEntry` builds, cel-go's
        // runtime error.
        (
            "{labels: {a: same, b: same}}",
            refused(
                "insert failed: key same already exists evaluating rule: !has(self.labels) || self.labels.transformMapEntry(k, v, v != '', {v: k}).size() >= 0",
            ),
        ),
    ] {
        let out = apply("b", spec).await;
        assert!(!out.ok, "{spec}");
        assert_eq!(out.stderr.trim(), message, "{spec}");
    }

    // Used wrongly, refused with cel-go's errors.
    for (rule, detail) in [
        ("self.ports.all(i, i, i > 0)", "ERROR: <input>:1:19: duplicate variable name: i\n | self.ports.all(i, i, i > 0)\n | ..................^"),
        (
            "self.ports.transformList(i, p, p + 'a') == []",
            "ERROR: <input>:1:34: found no matching overload for '_+_' applied to '(int, string)'\n | self.ports.transformList(i, p, p + 'a') == []\n | .................................^",
        ),
        (
            "self.labels.all(k, v, k == 1)",
            "ERROR: <input>:1:25: found no matching overload for '_==_' applied to '(string, int)'\n | self.labels.all(k, v, k == 1)\n | ........................^",
        ),
        // kube's semver library comes with the version served: a new rule may not call it yet.
        (
            "isSemver('1.0.0')",
            "ERROR: <input>:1:9: undeclared reference to 'isSemver' (in container '')\n | isSemver('1.0.0')\n | ........^",
        ),
        // kube's list extension comes after the version served.
        (
            "self.ports.distinct() == self.ports",
            "ERROR: <input>:1:20: undeclared reference to 'distinct' (in container '')\n | self.ports.distinct() == self.ports\n | ...................^",
        ),
    ] {
        let gizmos = definition("gizmos", "Gizmo", &format!("            - rule: {rule:?}"));
        let out = c.kubectl(&["create", "-f", &write(c, "gizmos.yaml", &gizmos)]).await;
        assert!(!out.ok, "{rule}");
        assert_eq!(out.stderr.trim(), invalid_rule("gizmos", 0, rule, detail), "{rule}");
    }
}
