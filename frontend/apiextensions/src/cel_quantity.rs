//! Kubernetes' CEL quantity library for `x-kubernetes-validations` rules: `quantity("1Gi")`,
//! `isQuantity(s)`, and on a quantity `sign()`, `isInteger()`, `asInteger()`,
//! `asApproximateFloat()`, `add(q|int)`, `sub(q|int)`, `compareTo(q)`, `isGreaterThan(q)`,
//! `isLessThan(q)`; two quantities are `==` when they are the same amount (`1` and `1000m`).
//!
//! A quantity is held exactly as `mantissa * 10^exponent` in 128 bits. Kube's quantities are
//! arbitrary precision; an amount that does not fit (beyond about 10^38 significant digits'
//! worth, far past anything a resource field holds) is refused with an error naming the
//! limit rather than rounded silently.
//!
//! The comparisons are overloads on the environment for the quantity type ([`extension`]), as
//! the semver library compares its versions under the same names; the rest are context
//! functions ([`register`]).

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::Type;
use cel::common::value::CowVal;
use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{ExecutionError, FunctionContext};

use crate::cel_overload::{owned, values};

/// Kube's text for a string that is not shaped like a quantity.
pub(crate) const ERR_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// Kube's text for a number followed by an unknown suffix.
pub(crate) const ERR_SUFFIX: &str = "unable to parse quantity's suffix";
/// The text for an amount past what 128 bits hold exactly.
pub(crate) const ERR_RANGE: &str = "quantity out of the supported range";
/// Kube's text for `asInteger()` of a fraction or an amount past int64.
pub(crate) const ERR_NOT_INTEGER: &str = "cannot convert value to integer";

/// An exact decimal amount, normalised (no trailing zeros in the mantissa; zero has exponent
/// 0) so that equal amounts are equal values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantity {
    mantissa: i128,
    exponent: i32,
}

const QUANTITY_TYPE_NAME: &str = "kubernetes.Quantity";

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        QUANTITY_TYPE_NAME
    }
}

/// Exponents past this are refused: 10^60 is beyond any 128-bit mantissa anyway.
const MAX_EXPONENT: i32 = 60;

impl Quantity {
    fn new(mantissa: i128, exponent: i32) -> Result<Quantity, &'static str> {
        let (mut m, mut e) = (mantissa, exponent);
        if m == 0 {
            return Ok(Quantity { mantissa: 0, exponent: 0 });
        }
        while m % 10 == 0 {
            m /= 10;
            e = e.checked_add(1).ok_or(ERR_RANGE)?;
        }
        if e.unsigned_abs() > MAX_EXPONENT.unsigned_abs() {
            return Err(ERR_RANGE);
        }
        Ok(Quantity { mantissa: m, exponent: e })
    }

    /// Parses kube's quantity syntax: a signed decimal number, then a binary suffix (`Ki` ..
    /// `Ei`), a decimal suffix (`n u m k M G T P E`), or a decimal exponent (`e3`, `E-2`).
    pub(crate) fn parse(s: &str) -> Result<Quantity, &'static str> {
        let bytes = s.as_bytes();
        let mut pos = 0;
        let negative = match bytes.first() {
            Some(b'-') => {
                pos = 1;
                true
            }
            Some(b'+') => {
                pos = 1;
                false
            }
            _ => false,
        };
        let number_end = pos + bytes[pos..].iter().take_while(|b| b.is_ascii_digit() || **b == b'.').count();
        let number = &s[pos..number_end];
        let suffix = &s[number_end..];
        if number.is_empty() || !shaped_like_suffix(suffix) {
            return Err(ERR_FORMAT);
        }
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if fraction.contains('.') {
            return Err(ERR_FORMAT);
        }
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        let mut mantissa: i128 = 0;
        for d in digits.bytes() {
            mantissa = mantissa.checked_mul(10).and_then(|m| m.checked_add(i128::from(d - b'0'))).ok_or(ERR_RANGE)?;
        }
        let mut exponent = -i32::try_from(fraction.len()).map_err(|_| ERR_RANGE)?;
        let (binary, decimal) = suffix_scale(suffix)?;
        mantissa = mantissa.checked_mul(1i128 << binary).ok_or(ERR_RANGE)?;
        exponent = exponent.checked_add(decimal).ok_or(ERR_RANGE)?;
        if negative {
            mantissa = -mantissa;
        }
        Quantity::new(mantissa, exponent)
    }

    pub(crate) fn sign(&self) -> i64 {
        self.mantissa.signum() as i64
    }

    /// The amount as an int64, when it is a whole number in range.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        if self.exponent < 0 {
            return None;
        }
        let scale = 10i128.checked_pow(self.exponent as u32)?;
        i64::try_from(self.mantissa.checked_mul(scale)?).ok()
    }

    pub(crate) fn as_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent)
    }

    /// Both mantissas at the smaller exponent, or `None` when that does not fit.
    fn aligned(&self, other: &Quantity) -> Option<(i128, i128, i32)> {
        let e = self.exponent.min(other.exponent);
        let lift = |q: &Quantity| q.mantissa.checked_mul(10i128.checked_pow((q.exponent - e) as u32)?);
        Some((lift(self)?, lift(other)?, e))
    }

    pub(crate) fn add(&self, other: &Quantity) -> Result<Quantity, &'static str> {
        let (a, b, e) = self.aligned(other).ok_or(ERR_RANGE)?;
        Quantity::new(a.checked_add(b).ok_or(ERR_RANGE)?, e)
    }

    pub(crate) fn negate(&self) -> Quantity {
        Quantity { mantissa: -self.mantissa, exponent: self.exponent }
    }

    pub(crate) fn compare(&self, other: &Quantity) -> Ordering {
        match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            // Exponents so far apart that aligning overflows: the signs, then the magnitudes
            // as floats, decide (they differ by many orders of magnitude).
            None => self.sign().cmp(&other.sign()).then(self.as_f64().total_cmp(&other.as_f64())),
        }
    }
}

