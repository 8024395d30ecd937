//! Kubernetes' CEL semver library for `x-kubernetes-validations` rules (in kube's CRD
//! environment since 1.33): `semver(s)`, `semver(s, normalize)`, `isSemver(s)`,
//! `isSemver(s, normalize)`, and on a version `major()`, `minor()`, `patch()`,
//! `compareTo(v)`, `isGreaterThan(v)`, `isLessThan(v)`; two versions are `==` when they have
//! the same precedence (build metadata does not count).
//!
//! Versions are read as kube reads them (semver 2.0.0, with the messages of the Go library kube
//! uses: `No Major.Minor.Patch elements found`); `normalize` first drops a leading `v`, leading
//! zeros and fills in a missing minor or patch. The comparisons share their names with the
//! quantity library's, so all are overloads on the environment, picked by type.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{Type, BOOL_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::cel_ip::go_quote;
use crate::cel_overload::{owned, values};

/// One dot-separated identifier of a pre-release (`alpha`, `1`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum PreRelease {
    Number(u64),
    Text(String),
}

impl PreRelease {
    /// Numbers sort before text; numbers by value, text byte-wise.
    fn cmp(&self, other: &PreRelease) -> Ordering {
        match (self, other) {
            (PreRelease::Number(a), PreRelease::Number(b)) => a.cmp(b),
            (PreRelease::Number(_), PreRelease::Text(_)) => Ordering::Less,
            (PreRelease::Text(_), PreRelease::Number(_)) => Ordering::Greater,
            (PreRelease::Text(a), PreRelease::Text(b)) => a.cmp(b),
        }
    }
}

/// A semantic version (`kubernetes.Semver`).
#[derive(Debug, Clone)]
struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<PreRelease>,
}

const SEMVER_TYPE_NAME: &str = "kubernetes.Semver";

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        SEMVER_TYPE_NAME
    }
}

impl PartialEq for Semver {
    fn eq(&self, other: &Semver) -> bool {
        self.precedence(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

fn alphanumeric(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn digits(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

/// A decimal number as Go's `strconv.ParseUint` reads it, in its words when it refuses.
fn number(s: &str) -> Result<u64, String> {
    if s.is_empty() {
        return Err(format!("strconv.ParseUint: parsing {}: invalid syntax", go_quote(s)));
    }
    s.parse().map_err(|_| format!("strconv.ParseUint: parsing {}: value out of range", go_quote(s)))
}

/// A core number (`major`, `minor`, `patch`): digits, no leading zero.
fn core_number(s: &str, what: &str) -> Result<u64, String> {
    if !digits(s) {
        return Err(format!("Invalid character(s) found in {what} number {}", go_quote(s)));
    }
    if s.len() > 1 && s.starts_with('0') {
        let capitalised = format!("{}{}", what[..1].to_ascii_uppercase(), &what[1..]);
        return Err(format!("{capitalised} number must not contain leading zeroes {}", go_quote(s)));
    }
    number(s)
}

impl Semver {
    /// A version as kube's Go library parses it, in its words when it refuses.
    fn parse(s: &str) -> Result<Semver, String> {
        if s.is_empty() {
            return Err("Version string empty".into());
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        let [major, minor, rest] = parts[..] else { return Err("No Major.Minor.Patch elements found".into()) };
        let major = core_number(major, "major")?;
        let minor = core_number(minor, "minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((rest, build)) => (rest, Some(build)),
            None => (rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((patch, pre)) => (patch, Some(pre)),
            None => (rest, None),
        };
        let patch = core_number(patch, "patch")?;
        let mut version = Semver { major, minor, patch, pre: Vec::new() };
        for id in pre.into_iter().flat_map(|p| p.split('.')) {
            if id.is_empty() {
                return Err("Prerelease is empty".into());
            }
            if digits(id) {
                if id.len() > 1 && id.starts_with('0') {
                    return Err(format!("Numeric PreRelease version must not contain leading zeroes {}", go_quote(id)));
                }
                version.pre.push(PreRelease::Number(number(id)?));
            } else if alphanumeric(id) {
                version.pre.push(PreRelease::Text(id.to_string()));
            } else {
                return Err(format!("Invalid character(s) found in prerelease {}", go_quote(id)));
            }
        }
        for id in build.into_iter().flat_map(|b| b.split('.')) {
            if id.is_empty() {
                return Err("Build meta data is empty".into());
            }
            if !alphanumeric(id) {
                return Err(format!("Invalid character(s) found in build meta data {}", go_quote(id)));
            }
        }
        Ok(version)
    }

    /// Kube's normalised parse: no leading `v`, no leading zeros, missing minor and patch
    /// filled in with `0`.
    fn parse_normalized(s: &str) -> Result<Semver, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s
            .splitn(3, '.')
            .map(|p| {
                if p.len() <= 1 {
                    return p.to_string();
                }
                let trimmed = p.trim_start_matches('0');
                if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    trimmed.to_string()
                } else {
                    format!("0{trimmed}")
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err("short version cannot contain PreRelease/Build meta data".into());
            }
            parts.resize(3, "0".to_string());
        }
        Semver::parse(&parts.join("."))
    }

    /// Semver precedence: the core numbers, then a version without pre-release above one with,
    /// then the pre-release identifiers in turn, a longer list above its own prefix.
    fn precedence(&self, other: &Semver) -> Ordering {
        (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch)).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self
                    .pre
                    .iter()
                    .zip(&other.pre)
                    .map(|(a, b)| a.cmp(b))
                    .find(|o| o.is_ne())
                    .unwrap_or_else(|| self.pre.len().cmp(&other.pre.len())),
            }
        })
    }
}

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn semver_arg(function: &str, v: &Value) -> Result<Semver, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Semver>().cloned().ok_or_else(|| error(function, "no such overload")),
        _ => Err(error(function, "no such overload")),
    }
}

