//! CEL's two-variable comprehensions (kube's CRD environment has them since 1.32):
//! `all(i, v, p)`, `exists(i, v, p)`, `existsOne(i, v, p)` (and `exists_one`),
//! `transformList(i, v, [filter,] e)`, `transformMap(k, v, [filter,] e)` and
//! `transformMapEntry(k, v, [filter,] e)`, where on a list the first variable is the index and
//! the second the element, and on a map the key and its value.
//!
//! The cel-rust interpreter runs comprehensions of one variable only (it ignores a second
//! one), so each macro expands to two forms of the same expression, side by side as the
//! branches of `@lowered() ? <lowered> : <cel-go's>` ([`TwoVar::of`] recognises the pair;
//! `@lowered()`, true, is a name source cannot write, so no expression of a rule's own is
//! taken for one):
//!
//! * cel-go's own comprehension, exactly as its macro builds it (two variables, `@result` the
//!   accumulator, `cel.@mapInsert` building maps). The interpreter never evaluates it; the
//!   type checker and the cost estimator read it, so that types, errors and estimates are
//!   cel-go's.
//! * The lowered form the interpreter runs: a one-variable comprehension over the range's
//!   `[key or index, value]` pairs ([`ENTRIES`]) that binds the two variables for each
//!   expression the macro evaluates, as `cel.bind` does (a comprehension over an empty list
//!   whose accumulator is the bound name). `all` and `exists` keep the standard macros'
//!   `@result && p` and `@result || p` steps, so the interpreter absorbs a predicate's error as
//!   cel-go does (`false && error` is false); lists and maps are built by appending to a list,
//!   which the interpreter does in place, and maps made from it once at the end. (So when
//!   `transformMapEntry` meets a key twice and, later, an element whose transform fails, the
//!   rule fails with the latter's error, where cel-go stops at the repeated key.)
//!
//! Nested macros would copy each other's two forms into both of theirs; each copy keeps only
//! its own kind ([`Form`]), so an expression grows by a factor of two, not two per level.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{
    operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, ListExpr, LiteralValue, MapExpr,
};
use cel::common::types::{CelInt, CelList, Kind, DYN_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{ExecutionError, IdedExpr, Value};

use crate::cel_overload::{owned, values};

/// cel-go's accumulator, which CEL source cannot name.
const ACCU: &str = "@result";
/// cel-go's former accumulator name, which source can write: refused as a variable.
const LEGACY_ACCU: &str = "__result__";
/// The lowered form's loop variable, a `[key or index, value]` pair.
const PAIR: &str = "@pair";
/// The function listing a range's pairs.
const ENTRIES: &str = "@entries";
/// The function making a map of `[key, value]` pairs (`transformMap`).
const MAP_OF_PAIRS: &str = "@mapOfPairs";
/// The function merging a list of maps into one (`transformMapEntry`).
const MERGED_MAPS: &str = "@mergedMaps";
/// The condition choosing the lowered form: always true.
const LOWERED: &str = "@lowered";
/// cel-go's function inserting into the accumulated map, in its form of the macros.
pub(crate) const MAP_INSERT: &str = "cel.@mapInsert";

/// What a macro computes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Computes {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

/// The macros, by name and argument count.
const MACROS: &[(&str, usize, Computes)] = &[
    ("all", 3, Computes::All),
    ("exists", 3, Computes::Exists),
    ("existsOne", 3, Computes::ExistsOne),
    ("exists_one", 3, Computes::ExistsOne),
    ("transformList", 3, Computes::TransformList),
    ("transformList", 4, Computes::TransformList),
    ("transformMap", 3, Computes::TransformMap),
    ("transformMap", 4, Computes::TransformMap),
    ("transformMapEntry", 3, Computes::TransformMapEntry),
    ("transformMapEntry", 4, Computes::TransformMapEntry),
];

/// Declares the macros and the functions their lowered forms call on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    for &(name, count, kind) in MACROS {
        env.add_macro(Macro::receiver(name, count, move |helper, target, args| expand(kind, helper, target, args)))?;
    }
    env.add_overload(ENTRIES, "@entries_dyn", vec![DYN_TYPE], entries)?;
    env.add_overload(MAP_OF_PAIRS, "@mapOfPairs_list", vec![DYN_TYPE], map_of_pairs)?;
    env.add_overload(MERGED_MAPS, "@mergedMaps_list", vec![DYN_TYPE], merged_maps)?;
    env.add_overload(LOWERED, "@lowered", Vec::new(), lowered)?;
    Ok(())
}

