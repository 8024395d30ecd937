use super::*;
use crate::cel_parse::Refused;

fn eval(expr: &str) -> Result<Value, String> {
    crate::rules::evaluate_in_libraries(expr)
}

fn t(expr: &str) {
    assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
}

/// The parse errors of `expr`, in kube's frame.
fn refused(expr: &str) -> String {
    match crate::cel_parse::compile(expr) {
        Err(Refused::Parse(e)) => crate::cel_check::parse_issues(expr, &e),
        other => panic!("{expr} parsed: {other:?}"),
    }
}

#[test]
fn quantifiers_see_index_or_key_and_value() {
    // cel-go's examples.
    t("[1, 2, 3, 4].all(i, v, i < 5 && v > 0)");
    t("[1, 2, 3, 4].all(i, v, i < v)");
    t("[1, 2, 3, 4].all(i, v, i > v) == false");
    t("{'hello': 'world', 'hello!': 'world'}.all(k, v, k.startsWith('hello') && v == 'world')");
    t("{'hello': 'world', 'hello!': 'worlds'}.all(k, v, k.startsWith('hello') && v.endsWith('world')) == false");
    t("{'hello': 'world', 'hello!': 'worlds'}.exists(k, v, k.startsWith('hello') && v.endsWith('world'))");
    t("{'hello': 'world', 'hello!': 'worlds'}.existsOne(k, v, k.startsWith('hello') && v.endsWith('world'))");
    t("{'hello': 'world', 'hello!': 'worlds'}.exists_one(k, v, k.startsWith('hello') && v.endsWith('world'))");
    t("{'hello': 'world', 'hello!': 'wow, world'}.exists_one(k, v, k.startsWith('hello') && v.endsWith('world')) == false");
    t("['hello', 'world', 'hello!'].exists(i, v, v.startsWith('hello') && i == 2)");
    t("!['a', 'b'].exists(i, v, i == 1 && v == 'a') && [].all(i, v, false) && ![].exists(i, v, true)");
    t("['a', 'b', 'a'].existsOne(i, v, v == 'b') && !['a', 'b', 'a'].existsOne(i, v, v == 'a')");
    // `_` is a name like any other.
    t("{'a': 1}.all(_, v, v == 1) && {'a': 1}.all(k, _, k == 'a')");
    // The variables shadow outer ones, and the outer ones are back after.
    t("[[1, 2], [3]].all(i, v, v.all(i, w, i < 2)) && [5].exists(i, v, [7].all(j, w, i == 0 && v == 5 && w == 7))");
    t("{'x': [1]}.all(k, v, [9].exists(k, w, k == 0 && w == 9) && k == 'x')");
}

#[test]
fn quantifiers_absorb_errors_as_the_standard_macros_do() {
    // An error beside a deciding element does not matter, in either order.
    t("![0, 1].all(i, v, 1 / v == 1 && v == 5)");
    t("![1, 0].all(i, v, v == 5 && 1 / v == 1)");
    t("[0, 1].exists(i, v, 1 / v == 1)");
    assert!(eval("[0, 1].all(i, v, 1 / v == 1)").is_err_and(|e| e.starts_with("Division by zero")));
    assert!(eval("[1, 0].exists(i, v, 1 / v == 2)").is_err());
    // existsOne decides nothing by an error.
    assert!(eval("[0, 1].existsOne(i, v, 1 / v == 1)").is_err());
}

#[test]
fn transforms_build_lists_and_maps() {
    t("[1, 2, 3].transformList(indexVar, valueVar, (indexVar * valueVar) + valueVar) == [1, 4, 9]");
    t("[1, 2, 3].transformList(indexVar, valueVar, indexVar % 2 == 0, (indexVar * valueVar) + valueVar) == [1, 9]");
    t("['hello', 'world'].transformList(i, v, v.startsWith('greeting'), v) == []");
    t("[].transformList(i, v, v) == [] && {}.transformList(k, v, k) == []");
    t("{'Hello': 'world'}.transformList(k, v, k.lowerAscii() + '=' + v) == ['hello=world']");
    t("dyn({'Hello': 'world'}).transformList(k, v, k + v) == ['Helloworld']");
    t("['Hello', 'world'].transformMap(i, v, [v.lowerAscii()]) == {0: ['hello'], 1: ['world']}");
    t("[1, 2, 3].transformMap(indexVar, valueVar, (indexVar * valueVar) + valueVar) == {0: 1, 1: 4, 2: 9}");
    t("[1, 2, 3].transformMap(indexVar, valueVar, indexVar % 2 == 0, (indexVar * valueVar) + valueVar) == {0: 1, 2: 9}");
    t("{'hello': 'world', 'goodbye': 'cruel world'}.transformMap(k, v, k + ', ' + v + '!') == {'hello': 'hello, world!', 'goodbye': 'goodbye, cruel world!'}");
    t("{'hello': 'world', 'goodbye': 'cruel world'}.transformMap(k, v, v.startsWith('world'), k + v) == {'hello': 'helloworld'}");
    t("{1: 2}.transformMap(k, v, v + 1) == {1: 3} && [].transformMap(k, v, v + 1) == {}");
    t("['key1:value1', 'key2:value2'].transformMapEntry(i, v, {v.split(':')[0]: v.split(':')[1]}) == {'key1': 'value1', 'key2': 'value2'}");
    t("{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, {v: k}) == {'world': 'hello', 'tacocat': 'greetings'}");
    t("{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, v == 'tacocat', {k: v}) == {'greetings': 'tacocat'}");
    t("{'hello': 'world'}.transformMapEntry(k, v, {}) == {} && [1, 2].transformMapEntry(i, v, {v: i, -v: i}).size() == 4");
    // Nested: each level's variables.
    t("[[1, 2], [3]].transformList(i, row, row.transformList(j, v, i * 10 + j + v)) == [[1, 3], [13]]");
}