/// The string and optional `normalize` flag of `semver()` or `isSemver()`, parsed.
fn parse_args(function: &str, args: &[Value]) -> Result<Result<Semver, String>, ExecutionError> {
    let (s, normalize) = match args {
        [Value::String(s)] => (s, false),
        [Value::String(s), Value::Bool(normalize)] => (s, *normalize),
        _ => return Err(error(function, "no such overload")),
    };
    Ok(if normalize { Semver::parse_normalized(s) } else { Semver::parse(s) })
}

fn all_values(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Vec<Value>, ExecutionError> {
    match args.len() {
        1 => Ok(values::<1>(function, args)?.to_vec()),
        _ => Ok(values::<2>(function, args)?.to_vec()),
    }
}

fn string_to_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let version = parse_args("semver", &all_values("semver", args)?)?.map_err(|e| error("semver", e))?;
    owned(Value::Opaque(Arc::new(version)))
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(parse_args("isSemver", &all_values("isSemver", args)?)?.is_ok()))
}

/// The order of two versions, for the comparison overloads.
fn ordering(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Ordering, ExecutionError> {
    let [a, b] = values(function, args)?;
    Ok(semver_arg(function, &a)?.precedence(&semver_arg(function, &b)?))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Int(ordering("compareTo", args)? as i64))
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(ordering("isGreaterThan", args)? == Ordering::Greater))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(ordering("isLessThan", args)? == Ordering::Less))
}

/// One core number of a version, as an overload (Go's `int64` of the `uint64`, as kube's).
macro_rules! component {
    ($fn_name:ident, $cel_name:literal, $field:ident) => {
        fn $fn_name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let [v] = values($cel_name, args)?;
            owned(Value::Int(semver_arg($cel_name, &v)?.$field as i64))
        }
    };
}

component!(major, "major", major);
component!(minor, "minor", minor);
component!(patch, "patch", patch);