/// The two forms of one expanded macro.
///
/// What evaluating it costs in kube is what cel-go's form costs. The lowered form's nodes that
/// stand for a node of cel-go's carry its id (see [`lowered_form`]): counting, for each such
/// node the interpreter evaluates, the cost of cel-go's node of that id, and nothing for the
/// lowered form's other nodes, counts what kube counts.
pub(crate) struct TwoVar<'e> {
    /// What the interpreter runs.
    pub(crate) lowered: &'e IdedExpr,
    /// cel-go's comprehension (with `iter_var2`), which the checker reads.
    pub(crate) cel_go: &'e ComprehensionExpr,
}

impl<'e> TwoVar<'e> {
    /// The two forms, when `call` is an expanded macro (`@lowered() ? lowered : cel-go's`).
    pub(crate) fn of(call: &'e CallExpr) -> Option<TwoVar<'e>> {
        if call.func_name != operators::CONDITIONAL || call.target.is_some() {
            return None;
        }
        match call.args.as_slice() {
            [IdedExpr { expr: Expr::Call(cond), .. }, lowered, IdedExpr { expr: Expr::Comprehension(c), .. }]
                if cond.func_name == LOWERED && cond.target.is_none() && cond.args.is_empty() =>
            {
                Some(TwoVar { lowered, cel_go: c })
            }
            _ => None,
        }
    }
}

/// Which of the two forms of nested macros a copy keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    Lowered,
    CelGo,
}

/// `e` with every expanded macro in it replaced by its `form`.
fn keep(form: Form, e: IdedExpr) -> IdedExpr {
    let id = e.id;
    let expr = match e.expr {
        Expr::Call(call) => {
            if let Some(two) = TwoVar::of(&call) {
                return match form {
                    Form::Lowered => keep(form, two.lowered.clone()),
                    Form::CelGo => {
                        let mut args = call.args;
                        keep(form, args.pop().expect("invariant: a recognised pair has three arguments"))
                    }
                };
            }
            Expr::Call(CallExpr {
                func_name: call.func_name,
                target: call.target.map(|t| Box::new(keep(form, *t))),
                args: call.args.into_iter().map(|a| keep(form, a)).collect(),
            })
        }
        Expr::Comprehension(c) => {
            let c = *c;
            Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range: keep(form, c.iter_range),
                iter_var: c.iter_var,
                iter_var2: c.iter_var2,
                accu_var: c.accu_var,
                accu_init: keep(form, c.accu_init),
                loop_cond: keep(form, c.loop_cond),
                loop_step: keep(form, c.loop_step),
                result: keep(form, c.result),
            }))
        }
        Expr::List(list) => Expr::List(ListExpr::new_with_optionals(
            list.elements.into_iter().map(|x| keep(form, x)).collect(),
            list.optional_indices,
        )),
        Expr::Map(map) => Expr::Map(MapExpr { entries: keep_entries(form, map.entries) }),
        Expr::Struct(mut s) => {
            s.entries = keep_entries(form, s.entries);
            Expr::Struct(s)
        }
        Expr::Select(mut select) => {
            select.operand = Box::new(keep(form, *select.operand));
            Expr::Select(select)
        }
        other @ (Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified) => other,
    };
    IdedExpr { id, expr }
}

