//! CEL rules checked as kube checks them, driven by kubectl: a definition whose rules do not
//! type-check against its schema or cost more than kube's estimate allows is refused with kube's
//! messages, and an object whose rules would cost more than kube lets one evaluation or one
//! object spend is refused with kube's runtime messages.

use crate::crd::{cluster, write};
use crate::harness::{in_memory, Backend};

in_memory!(
    definitions_with_costly_or_ill_typed_rules_are_refused,
    rules_calling_functions_on_the_wrong_types_are_refused,
    durations_timestamps_and_optional_values_run_as_in_kube,
    objects_over_the_runtime_cost_are_refused,
    deeply_nested_rules_are_refused_and_deep_ones_within_the_limit_run
);

/// A definition of `plural`.example.com whose `spec` has `properties` (YAML at ten spaces'
/// indent, under `spec.properties`) and `rules` (YAML list items at ten spaces).
pub(crate) fn definition(plural: &str, kind: &str, properties: &str, rules: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: {plural}, singular: {kind_lower}, kind: {kind}}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
{rules}
            properties:
{properties}
"#,
        kind_lower = kind.to_lowercase()
    )
}

const ADVICE: &str =
    "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

async fn definitions_with_costly_or_ill_typed_rules_are_refused(backend: Backend) {
    let c = cluster(backend).await;

    // An `all()` over a list with no maxItems: as many strings as fit in a request, each walked.
    let names = |max_items: &str| {
        format!("              names:\n                type: array\n{max_items}                items: {{type: string, maxLength: 64}}\n                x-kubernetes-validations:\n                - rule: \"self.all(x, x.contains('-'))\"\n")
    };
    let unbounded = definition("tags", "Tag", &names(""), "            - rule: 'true'");
    let out = c.kubectl(&["create", "-f", &write(&c, "unbounded.yaml", &unbounded)]).await;
    assert!(!out.ok);
    assert_eq!(
        out.stderr.trim(),
        format!(
            "The CustomResourceDefinition \"tags.example.com\" is invalid: spec.validation.openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 3.1x {ADVICE}"
        )
    );
    // The same list with maxItems is admitted.
    let bounded = definition("tags", "Tag", &names("                maxItems: 100\n"), "            - rule: 'true'");
    c.must_kubectl(&["create", "-f", &write(&c, "bounded.yaml", &bounded)]).await;

    // A rule naming a field the schema does not declare does not compile.
    let undeclared = definition(
        "gizmos",
        "Gizmo",
        "              size: {type: integer}\n",
        "            - rule: self.replicas > self.size\n              message: replicas above size",
    );
    let out = c.kubectl(&["create", "-f", &write(&c, "undeclared.yaml", &undeclared)]).await;
    assert!(!out.ok);
    assert_eq!(
        out.stderr.trim(),
        "The CustomResourceDefinition \"gizmos.example.com\" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.replicas > self.size\", Message:\"replicas above size\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: undefined field 'replicas'\n | self.replicas > self.size\n | ....^"
    );

    // Operands whose types have no operator between them, and a rule that is not a bool.
    let mistyped = definition(
        "gizmos",
        "Gizmo",
        "              size: {type: integer}\n              name: {type: string, maxLength: 10}\n",
        "            - rule: self.size + self.name == 'x'\n            - rule: self.size",
    );
    let out = c.kubectl(&["create", "-f", &write(&c, "mistyped.yaml", &mistyped)]).await;
    assert!(!out.ok);
    let err = out.stderr;
    assert!(err.contains("x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.size + self.name == 'x'\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:11: found no matching overload for '_+_' applied to '(int, string)'\n | self.size + self.name == 'x'\n | ..........^"), "{err}");
    assert!(err.contains("x-kubernetes-validations[1].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.size\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: cel expression must evaluate to a bool"), "{err}");

    // A message built with string() cannot be sized by kube's estimator, so it is refused.
    let message = definition(
        "gizmos",
        "Gizmo",
        "              size: {type: integer}\n",
        "            - rule: self.size < 10\n              messageExpression: \"'size ' + string(self.size) + ' is too large'\"",
    );
    let out = c.kubectl(&["create", "-f", &write(&c, "message.yaml", &message)]).await;
    assert!(!out.ok);
    let at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].messageExpression";
    assert_eq!(
        out.stderr.trim(),
        format!(
            "The CustomResourceDefinition \"gizmos.example.com\" is invalid: \n\
             * {at}: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x {ADVICE}\n\
             * {at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema\n\
             * spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {ADVICE}"
        )
    );
    // Written with format(), the same message is admitted.
    let formatted = message
        .replace("\"'size ' + string(self.size) + ' is too large'\"", "\"'size %d is too large'.format([self.size])\"");
    c.must_kubectl(&["create", "-f", &write(&c, "formatted.yaml", &formatted)]).await;
}