/// Declares the library's type and overloads on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let semver = || Type::new_opaque_type(SEMVER_TYPE_NAME);
    env.add_type(semver())?;
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], string_to_semver)?;
    env.add_overload("semver", "string_bool_to_semver", vec![STRING_TYPE, BOOL_TYPE], string_to_semver)?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver)?;
    env.add_overload("isSemver", "is_semver_string_bool", vec![STRING_TYPE, BOOL_TYPE], is_semver)?;
    env.add_member_overload("compareTo", "semver_compare_to", semver(), vec![semver()], compare_to)?;
    env.add_member_overload("isGreaterThan", "semver_is_greater_than", semver(), vec![semver()], is_greater_than)?;
    env.add_member_overload("isLessThan", "semver_is_less_than", semver(), vec![semver()], is_less_than)?;
    env.add_member_overload("major", "semver_major", semver(), vec![], major)?;
    env.add_member_overload("minor", "semver_minor", semver(), vec![], minor)?;
    env.add_member_overload("patch", "semver_patch", semver(), vec![], patch)?;
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
        t("isSemver('1.2.3-beta.1+build.1') && !isSemver('') && !isSemver('v1.0.0') && !isSemver(' 1.0.0')");
        t("!isSemver('1. 0.0') && !isSemver('1.0.0 ') && !isSemver('01.01.01') && !isSemver('1') && !isSemver('1.1')");
        t("!isSemver('', true) && !isSemver(' 1.0.0', true) && !isSemver('1. 0.0', true) && !isSemver('1.0.0 ', true)");
        t("isSemver('v1.0.0', true) && isSemver('01.01.01', true) && isSemver('1', true) && isSemver('1.1', true)");
        t("semver('v01.01', true) == semver('1.1.0') && semver('1.2.3') == semver('1.2.3')");
        t("semver('1.2.3') != semver('1.0.0') && semver('1.2.3+a') == semver('1.2.3+b')");
        t("semver('1.0.0').isLessThan(semver('1.2.3')) && !semver('1.0.0').isLessThan(semver('1.0.0'))");
        t("semver('1.2.3').isGreaterThan(semver('1.0.0')) && !semver('1.0.0').isGreaterThan(semver('1.0.0'))");
        t("semver('1.2.3').compareTo(semver('1.2.3')) == 0 && semver('1.0.0').compareTo(semver('1.2.3')) == -1");
        t("semver('1.2.3').compareTo(semver('1.0.0')) == 1");
        t("semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3");
        // Semver precedence: a pre-release sorts below its release; identifiers in turn.
        t("semver('1.0.0-alpha').isLessThan(semver('1.0.0')) && semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))");
        t("semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta')) && semver('1.0.0-beta.2').isLessThan(semver('1.0.0-beta.11'))");
        t("semver('1.0.0-rc.1').isLessThan(semver('1.0.0')) && semver('1.0.0-beta.11').isLessThan(semver('1.0.0-rc.1'))");
        // The comparisons keep working on quantities beside versions.
        let both = |env: &mut cel::Env| -> Result<(), cel::DeclarationError> {
            crate::cel_quantity::extension(env)?;
            extension(env)
        };
        let expr = "quantity('1Gi').isGreaterThan(quantity('1G')) && semver('2.0.0').isGreaterThan(semver('1.9.9'))";
        assert_eq!(crate::cel_error::eval_in(both, crate::cel_quantity::register, expr), Ok(Value::Bool(true)));
    }

    #[test]
    fn refusals_read_as_kube_words_them() {
        let err = |expr: &str| eval(expr).expect_err(expr);
        assert_eq!(err("semver('v1.0')"), "No Major.Minor.Patch elements found");
        assert_eq!(err("semver('')"), "Version string empty");
        assert_eq!(err("semver('a.0.0')"), "Invalid character(s) found in major number \"a\"");
        assert_eq!(err("semver('1.01.0')"), "Minor number must not contain leading zeroes \"01\"");
        assert_eq!(err("semver('1.0.x')"), "Invalid character(s) found in patch number \"x\"");
        assert_eq!(err("semver('1..0')"), "strconv.ParseUint: parsing \"\": invalid syntax");
        assert_eq!(err("semver('1.0.0-')"), "Prerelease is empty");
        assert_eq!(err("semver('1.0.0-01')"), "Numeric PreRelease version must not contain leading zeroes \"01\"");
        assert_eq!(err("semver('1.0.0-a_b')"), "Invalid character(s) found in prerelease \"a_b\"");
        assert_eq!(err("semver('1.0.0+')"), "Build meta data is empty");
        assert_eq!(err("semver('1.0-a', true)"), "short version cannot contain PreRelease/Build meta data");
        assert_eq!(
            err("semver('99999999999999999999.0.0')"),
            "strconv.ParseUint: parsing \"99999999999999999999\": value out of range"
        );
    }
}
