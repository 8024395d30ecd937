//! What rules may do with durations that the interpreter's standard library leaves out:
//! `int(d)`, a duration's nanoseconds, as CEL's standard library declares it.

use cel::common::types::DURATION_TYPE;
use cel::common::value::CowVal;
use cel::{ExecutionError, Value};

use crate::cel_overload::{owned, values};

fn duration_to_int<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match values::<1>("int", args)? {
        // A duration is within ±290 years, so its nanoseconds fit an int.
        [Value::Duration(d)] => owned(Value::Int(d.num_nanoseconds().unwrap_or(i64::MAX))),
        [other] => Err(ExecutionError::function_error("int", format!("no such overload: int({:?})", other.type_of()))),
    }
}

/// Declares the overloads on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_overload("int", "duration_to_int", vec![DURATION_TYPE], duration_to_int)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_converts_to_its_nanoseconds() {
        let eval = |expr: &str| crate::cel_error::eval_in(extension, |_| Ok(()), expr);
        assert_eq!(eval("int(duration('1.5s'))"), Ok(Value::Int(1_500_000_000)));
        assert_eq!(eval("int(duration('-1h')) == -3600 * 1000000000"), Ok(Value::Bool(true)));
    }
}
