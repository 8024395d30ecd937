//! Kubernetes' CEL lists library for `x-kubernetes-validations` rules, on lists of comparable
//! values (int, uint, double, string, bool, bytes): `isSorted()`, `sum()`, `min()`, `max()`.
//! Kube's list `indexOf`/`lastIndexOf` are not here: cel-rust's strings extension holds those
//! names for strings, and its function registry takes one implementation per name.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::Value;
use cel::{ExecutionError, FunctionContext};

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
        crate::cel_error::eval_with(register, expr)
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
}
