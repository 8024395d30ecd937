//! Typed overloads declared on a CEL environment, written against [`cel::Value`]s.
//!
//! A function whose name another library already declares as an overload (the strings
//! extension's `indexOf`, the standard library's `string`) cannot be added to a context: it has
//! to be one more overload on the environment, picked by the runtime types of the arguments.
//! Such an overload is a plain `fn` over the interpreter's own values; [`values`] and [`owned`]
//! let a library write it over `Value`s instead, as its context functions are.

use cel::common::value::CowVal;
use cel::{ExecutionError, Value};

/// The arguments of an overload of `function` (the receiver first, for a member overload) as
/// `Value`s; an error when there are not `N` or one has no `Value` form.
pub(crate) fn values<const N: usize>(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<[Value; N], ExecutionError> {
    let values = args.into_iter().map(|a| Value::try_from(a.as_ref())).collect::<Result<Vec<Value>, _>>()?;
    let count = values.len();
    values
        .try_into()
        .map_err(|_| ExecutionError::function_error(function, format!("expected {N} arguments, got {count}")))
}

/// `value` as an overload's result.
pub(crate) fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let boxed: Box<dyn cel::common::value::Val> = value.try_into()?;
    Ok(CowVal::Owned(boxed))
}
