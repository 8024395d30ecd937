//! Kubernetes' CEL regex library for `x-kubernetes-validations` rules: on a string,
//! `find(re)` (the first match, or `''`) and `findAll(re)` / `findAll(re, n)` (the matches,
//! at most `n` when `n` is not negative), with Go's syntax and leftmost-first matching.
//!
//! A pattern Go refuses is the rule's evaluation error, in kube's words: `Illegal regex:
//! error parsing regexp: missing closing ): `(a``. The functions are overloads on the
//! environment, declared for a string receiver as kube declares them. A constant pattern Go
//! refuses is found when the definition is admitted ([`refuse_constant_patterns`]), as kube
//! finds it.

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{ExecutionError, Value};

use crate::cel_overload::{owned, values};

fn compile(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    crate::cel_regex_syntax::compile(pattern)
        .map_err(|e| ExecutionError::function_error(function, format!("Illegal regex: {e}")))
}

fn string(function: &str, v: Value) -> Result<std::sync::Arc<String>, ExecutionError> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(ExecutionError::function_error(function, "no such overload")),
    }
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re] = values("find", args)?;
    let (s, re) = (string("find", s)?, string("find", re)?);
    let found = compile("find", &re)?.find(&s).map_or("", |m| m.as_str()).to_string();
    owned(Value::String(found.into()))
}

/// Go's `FindAllString(s, n)`: every match when `n` is negative, else at most `n`.
fn find_all_limited(s: Value, re: Value, n: i64) -> Result<Value, ExecutionError> {
    let (s, re) = (string("findAll", s)?, string("findAll", re)?);
    let re = compile("findAll", &re)?;
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let found = re.find_iter(&s).take(limit).map(|m| Value::String(m.as_str().to_string().into())).collect();
    Ok(Value::List(std::sync::Arc::new(found)))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re] = values("findAll", args)?;
    owned(find_all_limited(s, re, -1)?)
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re, n] = values("findAll", args)?;
    let Value::Int(n) = n else { return Err(ExecutionError::function_error("findAll", "no such overload")) };
    owned(find_all_limited(s, re, n)?)
}

/// Go's error for the first constant pattern of a `find`, `findAll` or `matches` call in
/// `expr` that Go cannot compile (kube compiles them when it builds the program).
pub(crate) fn constant_pattern_error(expr: &IdedExpr) -> Option<String> {
    if let Expr::Call(call) = &expr.expr {
        // The pattern: the argument of `s.find(p)`, `s.findAll(p)`, `s.matches(p)`, the second
        // of `matches(s, p)`.
        let pattern = match (call.func_name.as_str(), call.target.is_some()) {
            ("find" | "findAll" | "matches", true) => call.args.first(),
            ("matches", false) => call.args.get(1),
            _ => None,
        };
        if let Some(Expr::Literal(LiteralValue::String(pattern))) = pattern.map(|a| &a.expr) {
            if let Err(e) = crate::cel_regex_syntax::compile(pattern.inner()) {
                return Some(e.to_string());
            }
        }
    }
    crate::cel_check::children(expr).into_iter().find_map(constant_pattern_error)
}

/// Declares the library's overloads on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload("find", "string_find_string", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload("findAll", "string_find_all_string", STRING_TYPE, vec![STRING_TYPE], find_all)?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str) -> Result<Value, String> {
        crate::cel_error::eval_in(extension, |_| Ok(()), expr)
    }

    #[test]
    fn functions_behave_as_kube_documents() {
        let t = |expr: &str| assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        t("'abc 123'.find('[0-9]+') == '123'");
        t("'abc 123'.find('xyz') == ''");
        // Go's leftmost-first: an empty match at the start wins.
        t("'abc 123'.find('[0-9]*') == ''");
        t("'123 abc 456'.findAll('[0-9]+') == ['123', '456']");
        t("'123 abc 456'.findAll('[0-9]+', 1) == ['123']");
        t("'123 abc 456'.findAll('[0-9]+', 0) == []");
        t("'123 abc 456'.findAll('[0-9]+', -1) == ['123', '456']");
        t("'123 abc 456'.findAll('xyz') == []");
        // Go skips an empty match right after a match.
        t("'12 a'.findAll('[0-9]*') == ['12', '', '']");
        t("'k8s.io/name'.find('^[a-z0-9.]+/') == 'k8s.io/'");
        assert_eq!(
            eval("'abc'.find('(a')"),
            Err("Illegal regex: error parsing regexp: missing closing ): `(a`".to_string())
        );
        assert_eq!(
            eval("'abc'.findAll('a**', 2)"),
            Err("Illegal regex: error parsing regexp: invalid nested repetition operator: `**`".to_string())
        );
    }

    #[test]
    fn constant_patterns_go_refuses_are_found() {
        let refused =
            |source: &str| constant_pattern_error(cel::Program::compile(source).expect("parses").expression());
        assert_eq!(
            refused("self.all(x, x.name.findAll('(a', 2).size() > 0)").as_deref(),
            Some("error parsing regexp: missing closing ): `(a`")
        );
        assert!(refused("[self.find('a**')]").is_some());
        assert!(refused("self.find('[a-z]+') == '' && self.find(self.pattern) == ''").is_none());
    }
}