fn keep_entries(form: Form, entries: Vec<IdedEntryExpr>) -> Vec<IdedEntryExpr> {
    entries
        .into_iter()
        .map(|mut e| {
            e.expr = match e.expr {
                EntryExpr::MapEntry(mut m) => {
                    m.key = keep(form, m.key);
                    m.value = keep(form, m.value);
                    EntryExpr::MapEntry(m)
                }
                EntryExpr::StructField(mut f) => {
                    f.value = keep(form, f.value);
                    EntryExpr::StructField(f)
                }
            };
            e
        })
        .collect()
}

/// The variable an argument names, as cel-go's macros require it.
fn variable(helper: &MacroExprHelper<'_>, arg: &IdedExpr) -> Result<String, ParseError> {
    match &arg.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(helper.new_error(arg.id, "argument must be a simple name")),
    }
}

/// The two variables, refused in cel-go's words and order.
fn variables(
    helper: &MacroExprHelper<'_>,
    first: &IdedExpr,
    second: &IdedExpr,
) -> Result<(String, String), ParseError> {
    let one = variable(helper, first)?;
    let two = variable(helper, second)?;
    if one == two {
        return Err(helper.new_error(second.id, format!("duplicate variable name: {one}")));
    }
    for (name, arg) in [(&one, first), (&two, second)] {
        if name == ACCU || name == LEGACY_ACCU {
            return Err(helper.new_error(arg.id, "iteration variable overwrites accumulator variable"));
        }
    }
    Ok((one, two))
}

/// Builds nodes at the macro's place in the source.
struct Build<'h, 'a> {
    helper: &'h mut MacroExprHelper<'a>,
}

impl Build<'_, '_> {
    fn node(&mut self, expr: Expr) -> IdedExpr {
        self.helper.next_expr(expr)
    }

    fn ident(&mut self, name: &str) -> IdedExpr {
        self.node(Expr::Ident(name.to_owned()))
    }

    fn accu(&mut self) -> IdedExpr {
        self.ident(ACCU)
    }

    fn boolean(&mut self, b: bool) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::Boolean(b.into())))
    }

    fn int(&mut self, n: i64) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::Int(n.into())))
    }

    fn call(&mut self, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::Call(CallExpr { func_name: function.to_owned(), target: None, args }))
    }

    fn list(&mut self, elements: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::List(ListExpr::new(elements)))
    }

    fn map(&mut self) -> IdedExpr {
        self.node(Expr::Map(MapExpr { entries: Vec::new() }))
    }

    #[allow(clippy::too_many_arguments)]
    fn comprehension(
        &mut self,
        range: IdedExpr,
        var: &str,
        var2: Option<&str>,
        init: IdedExpr,
        cond: IdedExpr,
        step: IdedExpr,
        result: IdedExpr,
    ) -> IdedExpr {
        self.node(Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range: range,
            iter_var: var.to_owned(),
            iter_var2: var2.map(str::to_owned),
            accu_var: ACCU.to_owned(),
            accu_init: init,
            loop_cond: cond,
            loop_step: step,
            result,
        })))
    }

    /// `body` with `name` bound to `value`, as `cel.bind` binds.
    fn bind(&mut self, name: &str, value: IdedExpr, body: IdedExpr) -> IdedExpr {
        let range = self.list(Vec::new());
        let cond = self.boolean(false);
        let step = self.ident(name);
        self.node(Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range: range,
            iter_var: "#unused".to_owned(),
            iter_var2: None,
            accu_var: name.to_owned(),
            accu_init: value,
            loop_cond: cond,
            loop_step: step,
            result: body,
        })))
    }

    /// Element `index` of the current pair.
    fn pair(&mut self, index: i64) -> IdedExpr {
        let pair = self.ident(PAIR);
        let index = self.int(index);
        self.call(operators::INDEX, vec![pair, index])
    }

    /// `body` with the two variables bound to the current pair.
    fn both(&mut self, (one, two): (&str, &str), body: IdedExpr) -> IdedExpr {
        let second = self.pair(1);
        let inner = self.bind(two, second, body);
        let first = self.pair(0);
        self.bind(one, first, inner)
    }
}

