use super::*;
use serde_json::{json, Value};

/// Evaluates `expr` with `self` bound to `this` and counts its cost.
fn counted(expr: &str, this: &Value) -> Counted {
    let program = crate::cel_parse::compile(expr).expect("parses");
    let metered = instrument(program.expression());
    let meter = Arc::new(Meter::for_programs(std::iter::once(&metered)));
    let libraries = crate::rules::libraries().expect("libraries");
    let mut context = libraries.new_inner_scope();
    context.add_variable_as_val(METER_VARIABLE, Box::new(MeterVal(meter.clone())));
    let spelling = crate::cel_view::Spelling { renames: false, formatted: false };
    context.add_variable_as_val("self", crate::cel_view::Reads::default().value(None, spelling, this));
    meter.evaluate(&metered, &context)
}

/// Runs each `(expression, self, cost)` and lists those that cost something else.
fn mismatches(cases: &[(&str, Value, u64)]) -> Vec<String> {
    cases
        .iter()
        .filter_map(|(expr, this, want)| {
            let c = counted(expr, this);
            (c.cost != *want || c.result.is_err())
                .then(|| format!("{expr}: counted {} ({:?}), kube counts {want}", c.cost, c.result))
        })
        .collect()
}

/// cel-go's runtime cost cases (`interpreter/runtimecost_test.go`). Its inputs are
/// variables of their own; here they are fields of `self`, which costs one more per read.
/// kube evaluates with cel-go's `OptOptimize`, where the test does not: a list or map
/// literal of constants, a conversion of one, and `in` such a list cost nothing there, so
/// each such literal, the empty list `map` and `filter` start from included, takes 10
/// (a map 30) off cel-go's figure.
#[test]
fn counts_cel_go_runtime_costs() {
    let s500 = "a1".repeat(250);
    let none = json!({});
    let cases = [
        ("'Hello World!'", none.clone(), 0),
        ("self", json!([1, 2]), 1),
        ("self['key']", json!({"key": "v"}), 2),
        ("self[0]", json!(["v"]), 2),
        ("self['ke' + 'y']", json!({"key": "v"}), 3),
        ("self[3-3]", json!(["v"]), 3),
        ("has(self.a)", json!({"a": 1}), 1),
        ("has(self.a.b)", json!({"a": {"b": 1}}), 2),
        ("[1, 2, 3]", none.clone(), 0),
        ("{'a': 1, 'b': 2, 'c': 3}", none.clone(), 0),
        ("self.all(x, true)", json!([]), 2),
        ("[1, 2, 3].all(x, true)", none.clone(), 10),
        ("self.matches('[0-9]')", json!(s500), 103),
        ("'123'.matches('[0-9]')", none.clone(), 2),
        ("false || false", none.clone(), 0),
        ("true || false", none.clone(), 0),
        ("false && true", none.clone(), 0),
        ("1 < 2", none.clone(), 1),
        ("1 == 2", none.clone(), 1),
        ("2 in [1, 2, 3]", none.clone(), 0),
        ("1 % 1 == 0", none.clone(), 2),
        ("true ? 1 : 2", none.clone(), 0),
        ("size('123')", none.clone(), 1),
        ("'12345678901234567890' == '123456789012345678901234567890'", none.clone(), 2),
        ("string(1)", none.clone(), 0),
        ("self.a.contains(self.b)", json!({"a": s500, "b": s500}), 2504),
        ("self.a.startsWith(self.b)", json!({"a": "idc", "b": s500}), 5),
        ("size(self)", json!("500"), 2),
        ("(self.x > 2 ? self.i1 : self.i2).all(y, true)", json!({"x": 1, "i1": [{}], "i2": [{}]}), 8),
        ("true ? false : 1 > 3", none.clone(), 0),
        ("false ? false : 1 > 3", none.clone(), 1),
        ("self.all(k, self[k].a > 3)", json!({"val": {"a": 0}}), 9),
        ("(self.a + self.b).all(x, true)", json!({"a": [], "b": []}), 6),
        ("'abcdefg'.contains(self.a + self.b)", json!({"a": "val1", "b": "val2222222"}), 8),
        ("(1 > 2 ? 5 : 3) > 1", none.clone(), 2),
        ("(1 > 2 || 2 > 1) == true", none.clone(), 3),
        ("[{'k1': 1}, {'k2': 2}].all(x, true)", none.clone(), 7),
        ("[1,2,3,4,5].filter(x, x % 2 == 0)", none.clone(), 42),
        ("[1,2,3,4,5].map(x, x)", none.clone(), 66),
        ("[1,2,3,4,5].map(x, x).filter(x, x % 2 == 0)", none.clone(), 108),
        ("[1,2,3,4,5].map(x, x).exists(x, x == 5) == true", none.clone(), 98),
        ("[1,2,3,4,5].map(x, x).map(x, x)", none.clone(), 132),
        ("[1,2,3,4,5].map(x, [x, x]).filter(z, z.size() == 2)", none.clone(), 202),
        ("[1,2,3,4,5].map(x, [x, x]).all(y, y.all(y, y == 1))", none.clone(), 151),
        ("[1,2,3,4,5].map(x, x).map(x, x) + [1]", none.clone(), 133),
        ("[1,2,3].all(i, i in [1,2,3].map(j, j + j))", none.clone(), 56),
    ];
    let wrong = mismatches(&cases);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Kubernetes' measured costs of rules on a CRD's fields (apiextensions-apiserver's
/// `celcoststability_test.go` and `validation_test.go`): `self` is an object of fields
/// `val1`, `val2`, ...
#[test]
fn counts_kube_cost_stability_cases() {
    let rook = json!({"val1": "Rook takes 👑", "val2": "Rook takes 👑"});
    let ints = json!({"val1": [1, 2, 3], "val2": [1, 2, 3]});
    let large: Vec<i64> = (0..1000).collect();
    let sets = json!({"val1": ["a", "b", "c"], "val2": ["a", "c", "b"], "val3": large});
    let maps = json!({"val1": {"k1": "a", "k2": "b"}, "val2": {"k2": "b", "k1": "a"}});
    let cases = [
        ("self.val1 == self.val2", json!({"val1": 1, "val2": 1}), 5),
        ("self.val1 + 1 == 2", json!({"val1": 1}), 4),
        ("!self.val1.matches('^[0-9]*$')", rook.clone(), 7),
        ("self.val1.matches('^[^0-9]*$')", rook.clone(), 8),
        ("size(self.val1) == 12", rook.clone(), 4),
        ("self.val1.charAt(3) == 'k'", rook.clone(), 4),
        ("self.val1.indexOf('o') == 1", rook.clone(), 4),
        ("self.val1.replace(' ', 'x') == 'Rookxtakesx👑'", rook.clone(), 7),
        ("self.val1.split(' ') == ['Rook', 'takes', '👑']", rook.clone(), 6),
        ("self.val1.substring(5) == 'takes 👑'", rook.clone(), 5),
        ("self.val1.substring(4, 10).trim() == 'takes'", rook.clone(), 6),
        ("self.val1.upperAscii() == 'ROOK TAKES 👑'", rook.clone(), 6),
        ("self.val1.lowerAscii() == self.val1.lowerAscii()", rook.clone(), 10),
        ("'%o %o %o'.format([7, 8, 9]) == '7 10 11'", rook.clone(), 2),
        ("1 in self.val1", ints.clone(), 5),
        ("self.val2[0] in self.val1", ints.clone(), 8),
        ("!(0 in self.val1)", ints.clone(), 6),
        ("self.val1 + self.val2 == [1, 2, 3, 1, 2, 3]", ints.clone(), 6),
        ("self.val1 + [4, 5] == [1, 2, 3, 4, 5]", ints.clone(), 4),
        ("has(self.val1)", ints.clone(), 1),
        ("has(self.val1) && has(self.val2)", ints.clone(), 2),
        ("self.val1 == ['c', 'b', 'a']", sets.clone(), 3),
        ("'a' in self.val1", sets.clone(), 5),
        ("sets.contains(self.val1, ['a'])", sets.clone(), 6),
        ("sets.equivalent(self.val1, ['a', 'b', 'c'])", sets.clone(), 21),
        ("sets.intersects(self.val1, ['a'])", sets.clone(), 6),
        ("sets.contains(self.val3, [1])", sets.clone(), 1003),
        ("!sets.equivalent(self.val3, [1, 2, 3])", sets.clone(), 6004),
        ("self.val1 == self.val2", maps.clone(), 5),
        ("'k1' in self.val1", maps.clone(), 3),
        ("self.val1 in ['Pending', 'Available']", json!({"val1": "Pending"}), 2),
        ("double(5) < 10.0", json!({}), 1),
        ("5 < int(10.0)", json!({}), 1),
        ("double(self.val1) < 10.0", json!({"val1": 5}), 4),
        ("self.val1 < int(self.val4)", json!({"val1": 5, "val4": 10.0}), 6),
        ("string(self.val1) == self.val6", json!({"val1": 10, "val6": "10"}), 6),
        // Its validation tests' costs of library calls.
        ("[1,2,3,4].isSorted()", json!({}), 4),
        ("url('https:://kubernetes.io/').getHostname() != 'test'", json!({}), 4),
        ("size('abc 123 def 123'.split(' ')) > 0", json!({}), 5),
        ("size(['aa', 'bb', 'cc', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].join(' ')) > 0", json!({}), 7),
    ];
    let wrong = mismatches(&cases);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// cel-go's runtime costs of its two-variable comprehensions (`ext/comprehensions_test.go`),
/// less, as above, what `OptOptimize` makes constant: each list literal of constants (10)
/// and map literal of constants (30), the empty list or map a transform starts from
/// included. Its variable `m` is `self` here (a read of 1 either way).
#[test]
fn counts_cel_go_two_variable_costs() {
    let none = json!({});
    let cases = [
        ("[1, 2, 3, 4].all(i, v, i < 5 && v > 0)", none.clone(), 39 - 10),
        ("{1: 1, 2: 2, 3: 3}.all(i, v, i < 5 && v > 0)", none.clone(), 52 - 30),
        ("!{0: 0}.all(i, v, i < 5 && v > 0)", none.clone(), 39 - 30),
        ("self.all(k, v, k < v)", json!({"he": "hello", "go": "goodbye"}), 14),
        ("[].transformList(i, v, v) == []", none.clone(), 31 - 3 * 10),
        ("[1].transformList(i, v, i) == [0]", none.clone(), 45 - 3 * 10),
        ("[3, 2, 1].transformList(i, v, v > i, v) == [3, 2]", none.clone(), 67 - 3 * 10),
        ("[].transformMap(k, v, v + 1) == {}", none.clone(), 71 - 10 - 2 * 30),
        ("{}.transformMap(k, v, v + 1) == {}", none.clone(), 91 - 3 * 30),
        ("{1: 2}.transformMap(k, v, v + 1) == {1: 3}", none.clone(), 97 - 3 * 30),
        ("{1: 2, 3: 4, 5: 6}.transformMap(k, v, k % 3 == 0, v + 1) == {3: 5}", none.clone(), 106 - 3 * 30),
        // `[2]` (10), the map to start from (30) and `{'legacy-solo': [1, 2]}` (30 and 10).
        (
            "self.transformMap(k, v, k.startsWith('legacy') && v.size() == 1, v + [2]) == {'legacy-solo': [1, 2]}",
            json!({"legacy-solo": [1], "legacy-pair": [3, 2]}),
            100 - 10 - 30 - 40,
        ),
        ("{1: 2}.transformMapEntry(k, v, {v: k}) == {2: 1}", none.clone(), 126 - 3 * 30),
        (
            "self.transformMapEntry(k, v, {v: k}) == self.transformMapEntry(k, v, {v: k})",
            json!({"legacy-solo": 1, "legacy-pair": 2}),
            201 - 2 * 30,
        ),
    ];
    let wrong = mismatches(&cases);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Two-variable macros on lists and maps of `self`, costed from cel-go's forms: per
/// element, the condition (`@not_strictly_false(@result)` 2, with `!` 3, `true` nothing)
/// and the step (the accumulator read 1, the body, `+ [x]` 11 or `cel.@mapInsert` 1), and
/// the result read once (1).
#[test]
fn counts_two_variable_macros_on_self() {
    let list = json!([1, 2, 3]);
    let cases = [
        // 1 + 3 × (2 + 1 + 2) + 1.
        ("self.all(i, v, v > 0)", list.clone(), 17),
        // Stops at the third element's condition: 1 + (2 + 1 + 2) × 2 + 2 + 1.
        ("self.all(i, v, v < 2)", list.clone(), 14),
        // 1 + (3 + 1 + 2) × 2 + 3 (the third condition stops it) + 1.
        ("self.exists(i, v, v == 2)", list.clone(), 17),
        // 1 + 3 × 2 + 2 (`@result + 1` once) + 2 (`@result == 1`).
        ("self.existsOne(i, v, v == 2)", list.clone(), 11),
        // 1 + 3 × (1 + 10 + 2 + 1) + 1: the accumulator, the list, `v * 2`, `+`.
        ("self.transformList(i, v, v * 2)", list.clone(), 44),
        // The filter (4) on each; two appends (1 + 10 + 3 + 1).
        ("self.transformList(i, v, v + i > 2, v * i)", list.clone(), 1 + 3 * 4 + 2 * 15 + 1),
        // 1 + 3 × (1 + 1 + 1 + 1 + 1) + 1: the accumulator, `i`, `v`, `*`, the insert.
        ("self.transformMap(i, v, v * 2)", list.clone(), 17),
        // The filter (2) on each, one insert.
        ("self.transformMap(i, v, v == 2, i)", list.clone(), 1 + 3 * 2 + 4 + 1),
        // 1 + 2 × (1 + 30 + 1 + 1 + 1) + 1.
        ("self.transformMapEntry(i, v, {v: i})", json!([5, 6]), 70),
        ("self.transformMapEntry(i, v, v > 5, {v: i})", json!([5, 6]), 1 + 2 * 2 + 34 + 1),
        // On maps: 1 + 2 × (2 + 1 + 2) + 1.
        ("self.all(k, v, v > 0)", json!({"a": 1, "b": 2}), 12),
        ("self.exists(k, v, v > 5)", json!({"a": 1, "b": 2}), 1 + 2 * (3 + 1 + 2) + 1),
        // `k + v` on one-letter strings: 1.
        ("self.transformList(k, v, k + v)", json!({"a": "x", "b": "yz"}), 1 + 2 * 15 + 1),
        ("self.transformMap(k, v, v + 1)", json!({"a": 1, "b": 2}), 1 + 2 * 5 + 1),
        ("self.transformMapEntry(k, v, {v: k})", json!({"a": 1, "b": 2}), 1 + 2 * 34 + 1),
    ];
    let wrong = mismatches(&cases);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Where cel-go's two-variable macro is built as its one-variable one (`all`, `exists`,
/// `exists_one`, `map`, `filter`), the two cost the same.
#[test]
fn two_variable_macros_cost_what_their_one_variable_twins_do() {
    let pairs = [
        ("self.all(i, v, v > 0)", "self.all(v, v > 0)"),
        ("self.all(i, v, v != 2)", "self.all(v, v != 2)"),
        ("self.exists(i, v, v == 2)", "self.exists(v, v == 2)"),
        ("self.exists(i, v, v > 5)", "self.exists(v, v > 5)"),
        ("self.existsOne(i, v, v == 2)", "self.exists_one(v, v == 2)"),
        ("self.exists_one(i, v, v > 0)", "self.exists_one(v, v > 0)"),
        ("self.transformList(i, v, v * 2)", "self.map(v, v * 2)"),
        ("self.transformList(i, v, v > 1, v)", "self.filter(v, v > 1)"),
        ("self.transformList(i, v, v * 2).exists(j, w, w == 4)", "self.map(v, v * 2).exists(w, w == 4)"),
    ];
    for this in [json!([1, 2, 3]), json!([]), json!([7])] {
        for (two, one) in pairs {
            let (a, b) = (counted(two, &this), counted(one, &this));
            assert!(a.result.is_ok() && b.result.is_ok(), "{two} {a:?} {one} {b:?}");
            assert_eq!(a.cost, b.cost, "{two} against {one} on {this}");
        }
    }
    let keys = json!({"a": 1, "b": 2});
    let (a, b) = (counted("self.all(k, v, k != 'x')", &keys), counted("self.all(k, k != 'x')", &keys));
    assert_eq!((a.cost, a.result), (b.cost, b.result));
}

/// A macro inside another (in its body, filter or range) is charged as cel-go charges its
/// form there: only the outer macro's pair carries both forms, the inner one is lowered.
#[test]
fn counts_nested_two_variable_macros() {
    let rows = json!([[1, 2], [3]]);
    let cases = [
        // Outer: 1 + per row (2 + 1 + inner) + 1; inner: row 1 + per element
        // (2 + 1 + 3) + 1, 14 and 8.
        ("self.all(i, row, row.all(j, v, v > i))", rows.clone(), 1 + (3 + 14) + (3 + 8) + 1),
        // Outer appends (12 + inner); inner inserts (6 each) and reads `row` and its
        // result: 14 and 8.
        ("self.transformList(i, row, row.transformMap(j, v, v + i))", rows.clone(), 1 + (12 + 14) + (12 + 8) + 1),
        // The filter is an `exists` (row 1, one element 3 + 4, the result 1), true for
        // the first row, which is inserted (1 + 30 + 1 + 1 + 1 + 1).
        (
            "self.transformMapEntry(i, row, row.exists(j, v, v == i), {i: row.size()})",
            json!([[0], [5]]),
            1 + (9 + 35) + 9 + 1,
        ),
        // The range a macro: the inner `transformList` (1 + 3 × 14 + 1), then `exists`
        // on [2, 4, 6] (6, 6, then 3 stops it, and 1).
        ("self.transformList(i, v, v * 2).exists(j, w, w == 4)", json!([1, 2, 3]), 44 + 16),
        // Three levels: each level's `all` over one element.
        (
            "self.all(i, a, a.all(j, b, b.all(k, c, c == i + j + k)))",
            json!([[[0]]]),
            1 + 3 + (1 + 3 + (1 + 3 + 7 + 1) + 1) + 1,
        ),
    ];
    let wrong = mismatches(&cases);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // And as their one-variable twins, where cel-go's forms match.
    for (two, one) in [
        ("self.all(i, row, row.all(j, v, v > 0))", "self.all(row, row.all(v, v > 0))"),
        ("self.all(row, row.exists(j, v, v == 3))", "self.all(row, row.exists(v, v == 3))"),
        ("self.transformList(i, row, row.transformList(j, v, v * 2))", "self.map(row, row.map(v, v * 2))"),
    ] {
        assert_eq!(counted(two, &rows).cost, counted(one, &rows).cost, "{two} against {one}");
    }
}

/// An evaluation stops once it passes the per-call limit, shortly past it, and is known
/// to have, even where `||` would have absorbed the error it stopped with.
#[test]
fn evaluation_stops_at_the_limit() {
    let pairs = json!(vec![7; 2000]);
    let c = counted("self.all(x, self.all(y, x == y)) || true", &pairs);
    assert!(c.over_limit, "{c:?}");
    assert!(c.cost > PER_CALL_LIMIT && c.cost < PER_CALL_LIMIT + 100, "{c:?}");
    // Below the limit: 6n² + 5n + 2 for n items (the integration test's lists rely on it).
    let c = counted("self.all(x, self.all(y, x == y))", &json!(vec![7; 380]));
    assert_eq!((c.cost, c.over_limit), (868_302, false));
    let c = counted("self.size() > 1 || self.all(x, self.all(y, x == y))", &pairs);
    assert!(!c.over_limit && c.cost == 3, "{c:?}");
    assert_eq!(c.result, Ok(cel::Value::Bool(true)));
}