/// Whether `suffix` matches kube's `[eEinumkKMGTP]*[-+]?[0-9]*`.
fn shaped_like_suffix(suffix: &str) -> bool {
    let letters = suffix.bytes().take_while(|b| b"eEinumkKMGTP".contains(b)).count();
    let rest = &suffix.as_bytes()[letters..];
    let rest = rest.strip_prefix(b"-").or_else(|| rest.strip_prefix(b"+")).unwrap_or(rest);
    rest.iter().all(u8::is_ascii_digit)
}

/// A suffix as (power of two, power of ten).
fn suffix_scale(suffix: &str) -> Result<(u32, i32), &'static str> {
    let scale = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        _ => {
            let exp = suffix.strip_prefix('e').or_else(|| suffix.strip_prefix('E')).ok_or(ERR_SUFFIX)?;
            let digits = exp.strip_prefix(['-', '+']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ERR_SUFFIX);
            }
            (0, exp.parse::<i32>().map_err(|_| ERR_RANGE)?)
        }
    };
    Ok(scale)
}

fn this(ftx: &FunctionContext<'_, '_>, v: &Value) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Quantity>().copied().ok_or_else(|| ftx.error("no such overload")),
        _ => Err(ftx.error("no such overload")),
    }
}

fn operand(ftx: &FunctionContext<'_, '_>, v: &Value) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Int(i) => Quantity::new(i128::from(*i), 0).map_err(|e| ftx.error(e)),
        other => this(ftx, other),
    }
}

fn wrap(q: Quantity) -> Value {
    Value::Opaque(Arc::new(q))
}

/// The order of two quantities, for the comparison overloads.
fn ordering(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Ordering, ExecutionError> {
    let [q, other] = values(function, args)?;
    let quantity = |v: &Value| match v {
        Value::Opaque(o) => o.downcast_ref::<Quantity>().copied(),
        _ => None,
    };
    match (quantity(&q), quantity(&other)) {
        (Some(q), Some(other)) => Ok(q.compare(&other)),
        _ => Err(ExecutionError::function_error(function, "no such overload")),
    }
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

/// Declares the comparisons on `env`, as overloads for the quantity type: other libraries
/// (semver) compare their own values under the same names.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let quantity = || Type::new_opaque_type(QUANTITY_TYPE_NAME);
    env.add_type(quantity())?;
    env.add_member_overload("compareTo", "quantity_compare_to", quantity(), vec![quantity()], compare_to)?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        quantity(),
        vec![quantity()],
        is_greater_than,
    )?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", quantity(), vec![quantity()], is_less_than)?;
    Ok(())
}

