//! Kubernetes' CEL lists library for `x-kubernetes-validations` rules, on lists of comparable
//! values (int, uint, double, string, bool, bytes): `isSorted()`, `sum()`, `min()`, `max()`,
//! and on lists of any values `indexOf(x)` and `lastIndexOf(x)`.
//!
//! The strings extension already declares `indexOf` and `lastIndexOf` on strings, so the list
//! forms are overloads on the environment ([`extension`]) beside them, picked by the receiver's
//! type; the rest are context functions ([`register`]).

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::CowVal;
use cel::extractors::This;
use cel::objects::Value;
use cel::{ExecutionError, FunctionContext};

use crate::cel_overload::{owned, values};

/// The order of two elements of one comparable type; an error for anything else.
fn compare(ftx: &FunctionContext<'_, '_>, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    let order = match (a, b) {
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (Value::UInt(a), Value::UInt(b)) => Some(a.cmp(b)),
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        (Value::Bytes(a), Value::Bytes(b)) => Some(a.cmp(b)),
        _ => None,
    };
    order.ok_or_else(|| ftx.error("no such overload"))
}

/// The least (or, with `want` Greater, the greatest) element; kube's error on an empty list.
fn extreme(ftx: &FunctionContext<'_, '_>, list: &[Value], want: Ordering, name: &str) -> Result<Value, ExecutionError> {
    let mut items = list.iter();
    let mut best = items.next().ok_or_else(|| ftx.error(format!("{name} called on empty list")))?;
    for item in items {
        if compare(ftx, item, best)? == want {
            best = item;
        }
    }
    Ok(best.clone())
}

fn sum(ftx: &FunctionContext<'_, '_>, list: &[Value]) -> Result<Value, ExecutionError> {
    let overflow = || ftx.error("integer overflow");
    let mut items = list.iter();
    let Some(first) = items.next() else { return Ok(Value::Int(0)) };
    items.try_fold(first.clone(), |total, item| match (&total, item) {
        (Value::Int(a), Value::Int(b)) => a.checked_add(*b).map(Value::Int).ok_or_else(overflow),
        (Value::UInt(a), Value::UInt(b)) => a.checked_add(*b).map(Value::UInt).ok_or_else(overflow),
        (Value::Float(a), Value::Float(b)) => Ok(Value::Float(a + b)),
        _ => Err(ftx.error("no such overload")),
    })
}

/// The position of the first (or, with `last`, the last) element equal to `item`, or -1.
fn position(list: &[Value], item: &Value, last: bool) -> i64 {
    let found = if last { list.iter().rposition(|v| v == item) } else { list.iter().position(|v| v == item) };
    found.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1)
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, item] = values("indexOf", args)?;
    let Value::List(list) = list else { return Err(ExecutionError::function_error("indexOf", "no such overload")) };
    owned(Value::Int(position(&list, &item, false)))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, item] = values("lastIndexOf", args)?;
    let Value::List(list) = list else { return Err(ExecutionError::function_error("lastIndexOf", "no such overload")) };
    owned(Value::Int(position(&list, &item, true)))
}

/// Declares the list forms of `indexOf` and `lastIndexOf` on `env`, next to the strings
/// extension's.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload("indexOf", "list_a_index_of_int", LIST_TYPE, vec![DYN_TYPE], index_of)?;
    env.add_member_overload("lastIndexOf", "list_a_last_index_of_int", LIST_TYPE, vec![DYN_TYPE], last_index_of)?;
    Ok(())
}

/// Registers the library's functions on `context`.
pub(crate) fn register(context: &mut cel::Context<'static, 'static>) -> Result<(), String> {
    let e = |e: cel::DeclarationError| e.to_string();
    context
        .add_function(
            "isSorted",
            |ftx: &FunctionContext<'_, '_>, This(list): This<Arc<Vec<Value>>>| -> Result<bool, ExecutionError> {
                for pair in list.windows(2) {
                    if compare(ftx, &pair[0], &pair[1])? == Ordering::Greater {
                        return Ok(false);
                    }
                }
                Ok(true)
            },
        )
        .map_err(e)?;
    context
        .add_function(
            "sum",
            |ftx: &FunctionContext<'_, '_>, This(list): This<Arc<Vec<Value>>>| -> Result<Value, ExecutionError> {
                sum(ftx, &list)
            },
        )
        .map_err(e)?;
    context
        .add_function(
            "min",
            |ftx: &FunctionContext<'_, '_>, This(list): This<Arc<Vec<Value>>>| -> Result<Value, ExecutionError> {
                extreme(ftx, &list, Ordering::Less, "min")
            },
        )
        .map_err(e)?;
    context
        .add_function(
            "max",
            |ftx: &FunctionContext<'_, '_>, This(list): This<Arc<Vec<Value>>>| -> Result<Value, ExecutionError> {
                extreme(ftx, &list, Ordering::Greater, "max")
            },
        )
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str) -> Result<Value, String> {
        crate::cel_error::eval_in(extension, register, expr)
    }

    #[test]
    fn functions_behave_as_kube_documents() {
        let t = |expr: &str| assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        t("[1, 2, 3].isSorted() && !['b', 'a'].isSorted() && [].isSorted()");
        t("[1, 2, 3].sum() == 6 && [1.5, 2.0].sum() == 3.5 && [].sum() == 0 && [1u, 2u].sum() == 3u");
        t("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3");
        t("['b', 'c', 'a'].max() == 'c'");
        assert_eq!(eval("[].min()"), Err("min called on empty list".to_string()));
        assert_eq!(eval("[].max()"), Err("max called on empty list".to_string()));
        assert_eq!(eval("[9223372036854775807, 1].sum()"), Err("integer overflow".to_string()));
        assert!(eval("[1, 'a'].isSorted()").is_err());
    }

    #[test]
    fn index_of_dispatches_on_the_receiver() {
        let t = |expr: &str| assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        // Kube's examples.
        t("[1, 2, 2, 3].indexOf(2) == 1");
        t("['a', 'b', 'b', 'c'].lastIndexOf('b') == 2");
        t("[1.0].indexOf(1.1) == -1");
        t("[].indexOf('string') == -1 && [].lastIndexOf(1) == -1");
        t("[[1], [2], [1]].lastIndexOf([1]) == 2 && [{'a': 1}].indexOf({'a': 1}) == 0");
        // Strings keep the strings extension's.
        t("'hello mellow'.indexOf('ello') == 1 && 'hello mellow'.lastIndexOf('ello') == 7");
        t("'hello mellow'.indexOf('ello', 2) == 7");
        assert_eq!(eval("'abc'.indexOf('', -1)"), Err("index out of range: -1".to_string()));
    }
}
