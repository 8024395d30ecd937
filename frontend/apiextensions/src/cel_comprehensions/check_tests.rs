use serde_json::json;

use crate::cel_check::{check, OldSelf};

fn checked(schema: &serde_json::Value, rule: &str) -> crate::cel_check::Checked {
    let decl = crate::cel_decl::of_schema(schema, false).expect("a typed schema");
    let program = crate::cel_parse::compile(rule).expect("a rule that parses");
    check(&program, rule, &decl, OldSelf::Value)
}

fn spec() -> serde_json::Value {
    json!({"type": "object", "properties": {
            "ports": {"type": "array", "maxItems": 3, "items": {"type": "integer"}},
            "labels": {"type": "object", "maxProperties": 3, "additionalProperties": {"type": "integer"}},
            "names": {"type": "array", "items": {"type": "string"}}}})
}

/// cel-go's estimates of its own tests (their maximum: a rule is refused by it).
#[test]
fn estimates_are_cel_gos() {
    let object = json!({"type": "object"});
    for (rule, max) in [
        ("[1, 2, 3, 4].all(i, v, i < 5 && v > 0)", 39),
        ("{1: 1, 2: 2, 3: 3}.all(i, v, i < 5 && v > 0)", 52),
        ("!{0: 0}.all(i, v, i < 5 && v > 0)", 39),
        ("[].transformList(i, v, v) == []", 31),
        ("[1].transformList(i, v, i) == [0]", 45),
        ("[3, 2, 1].transformList(i, v, v > i, v) == [3, 2]", 80),
        ("[].transformMap(k, v, v + 1) == {}", 71),
        ("{}.transformMap(k, v, v + 1) == {}", 91),
        ("{1: 2}.transformMap(k, v, v + 1) == {1: 3}", 97),
        ("{1: 2, 3: 4, 5: 6}.transformMap(k, v, k % 3 == 0, v + 1) == {3: 5}", 116),
        ("{1: 2}.transformMapEntry(k, v, {v: k}) == {2: 1}", 126),
    ] {
        let c = checked(&object, rule);
        assert_eq!(c.issues, None, "{rule}");
        assert_eq!(c.max_cost, max, "{rule}");
    }
    // On the schema's sizes, as cel-go's `m.all(i, v, i < 5 && v > 0)` with `m` of 3 (23),
    // `self.labels` costing one more than `m` (a selection).
    assert_eq!(checked(&spec(), "self.labels.all(k, v, v > 0 && v < 5)").max_cost, 24);
    // The range, the result, and per element `@not_strictly_false(!@result)` and
    // `@result || v > i`.
    assert_eq!(checked(&spec(), "self.ports.exists(i, v, v > i)").max_cost, 2 + 1 + 3 * (3 + 4));
    // Unbounded, a nested comprehension is over kube's limit, as a one-variable one is.
    let nested = checked(&spec(), "self.names.all(i, a, self.names.all(j, b, i == j || a != b))");
    assert!(nested.max_cost > crate::cel_cost::PER_CALL_LIMIT, "{}", nested.max_cost);
}

/// Variables and results typed as cel-go's checker types them; wrong uses refused in its
/// words.
#[test]
fn types_are_cel_gos() {
    let spec = spec();
    let issue = |rule: &str| checked(&spec, rule).issues.unwrap_or_default();
    assert_eq!(
            issue("self.ports.transformList(i, p, p + 'a') == []"),
            "ERROR: <input>:1:34: found no matching overload for '_+_' applied to '(int, string)'\n | self.ports.transformList(i, p, p + 'a') == []\n | .................................^"
        );
    // The index is an int, the element and the key and value their schema's types.
    assert!(issue("self.ports.all(i, p, i == 'a')").contains("'_==_' applied to '(int, string)'"));
    assert!(issue("self.labels.all(k, v, k == v)").contains("'_==_' applied to '(string, int)'"));
    // Results: a list of the transform's type, a map from the index or key to it, the
    // transform's maps.
    assert!(issue("self.ports.transformList(i, p, p * 2)[0] == 'a'").contains("'_==_' applied to '(int, string)'"));
    assert!(issue("self.ports.transformMap(i, p, string(p))[0] == 1").contains("'_==_' applied to '(string, int)'"));
    assert!(issue("self.labels.transformMap(k, v, v > 1)['a'] == 1").contains("'_==_' applied to '(bool, int)'"));
    // A logical operator's operand is checked against bool on its own (cel-go's
    // `x.all(e, 0)` test).
    assert!(issue("self.labels.all(k, v, 1)").contains("expected type 'bool' but found 'int'"));
    assert!(issue("self.ports.existsOne(i, p, p)").contains("'_?_:_' applied to '(int, int, int)'"));
    assert!(issue("[1, 2].transformList(i, v, v % 2 == 0 ? [v] : v) == []")
        .contains("'_?_:_' applied to '(bool, list(int), int)'"));
    assert!(issue("{}.transformMapEntry(j, k, 'bad filter', {k: j}) == {}")
        .contains("found no matching overload for '_?_:_' applied to '(string, map(dyn, dyn), map(dyn, dyn))'"));
    assert!(issue("self.labels.transformMapEntry(k, v, []) == {}")
        .contains("found no matching overload for 'cel.@mapInsert' applied to '(map(dyn, dyn), list(dyn))'"));
    assert_eq!(
            issue("1.all(j, k, j < k)"),
            "ERROR: <input>:1:1: expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)\n | 1.all(j, k, j < k)\n | ^"
        );
    assert!(issue("'a'.existsOne(j, k, true)").contains("expression of type 'string' cannot be range"));
    // Constants are checked once, though the expression holds two forms of the macro.
    assert_eq!(
        issue("self.ports.all(i, p, duration('1x') > duration('1s'))").matches("invalid duration argument").count(),
        1
    );
    // A rule's own `true ? a : b` around a nested macro is checked as written.
    assert!(issue("self.ports.all(i, p, true ? p == 'x' : self.ports.all(j, q, q > 0))")
        .contains("'_==_' applied to '(int, string)'"));
    for fine in [
        "self.ports.all(i, p, p > i) && self.labels.exists(k, v, k.startsWith('a') && v == 1)",
        "self.labels.transformMap(k, v, v + 1)['a'] == 2 && self.ports.transformList(i, p, p)[0] == 1",
        "self.names.transformMapEntry(i, n, {n: i}).size() == size(self.names)",
        "self.ports.transformList(i, p, [p]).all(x, x[0] > 0)",
    ] {
        let c = checked(&spec, fine);
        assert_eq!(c.issues, None, "{fine}");
        assert!(!c.not_bool(), "{fine}");
    }
}