/// Expands one macro into its two forms.
fn expand(
    kind: Computes,
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let (one, two) = variables(helper, &args[0], &args[1])?;
    let target = target.take().expect("invariant: a receiver macro has a target");
    let mut rest = args.split_off(2);
    let body = rest.pop().expect("invariant: the macros take a body");
    let filter = rest.pop();
    let mut b = Build { helper };
    let cel_go = cel_go_form(
        &mut b,
        kind,
        keep(Form::CelGo, target.clone()),
        (&one, &two),
        filter.clone().map(|f| keep(Form::CelGo, f)),
        keep(Form::CelGo, body.clone()),
    );
    let lowered = lowered_form(
        &mut b,
        kind,
        &cel_go,
        keep(Form::Lowered, target),
        (&one, &two),
        filter.map(|f| keep(Form::Lowered, f)),
        keep(Form::Lowered, body),
    );
    let choice = b.call(LOWERED, Vec::new());
    Ok(Some(b.call(operators::CONDITIONAL, vec![choice, lowered, cel_go])))
}

/// cel-go's comprehension for the macro, node for node.
fn cel_go_form(
    b: &mut Build<'_, '_>,
    kind: Computes,
    range: IdedExpr,
    (one, two): (&str, &str),
    filter: Option<IdedExpr>,
    body: IdedExpr,
) -> IdedExpr {
    let (init, cond, step, result) = match kind {
        Computes::All | Computes::Exists => {
            let all = kind == Computes::All;
            let init = b.boolean(all);
            let accu = b.accu();
            let tested = if all { accu } else { b.call(operators::LOGICAL_NOT, vec![accu]) };
            let cond = b.call(operators::NOT_STRICTLY_FALSE, vec![tested]);
            let accu = b.accu();
            let step = b.call(if all { operators::LOGICAL_AND } else { operators::LOGICAL_OR }, vec![accu, body]);
            (init, cond, step, b.accu())
        }
        Computes::ExistsOne => {
            let init = b.int(0);
            let cond = b.boolean(true);
            let (accu, one_more) = (b.accu(), b.int(1));
            let plus = b.call(operators::ADD, vec![accu, one_more]);
            let accu = b.accu();
            let step = b.call(operators::CONDITIONAL, vec![body, plus, accu]);
            let (accu, once) = (b.accu(), b.int(1));
            (init, cond, step, b.call(operators::EQUALS, vec![accu, once]))
        }
        Computes::TransformList | Computes::TransformMap | Computes::TransformMapEntry => {
            let init = if kind == Computes::TransformList { b.list(Vec::new()) } else { b.map() };
            let cond = b.boolean(true);
            let accu = b.accu();
            let mut step = match kind {
                Computes::TransformList => {
                    let item = b.list(vec![body]);
                    b.call(operators::ADD, vec![accu, item])
                }
                Computes::TransformMap => {
                    let key = b.ident(one);
                    b.call(MAP_INSERT, vec![accu, key, body])
                }
                _ => b.call(MAP_INSERT, vec![accu, body]),
            };
            if let Some(filter) = filter {
                let accu = b.accu();
                step = b.call(operators::CONDITIONAL, vec![filter, step, accu]);
            }
            (init, cond, step, b.accu())
        }
    };
    b.comprehension(range, one, Some(two), init, cond, step, result)
}