/// The lowered form's condition, step, result and start stand for cel-go's: they carry
/// their ids.
#[test]
fn the_lowered_form_carries_cel_gos_ids() {
    fn ids(e: &IdedExpr, out: &mut Vec<u64>) {
        out.push(e.id);
        crate::cel_check::children(e).into_iter().for_each(|c| ids(c, out));
    }
    for rule in [
        "[1].all(i, v, v > 0)",
        "[1].exists(i, v, v > 0)",
        "[1].existsOne(i, v, v > 0)",
        "[1].transformList(i, v, v > 0, v)",
        "[1].transformMap(i, v, v)",
        "{1: 2}.transformMapEntry(k, v, k > 0, {v: k})",
    ] {
        let program = crate::cel_parse::compile(rule).expect("parses");
        let Expr::Call(call) = &program.expression().expr else { panic!("{rule}") };
        let two = TwoVar::of(call).expect("two forms");
        let mut lowered = Vec::new();
        ids(two.lowered, &mut lowered);
        let go = two.cel_go;
        for part in [&go.accu_init, &go.loop_cond, &go.loop_step, &go.result] {
            assert!(lowered.contains(&part.id), "{rule}: {part:?}");
        }
    }
}

#[test]
fn a_map_key_twice_is_cel_gos_error() {
    assert_eq!(eval("[1, 1].transformMapEntry(i, v, {v: i})"), Err("insert failed: key 1 already exists".to_string()));
    assert_eq!(eval("[0, 0u].transformMapEntry(i, v, {v: i})"), Err("insert failed: key 0 already exists".to_string()));
    assert_eq!(
        eval("['a', 'b'].transformMapEntry(i, v, {'k': v})"),
        Err("insert failed: key k already exists".to_string())
    );
}

#[test]
fn wrong_variables_are_refused_in_cel_gos_words() {
    assert_eq!(
        refused("[].all(i, i, i < i)"),
        "ERROR: <input>:1:11: duplicate variable name: i\n | [].all(i, i, i < i)\n | ..........^"
    );
    assert!(refused("[].all(__result__, i, __result__ < i)")
        .starts_with("ERROR: <input>:1:8: iteration variable overwrites accumulator variable"));
    assert!(refused("[].all(j, __result__, __result__ < j)")
        .starts_with("ERROR: <input>:1:11: iteration variable overwrites accumulator variable"));
    for expr in [
        "[].all(i.j, k, i.j < k)",
        "[].all(j, i.k, j < i.k)",
        "[].exists(i.j, k, i.j < k)",
        "[].existsOne(j, i.k, j < i.k)",
        "[].exists_one(i.j, k, i.j < k)",
        "[].transformList(i.j, k, i.j + k)",
        "{}.transformMap(j, i.k, j + i.k)",
        "{}.transformMapEntry(i.j, k, {k: i.j})",
        "[].transformList(1, k, k)",
    ] {
        assert!(refused(expr).contains("argument must be a simple name"), "{expr}: {}", refused(expr));
    }
}

#[test]
fn nested_macros_grow_the_expression_linearly() {
    fn size(e: &IdedExpr) -> usize {
        1 + crate::cel_check::children(e).into_iter().map(size).sum::<usize>()
    }
    let nested = |depth: usize| {
        let mut s = "v > 0".to_string();
        for _ in 0..depth {
            s = format!("[1].all(i, v, {s})");
        }
        crate::cel_parse::compile(&s).map(|p| size(p.expression())).expect("parses")
    };
    let (ten, eleven, twenty) = (nested(10), nested(11), nested(20));
    assert_eq!(twenty - ten, 10 * (eleven - ten), "{ten} {eleven} {twenty}");
}

/// The deepest nesting the parser takes is checked and runs on a runtime thread's stack
/// (with the segment [`crate::cel_parse::with_stack`] adds), though each level of the
/// lowered form nests deeper than a one-variable macro.
#[test]
fn the_deepest_nesting_runs_within_the_stack() {
    let deepest = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let mut depth = 0;
            let mut last = None;
            for d in (10..=100).step_by(10) {
                let rule = format!("{}self == 1{}", "[1].all(i, v, ".repeat(d), ")".repeat(d));
                let Ok(program) = crate::cel_parse::compile(&rule) else { break };
                let decl = crate::cel_decl::of_schema(&serde_json::json!({"type": "integer"}), false).expect("typed");
                let checked = crate::cel_parse::with_stack(|| {
                    crate::cel_check::check(&program, &rule, &decl, crate::cel_check::OldSelf::Value)
                });
                assert_eq!(checked.issues, None);
                let mut env = cel::Env::stdlib();
                env.add_extension(extension).expect("declared");
                let mut context = cel::Context::with_env(Arc::new(env));
                context.add_variable_from_value("self", 1);
                last = Some(crate::cel_parse::with_stack(|| program.execute(&context).map_err(|e| e.to_string())));
                depth = d;
            }
            (depth, last)
        })
        .expect("thread")
        .join()
        .expect("no overflow");
    assert_eq!(deepest, (90, Some(Ok(Value::Bool(true)))));
}
