//! CEL's sets extension for `x-kubernetes-validations` rules (kube's CRD environment has it
//! since 1.29): `sets.contains(a, b)` (every element of `b` is in `a`), `sets.equivalent(a, b)`
//! (each contains the other; duplicates and order do not matter) and `sets.intersects(a, b)`
//! (an element in both). Elements compare with CEL's `==` (`1`, `1u` and `1.0` are one).

use cel::common::types::LIST_TYPE;
use cel::common::value::CowVal;
use cel::{ExecutionError, Value};

use crate::cel_overload::{owned, values};

fn lists(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<[std::sync::Arc<Vec<Value>>; 2], ExecutionError> {
    match values(function, args)? {
        [Value::List(a), Value::List(b)] => Ok([a, b]),
        _ => Err(ExecutionError::function_error(function, "no such overload")),
    }
}

fn all_in(items: &[Value], set: &[Value]) -> bool {
    items.iter().all(|x| set.contains(x))
}

fn contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = lists("sets.contains", args)?;
    owned(Value::Bool(all_in(&b, &a)))
}

fn equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = lists("sets.equivalent", args)?;
    owned(Value::Bool(all_in(&a, &b) && all_in(&b, &a)))
}

fn intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = lists("sets.intersects", args)?;
    owned(Value::Bool(a.iter().any(|x| b.contains(x))))
}

/// Declares the extension's overloads on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_overload("sets.contains", "list_sets_contains_list", vec![LIST_TYPE, LIST_TYPE], contains)?;
    env.add_overload("sets.equivalent", "list_sets_equivalent_list", vec![LIST_TYPE, LIST_TYPE], equivalent)?;
    env.add_overload("sets.intersects", "list_sets_intersects_list", vec![LIST_TYPE, LIST_TYPE], intersects)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str) -> Result<Value, String> {
        crate::cel_error::eval_in(extension, |_| Ok(()), expr)
    }

    #[test]
    fn functions_behave_as_cel_documents() {
        let t = |expr: &str| assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        t("sets.contains([], []) && sets.contains([1], []) && !sets.contains([], [1])");
        t("sets.contains([1, 2, 3, 4], [2, 3]) && sets.contains([1, 2, 3], [3, 2, 1])");
        t("sets.contains([1, 2], [2, 2]) && !sets.contains([1, 2], [3])");
        t("sets.contains([1], [1.0, 1u]) && sets.contains([[1], [2]], [[2]])");
        t("sets.equivalent([], []) && sets.equivalent([1], [1, 1]) && sets.equivalent([1, 2, 3], [3u, 2.0, 1])");
        t("!sets.equivalent([1, 2], [2, 2, 2]) && !sets.equivalent([1], [])");
        t("sets.intersects([1], [1]) && sets.intersects([1, 2], [2, 3]) && sets.intersects([1], [1.0, 2])");
        t("!sets.intersects([], []) && !sets.intersects([1], []) && !sets.intersects([1, 2], [3, 4])");
        t("sets.contains(['a', 'b'], ['b']) && !sets.intersects(['a'], ['A'])");
    }
}