/// The form the interpreter runs, made from cel-go's (`go`): its nodes that stand for one of
/// cel-go's carry that node's id (the accumulator's reads, the condition, the step's operator,
/// the result, a key read as `@pair[0]`, ...), so that what kube counts for cel-go's node can
/// be counted for it; the other nodes (listing the pairs, binding the variables, building maps
/// from lists) are this form's own, with ids of their own.
fn lowered_form(
    b: &mut Build<'_, '_>,
    kind: Computes,
    go: &IdedExpr,
    range: IdedExpr,
    vars: (&str, &str),
    filter: Option<IdedExpr>,
    body: IdedExpr,
) -> IdedExpr {
    let Expr::Comprehension(c) = &go.expr else { unreachable!("invariant: cel-go's form is a comprehension") };
    let pairs = b.call(ENTRIES, vec![range]);
    let body = b.both(vars, body);
    let filter = filter.map(|f| b.both(vars, f));
    let call_of = |e: &IdedExpr| match &e.expr {
        Expr::Call(call) => call.clone(),
        _ => unreachable!("invariant: cel-go's step is a call"),
    };
    // The step: cel-go's, its transform (or predicate) and filter lowered.
    let step = |b: &mut Build<'_, '_>| -> IdedExpr {
        let (filtered, inner) = match (&filter, &c.loop_step.expr) {
            (Some(_), Expr::Call(cond)) => (Some(cond.clone()), &cond.args[1]),
            _ => (None, &c.loop_step),
        };
        let mut call = call_of(inner);
        let accu = call.args[0].clone();
        let lowered = match kind {
            Computes::All | Computes::Exists => Expr::Call(CallExpr { args: vec![accu, body.clone()], ..call }),
            Computes::ExistsOne => {
                call.args[0] = body.clone();
                Expr::Call(call)
            }
            Computes::TransformList => {
                let item = IdedExpr { id: call.args[1].id, expr: Expr::List(ListExpr::new(vec![body.clone()])) };
                Expr::Call(CallExpr { func_name: operators::ADD.to_owned(), target: None, args: vec![accu, item] })
            }
            Computes::TransformMap => {
                // `cel.@mapInsert(@result, k, e)` appends `[k, e]`, `k` read as `@pair[0]`.
                let key_id = call.args[1].id;
                let mut key = b.pair(0);
                key.id = key_id;
                let pair = b.list(vec![key, body.clone()]);
                let item = b.list(vec![pair]);
                Expr::Call(CallExpr { func_name: operators::ADD.to_owned(), target: None, args: vec![accu, item] })
            }
            Computes::TransformMapEntry => {
                let item = b.list(vec![body.clone()]);
                Expr::Call(CallExpr { func_name: operators::ADD.to_owned(), target: None, args: vec![accu, item] })
            }
        };
        let lowered = IdedExpr { id: inner.id, expr: lowered };
        match (filtered, &filter) {
            (Some(mut cond), Some(f)) => {
                cond.args[0] = f.clone();
                cond.args[1] = lowered;
                IdedExpr { id: c.loop_step.id, expr: Expr::Call(cond) }
            }
            _ => lowered,
        }
    };
    let step = step(b);
    // Lists and maps are accumulated as a list; maps are made of it at the end.
    let init = match kind {
        Computes::TransformMap | Computes::TransformMapEntry => {
            IdedExpr { id: c.accu_init.id, expr: Expr::List(ListExpr::new(Vec::new())) }
        }
        _ => c.accu_init.clone(),
    };
    let list = b.comprehension(pairs, PAIR, None, init, c.loop_cond.clone(), step, c.result.clone());
    match kind {
        Computes::TransformMap => b.call(MAP_OF_PAIRS, vec![list]),
        Computes::TransformMapEntry => b.call(MERGED_MAPS, vec![list]),
        _ => list,
    }
}

fn lowered<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(true))
}

