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
mod tests {
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
        assert_eq!(
            eval("[1, 1].transformMapEntry(i, v, {v: i})"),
            Err("insert failed: key 1 already exists".to_string())
        );
        assert_eq!(
            eval("[0, 0u].transformMapEntry(i, v, {v: i})"),
            Err("insert failed: key 0 already exists".to_string())
        );
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
                    let decl =
                        crate::cel_decl::of_schema(&serde_json::json!({"type": "integer"}), false).expect("typed");
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
}

#[cfg(test)]
mod check_tests {
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
}