/// A rule calling a library function on arguments it does not take, comparing an int with a
/// double, mixing types in `?:` or holding a pattern Go cannot compile is refused when the
/// definition is applied, each in kube's words; the rules written right are admitted and run.
async fn rules_calling_functions_on_the_wrong_types_are_refused(backend: Backend) {
    let c = cluster(backend).await;
    let properties = "              name: {type: string, maxLength: 64}\n              replicas: {type: integer}\n              endpoint: {type: string, maxLength: 256}\n";
    let rules = [
        "self.name.indexOf(1) >= 0",
        "self.replicas == 1.0",
        "(self.replicas > 1 ? self.name : self.replicas) == 1",
        "self.name.matches('[')",
        "url(self.replicas).getScheme() == 'https'",
    ];
    let yaml: Vec<String> = rules.iter().map(|r| format!("            - rule: \"{r}\"")).collect();
    let wrong = definition("probes", "Probe", properties, &yaml.join("\n"));
    let out = c.kubectl(&["apply", "-f", &write(&c, "wrong.yaml", &wrong)]).await;
    assert!(!out.ok);
    let cause = |i: usize, detail: &str| {
        format!(
            "* spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[{i}].rule: Invalid value: apiextensions.ValidationRule{{Rule:{:?}, Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: {detail}",
            rules[i]
        )
    };
    assert_eq!(
        out.stderr.trim(),
        [
            "The CustomResourceDefinition \"probes.example.com\" is invalid: ".to_string(),
            cause(0, "ERROR: <input>:1:18: found no matching overload for 'indexOf' applied to 'string.(int)'\n | self.name.indexOf(1) >= 0\n | .................^"),
            cause(1, "ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(int, double)'\n | self.replicas == 1.0\n | ..............^"),
            cause(2, "ERROR: <input>:1:20: found no matching overload for '_?_:_' applied to '(bool, string, int)'\n | (self.replicas > 1 ? self.name : self.replicas) == 1\n | ...................^"),
            cause(3, "ERROR: <input>:1:19: invalid matches argument\n | self.name.matches('[')\n | ..................^"),
            cause(4, "ERROR: <input>:1:4: found no matching overload for 'url' applied to '(int)'\n | url(self.replicas).getScheme() == 'https'\n | ...^"),
        ]
        .join("\n")
    );
    let out = c.kubectl(&["get", "crd", "probes.example.com"]).await;
    assert!(!out.ok, "a refused definition is not stored");

    // Written right, the same rules are admitted and run on every write.
    let right = definition(
        "probes",
        "Probe",
        properties,
        "            - rule: \"self.name.indexOf('-') != 0\"\n            - rule: \"self.replicas == 1 || double(self.replicas) > 1.5\"\n            - rule: \"self.name.matches('^[a-z-]+$')\"\n            - rule: \"isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https'\"\n              message: endpoint must be an https URL",
    );
    c.must_kubectl(&["apply", "-f", &write(&c, "right.yaml", &right)]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/probes.example.com"]).await;
    let probe = |name: &str, endpoint: &str| {
        format!("apiVersion: example.com/v1\nkind: Probe\nmetadata: {{name: {name}, namespace: default}}\nspec: {{name: web, replicas: 2, endpoint: '{endpoint}'}}\n")
    };
    c.must_kubectl(&["apply", "-f", &write(&c, "v6.yaml", &probe("v6", "https://[::1]:8443/healthz"))]).await;
    // Brackets hold an IPv6 address and nothing else, as Go reads URLs.
    let out =
        c.kubectl(&["apply", "-f", &write(&c, "bracketed.yaml", &probe("bracketed", "https://[web]/healthz"))]).await;
    assert!(!out.ok);
    assert_eq!(
        out.stderr.trim(),
        "The Probe \"bracketed\" is invalid: spec: Invalid value: \"object\": endpoint must be an https URL"
    );
}

/// Rules over durations and timestamps (fields of format duration and date-time are such
/// values), optional values and `optionalOldSelf` run on objects as kube runs them.
async fn durations_timestamps_and_optional_values_run_as_in_kube(backend: Backend) {
    let c = cluster(backend).await;
    let properties = "              timeout: {type: string, format: duration}\n              backoff: {type: string, maxLength: 16}\n              start: {type: string, format: date-time}\n              size: {type: integer}\n              limit: {type: integer}\n";
    let rules = [
        "            - rule: \"!has(self.timeout) || self.timeout <= duration('1h')\"\n              message: timeout is at most an hour",
        "            - rule: \"!has(self.backoff) || duration(self.backoff) > duration('0s')\"\n              message: backoff must be positive",
        "            - rule: \"!has(self.start) || self.start.getFullYear() >= 2020\"\n              message: start is too early",
        "            - rule: \"self.?size.orValue(0) <= self.?limit.orValue(100)\"\n              message: size above limit",
        "            - rule: \"!oldSelf.hasValue() || self.?size.orValue(0) >= oldSelf.value().?size.orValue(0)\"\n              optionalOldSelf: true\n              message: size may only grow",
    ];
    let jobs = definition("jobs", "Job", properties, &rules.join("\n"));
    c.must_kubectl(&["apply", "-f", &write(&c, "jobs.yaml", &jobs)]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/jobs.example.com"]).await;
    let job = |name: &str, spec: &str| {
        format!("apiVersion: example.com/v1\nkind: Job\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n")
    };
    let refused = |name: &str, message: &str| {
        format!("The Job \"{name}\" is invalid: spec: Invalid value: \"object\": {message}")
    };
    let c = &c;
    let apply = |name: &str, spec: &str| {
        let file = write(c, &format!("{name}.yaml"), &job(name, spec));
        async move { c.kubectl(&["apply", "-f", &file]).await }
    };
    let out = apply("a", "{timeout: 30m, backoff: 10s, start: '2024-05-01T10:00:00Z', size: 5}").await;
    assert!(out.ok, "{}", out.stderr);
    for (spec, message) in [
        ("{timeout: 2h}", "timeout is at most an hour"),
        ("{backoff: '-1s'}", "backoff must be positive"),
        ("{start: '2019-12-31T23:00:00Z'}", "start is too early"),
        ("{size: 200}", "size above limit"),
    ] {
        let out = apply("b", spec).await;
        assert!(!out.ok, "{spec}");
        assert_eq!(out.stderr.trim(), refused("b", message), "{spec}");
    }
    // The optional old value: none on the create above, the stored object on updates.
    let out = apply("a", "{size: 7}").await;
    assert!(out.ok, "{}", out.stderr);
    let out = apply("a", "{size: 6}").await;
    assert!(!out.ok);
    assert_eq!(out.stderr.trim(), refused("a", "size may only grow"));
}

/// `count` lists of integers `l0`..., each with a rule comparing every item with every other.
fn pairs_definition(count: usize) -> String {
    let mut properties = String::new();
    for i in 0..count {
        properties.push_str(&format!(
            "              l{i}:\n                type: array\n                maxItems: 1000\n                items: {{type: integer}}\n                x-kubernetes-validations:\n                - rule: self.all(x, self.all(y, x == y))\n"
        ));
    }
    definition("pairs", "Pair", &properties, "            - rule: 'true'")
}

fn pairs_object(name: &str, lists: &[(usize, usize)]) -> String {
    let spec: Vec<String> = lists.iter().map(|(i, n)| format!("l{i}: [{}]", vec!["7"; *n].join(", "))).collect();
    format!(
        "apiVersion: example.com/v1\nkind: Pair\nmetadata: {{name: {name}, namespace: default}}\nspec: {{{}}}\n",
        spec.join(", ")
    )
}

async fn objects_over_the_runtime_cost_are_refused(backend: Backend) {
    let c = cluster(backend).await;
    // Each rule is estimated at about 5 million: under kube's 10 million per rule, and twelve
    // of them under its 100 million per schema.
    c.must_kubectl(&["create", "-f", &write(&c, "pairs.yaml", &pairs_definition(12))]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/pairs.example.com"]).await;

    // Small lists cost little.
    c.must_kubectl(&["create", "-f", &write(&c, "small.yaml", &pairs_object("small", &[(0, 10), (1, 10)]))]).await;

    // A thousand equal items: one evaluation costs about 5 million, over the 1 million one
    // call may spend.
    let out = c.kubectl(&["create", "-f", &write(&c, "long.yaml", &pairs_object("long", &[(0, 1000)]))]).await;
    assert!(!out.ok);
    assert_eq!(
        out.stderr.trim(),
        "The Pair \"long\" is invalid: spec.l0: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x == y))"
    );

    // Twelve lists of 380: each evaluation costs 868,302 (6n² + 5n + 2 as kube's interpreter
    // counts it), under the per-call limit; together they are over the 10 million one object
    // may spend, so the rule that crosses it is refused and no rule runs after it.
    let lists: Vec<(usize, usize)> = (0..12).map(|i| (i, 380)).collect();
    let out = c.kubectl(&["create", "-f", &write(&c, "many.yaml", &pairs_object("many", &lists))]).await;
    assert!(!out.ok);
    let err = out.stderr.trim();
    assert!(err.starts_with("The Pair \"many\" is invalid: spec.l"), "{err}");
    assert!(
        err.ends_with(": Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"),
        "{err}"
    );
    // Eleven such lists fit in the budget.
    let lists: Vec<(usize, usize)> = (0..11).map(|i| (i, 380)).collect();
    c.must_kubectl(&["create", "-f", &write(&c, "eleven.yaml", &pairs_object("eleven", &lists))]).await;
    let names = c.must_kubectl(&["get", "pairs", "-o", "name"]).await;
    assert_eq!(names.split_whitespace().collect::<Vec<_>>(), vec!["pair.example.com/eleven", "pair.example.com/small"]);
}

/// A rule nested past CEL's recursion limit is refused with CEL's message and a rule just
/// within it is admitted and runs on an object, all without overflowing the server's stack
/// (which would abort the process serving every other request).
async fn deeply_nested_rules_are_refused_and_deep_ones_within_the_limit_run(backend: Backend) {
    let c = cluster(backend).await;
    let chain = |n: usize| format!("            - rule: \"self.count{} >= 0\"", " + 0".repeat(n));
    let n = "              count: {type: integer, maximum: 100}\n";

    let deep = definition("chains", "Chain", n, &chain(5000));
    let out = c.kubectl(&["create", "-f", &write(&c, "deep.yaml", &deep)]).await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains("compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250"),
        "{}",
        out.stderr
    );
    let parens = format!("            - rule: \"{}true{}\"", "(".repeat(120), ")".repeat(120));
    let out = c.kubectl(&["create", "-f", &write(&c, "parens.yaml", &definition("chains", "Chain", n, &parens))]).await;
    assert!(!out.ok);
    assert!(out.stderr.contains("compilation failed: ERROR: "), "{}", out.stderr);

    // Within the limit: admitted, and evaluated on every write.
    let within = definition("chains", "Chain", n, &chain(240));
    c.must_kubectl(&["create", "-f", &write(&c, "within.yaml", &within)]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/chains.example.com"]).await;
    let object = "apiVersion: example.com/v1\nkind: Chain\nmetadata: {name: c, namespace: default}\nspec: {count: 7}\n";
    c.must_kubectl(&["create", "-f", &write(&c, "chain.yaml", object)]).await;
    let bad = "apiVersion: example.com/v1\nkind: Chain\nmetadata: {name: d, namespace: default}\nspec: {count: -1}\n";
    let out = c.kubectl(&["create", "-f", &write(&c, "bad-chain.yaml", bad)]).await;
    assert!(!out.ok);
    assert!(out.stderr.contains("spec: Invalid value: \"object\": failed rule: self.count + 0"), "{}", out.stderr);
}