/// Registers the library's other functions on `context`.
pub(crate) fn register(context: &mut cel::Context<'static, 'static>) -> Result<(), String> {
    let e = |e: cel::DeclarationError| e.to_string();
    context
        .add_function("quantity", |ftx: &FunctionContext<'_, '_>, s: Arc<String>| -> Result<Value, ExecutionError> {
            Quantity::parse(&s).map(wrap).map_err(|e| ftx.error(e))
        })
        .map_err(e)?;
    context.add_function("isQuantity", |s: Arc<String>| Quantity::parse(&s).is_ok()).map_err(e)?;
    context
        .add_function("sign", |ftx: &FunctionContext<'_, '_>, This(q): This<Value>| -> Result<i64, ExecutionError> {
            Ok(this(ftx, &q)?.sign())
        })
        .map_err(e)?;
    context
        .add_function(
            "isInteger",
            |ftx: &FunctionContext<'_, '_>, This(q): This<Value>| -> Result<bool, ExecutionError> {
                Ok(this(ftx, &q)?.as_i64().is_some())
            },
        )
        .map_err(e)?;
    context
        .add_function(
            "asInteger",
            |ftx: &FunctionContext<'_, '_>, This(q): This<Value>| -> Result<i64, ExecutionError> {
                this(ftx, &q)?.as_i64().ok_or_else(|| ftx.error(ERR_NOT_INTEGER))
            },
        )
        .map_err(e)?;
    context
        .add_function(
            "asApproximateFloat",
            |ftx: &FunctionContext<'_, '_>, This(q): This<Value>| -> Result<f64, ExecutionError> {
                Ok(this(ftx, &q)?.as_f64())
            },
        )
        .map_err(e)?;
    context
        .add_function(
            "add",
            |ftx: &FunctionContext<'_, '_>, This(q): This<Value>, other: Value| -> Result<Value, ExecutionError> {
                this(ftx, &q)?.add(&operand(ftx, &other)?).map(wrap).map_err(|e| ftx.error(e))
            },
        )
        .map_err(e)?;
    context
        .add_function(
            "sub",
            |ftx: &FunctionContext<'_, '_>, This(q): This<Value>, other: Value| -> Result<Value, ExecutionError> {
                this(ftx, &q)?.add(&operand(ftx, &other)?.negate()).map(wrap).map_err(|e| ftx.error(e))
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
    fn parses_kube_quantity_syntax() {
        let q = |s| Quantity::parse(s).expect("a quantity");
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1.5"), q("1500m"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("-2E-3"), q("-2m"));
        assert_eq!(q("+0.000"), q("0"));
        assert_eq!(q(".5"), q("500m"));
        assert_eq!(Quantity::parse("abc"), Err(ERR_FORMAT));
        assert_eq!(Quantity::parse(""), Err(ERR_FORMAT));
        assert_eq!(Quantity::parse("1.2.3"), Err(ERR_FORMAT));
        assert_eq!(Quantity::parse("1Gb"), Err(ERR_FORMAT));
        assert_eq!(Quantity::parse("1iK"), Err(ERR_SUFFIX));
        assert_eq!(Quantity::parse("1e"), Err(ERR_SUFFIX));
        assert_eq!(Quantity::parse("1e400"), Err(ERR_RANGE));
        // Trailing zeros moved into an exponent already at its limit: refused, not overflowed.
        assert_eq!(Quantity::parse("10e2147483647"), Err(ERR_RANGE));
        assert_eq!(Quantity::parse("1e-2147483648"), Err(ERR_RANGE));
    }

    #[test]
    fn functions_behave_as_kube_documents() {
        let t = |expr: &str| assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        t("isQuantity('200M')");
        t("!isQuantity('20 0M')");
        t("quantity('1') == quantity('1000m')");
        t("quantity('1.5G').isGreaterThan(quantity('1Gi'))");
        t("quantity('200m').isLessThan(quantity('1'))");
        t("quantity('200M').compareTo(quantity('0.2G')) == 0");
        t("quantity('50k').compareTo(quantity('100k')) == -1");
        t("quantity('50k').add(quantity('20k')) == quantity('70k')");
        t("quantity('50k').add(20) == quantity('50020')");
        t("quantity('50k').sub(quantity('20k')) == quantity('30k')");
        t("quantity('50k').sub(20) == quantity('49980')");
        t("quantity('-1Mi').sign() == -1 && quantity('0').sign() == 0 && quantity('3m').sign() == 1");
        t("quantity('50k').isInteger() && !quantity('9999999999999999999999999999999999999').isInteger()");
        t("!quantity('50m').isInteger()");
        t("quantity('50k').asInteger() == 50000");
        t("quantity('1.5k').asApproximateFloat() == 1500.0");
        assert_eq!(eval("quantity('50m').asInteger()"), Err(ERR_NOT_INTEGER.to_string()));
        assert_eq!(eval("quantity('5 0')"), Err(ERR_FORMAT.to_string()));
    }
}