/// `[index, element]` of each element of a list, `[key, value]` of each entry of a map.
fn entries<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [range]: [CowVal<'b, 'v>; 1] =
        args.try_into().map_err(|a: Vec<_>| ExecutionError::invalid_argument_count(1, a.len()))?;
    let range = range.as_ref();
    let not_iterable =
        || ExecutionError::UnexpectedType { got: range.get_type().name().to_owned(), want: "iterable".to_owned() };
    let mut pairs: Vec<Box<dyn Val + 'v>> = Vec::new();
    match range.get_type().kind() {
        Kind::List => {
            let mut items = range.as_iterable().ok_or_else(not_iterable)?.iter();
            let mut index = 0i64;
            while let Some(item) = items.next() {
                let pair: Vec<Box<dyn Val + 'v>> = vec![Box::new(CelInt::from(index)), item.clone_as_boxed()];
                pairs.push(Box::new(CelList::from(pair)));
                index += 1;
            }
        }
        Kind::Map => {
            let map = range.as_indexer().ok_or_else(not_iterable)?;
            let mut keys = range.as_iterable().ok_or_else(not_iterable)?.iter();
            while let Some(key) = keys.next() {
                let value = map.get(key)?.into_owned();
                let pair: Vec<Box<dyn Val + 'v>> = vec![key.clone_as_boxed(), value];
                pairs.push(Box::new(CelList::from(pair)));
            }
        }
        _ => return Err(not_iterable()),
    }
    Ok(CowVal::owned(CelList::from(pairs)))
}

/// Whether `map` has `key` or the same number as a key of the other integer type (map keys
/// compare as numbers: `{0: 1, 0u: 2}` repeats a key).
fn has_key(map: &HashMap<Key, Value>, key: &Key) -> bool {
    let twin = match key {
        Key::Int(i) => u64::try_from(*i).ok().map(Key::Uint),
        Key::Uint(u) => i64::try_from(*u).ok().map(Key::Int),
        _ => None,
    };
    map.contains_key(key) || twin.is_some_and(|t| map.contains_key(&t))
}

/// Inserts `key` into `map`, refused as cel-go's `cel.@mapInsert` refuses a key already there.
fn insert(map: &mut HashMap<Key, Value>, key: Key, value: Value) -> Result<(), ExecutionError> {
    if has_key(map, &key) {
        return Err(ExecutionError::function_error(MAP_INSERT, format!("insert failed: key {key} already exists")));
    }
    map.insert(key, value);
    Ok(())
}

fn key_of(value: Value) -> Result<Key, ExecutionError> {
    let type_name = value.type_of().to_string();
    value
        .try_into()
        .map_err(|_| ExecutionError::function_error(MAP_INSERT, format!("unsupported key type: {type_name}")))
}

/// The map of a list of `[key, value]` pairs (`transformMap`'s: its keys are the range's
/// indices or keys, so never repeat).
fn map_of_pairs<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [Value::List(pairs)] = values(MAP_OF_PAIRS, args)? else {
        return Err(ExecutionError::no_such_overload(MAP_OF_PAIRS, vec!["dyn".to_owned()]));
    };
    let mut map = HashMap::with_capacity(pairs.len());
    for pair in pairs.iter() {
        let Value::List(kv) = pair else { return Err(ExecutionError::no_such_overload(MAP_INSERT, Vec::new())) };
        let [k, v] = kv.as_slice() else { return Err(ExecutionError::no_such_overload(MAP_INSERT, Vec::new())) };
        insert(&mut map, key_of(k.clone())?, v.clone())?;
    }
    owned(Value::Map(Map { map: Arc::new(map) }))
}

/// One map of the entries of a list of maps, in order (`transformMapEntry`'s): a key twice is
/// cel-go's error.
fn merged_maps<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [Value::List(maps)] = values(MERGED_MAPS, args)? else {
        return Err(ExecutionError::no_such_overload(MERGED_MAPS, vec!["dyn".to_owned()]));
    };
    let mut merged = HashMap::new();
    for m in maps.iter() {
        let Value::Map(m) = m else {
            return Err(ExecutionError::no_such_overload(MAP_INSERT, vec!["map".to_owned(), m.type_of().to_string()]));
        };
        for (k, v) in m.map.iter() {
            insert(&mut merged, k.clone(), v.clone())?;
        }
    }
    owned(Value::Map(Map { map: Arc::new(merged) }))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod check_tests;
