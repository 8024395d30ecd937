//! CEL cost accounting for `x-kubernetes-validations` rules, in Kubernetes' units: the limits,
//! the arithmetic of estimates, what each function costs, and the texts kube refuses with.
//!
//! The cel-rust interpreter neither estimates nor meters cost. Estimates are made here over
//! the parsed program ([`crate::cel_check`] walks it) at definition admission, with sizes
//! taken from the schema (`maxLength`, `maxItems`, `maxProperties`, else what fits in a
//! request). At run time each rule counts what kube's interpreter counts as it evaluates
//! ([`crate::cel_meter`]): short circuits and comprehension steps not taken cost nothing, and
//! a rule stops at the per-call limit; what it cost is then taken from the object's budget.

/// The most one evaluation of one rule may cost (kube's `PerCallLimit`, about 0.1 s).
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;
/// What all rules evaluated for one object may cost together (kube's `RuntimeCELCostBudget`,
/// about one second).
pub(crate) const RUNTIME_COST_BUDGET: u64 = 10_000_000;
/// The largest estimated cost of one rule times how often it can run, at definition admission
/// (kube's `StaticEstimatedCostLimit`).
pub(crate) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// The largest sum of those over a whole schema (kube's `StaticEstimatedCRDCostLimit`).
pub(crate) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// The request size kube assumes when a schema leaves a list, map or string unbounded
/// (`MaxRequestSizeBytes`, 3 MiB): how many elements fit in one request bounds them.
pub(crate) const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// Cost of reading a variable or selecting a field.
pub(crate) const SELECT_AND_IDENT_COST: u64 = 1;
/// Cost of creating a list literal.
pub(crate) const LIST_CREATE_BASE_COST: u64 = 10;
/// Cost of creating a map literal.
pub(crate) const MAP_CREATE_BASE_COST: u64 = 30;
/// Cost of creating a message (struct) literal.
pub(crate) const STRUCT_CREATE_BASE_COST: u64 = 40;
/// Cost per character of walking a string.
pub(crate) const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
/// Cost per character of a regular expression.
pub(crate) const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;
/// The longest regular expression of a named `format` (kube's `MaxNameFormatRegexSize`).
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

/// A range of sizes (characters of a string, elements of a list or map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Size {
    /// Smallest.
    pub(crate) min: u64,
    /// Largest.
    pub(crate) max: u64,
}

/// A range of costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cost {
    /// Least.
    pub(crate) min: u64,
    /// Most.
    pub(crate) max: u64,
}

impl Size {
    /// A size known exactly.
    pub(crate) fn fixed(n: u64) -> Size {
        Size { min: n, max: n }
    }

    /// A size nothing is known about.
    pub(crate) fn unknown() -> Size {
        Size { min: 0, max: u64::MAX }
    }

    pub(crate) fn add(self, o: Size) -> Size {
        Size { min: self.min.saturating_add(o.min), max: self.max.saturating_add(o.max) }
    }

    pub(crate) fn multiply(self, o: Size) -> Size {
        Size { min: self.min.saturating_mul(o.min), max: self.max.saturating_mul(o.max) }
    }

    pub(crate) fn union(self, o: Size) -> Size {
        Size { min: self.min.min(o.min), max: self.max.max(o.max) }
    }

    /// The cost of handling each element at `factor` per element, rounded up.
    pub(crate) fn times(self, factor: f64) -> Cost {
        Cost { min: by_factor(self.min, factor), max: by_factor(self.max, factor) }
    }

    /// The cost of `cost` once per element.
    pub(crate) fn times_cost(self, cost: Cost) -> Cost {
        Cost { min: self.min.saturating_mul(cost.min), max: self.max.saturating_mul(cost.max) }
    }
}

impl Cost {
    /// A cost known exactly.
    pub(crate) fn fixed(n: u64) -> Cost {
        Cost { min: n, max: n }
    }

    pub(crate) fn add(self, o: Cost) -> Cost {
        Cost { min: self.min.saturating_add(o.min), max: self.max.saturating_add(o.max) }
    }

    pub(crate) fn multiply(self, o: Cost) -> Cost {
        Cost { min: self.min.saturating_mul(o.min), max: self.max.saturating_mul(o.max) }
    }

    pub(crate) fn union(self, o: Cost) -> Cost {
        Cost { min: self.min.min(o.min), max: self.max.max(o.max) }
    }

    pub(crate) fn times(self, factor: f64) -> Cost {
        Cost { min: by_factor(self.min, factor), max: by_factor(self.max, factor) }
    }
}

/// `x * factor` rounded up, saturating at `u64::MAX` (kube's `multiplyByCostFactor`).
fn by_factor(x: u64, factor: f64) -> u64 {
    let product = (x as f64 * factor).ceil();
    if product >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        product as u64
    }
}

/// What one operand or the receiver of a call looks like to the cost of the call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Operand {
    /// Its size, as far as known.
    pub size: Size,
    /// Whether it is a string or bytes.
    pub text: bool,
    /// For a list, the size of its elements and whether they are strings or bytes.
    pub elements: Option<(Size, bool)>,
    /// An integer literal's value (`split`'s limit).
    pub int_literal: Option<i64>,
}

/// What a call costs by itself (its operands' own costs come on top) and the size of its
/// result where that is known, by kube's estimator and cel-go's. Functions no rule of
/// Kubernetes' libraries names cost 1, as cel-go charges any function it has no figure for:
/// a library function added later is covered by that default until it gets a figure here.
pub(crate) fn call_cost(function: &str, target: Option<&Operand>, args: &[Operand]) -> (Cost, Option<Size>) {
    let one = (Cost::fixed(1), None);
    let traversal = |s: Size| s.times(STRING_TRAVERSAL_COST_FACTOR);
    match (function, target, args) {
        // Kubernetes' lists library: one walk over the list, a string element costing its
        // length.
        ("isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf", Some(t), _) => match t.elements {
            Some((el, text)) => {
                let per = if text { Cost::fixed(1).add(traversal(el)) } else { Cost::fixed(1) };
                (t.size.times_cost(per), None)
            }
            None => (traversal(t.size), None),
        },
        // The strings extension's `format`: one walk over the format string.
        ("format", Some(t), _) => (traversal(t.size), None),
        ("url", None, [a]) => (traversal(a.size), Some(a.size)),
        ("lowerAscii" | "upperAscii" | "substring" | "trim", Some(t), _) => (traversal(t.size), Some(t.size)),
        ("replace", Some(t), [what, with, ..]) => {
            (t.size.times(2.0 * STRING_TRAVERSAL_COST_FACTOR), Some(replaced(t.size, what.size, with.size)))
        }
        ("split", Some(t), _) => {
            let max = args.get(1).and_then(|a| a.int_literal).map_or(t.size.max, |n| n as u64);
            (t.size.times(2.0 * STRING_TRAVERSAL_COST_FACTOR), Some(Size { min: 0, max }))
        }
        ("join", Some(t), _) => {
            let mut size = match t.elements {
                Some((el, _)) => t.size.multiply(el),
                None => Size::fixed(0),
            };
            if let Some(sep) = args.first() {
                let separators = Size { min: t.size.min.saturating_sub(1), max: t.size.max.saturating_sub(1) };
                size = size.add(sep.size.multiply(separators));
            }
            (traversal(size), Some(size))
        }
        ("find" | "findAll", Some(t), [re, ..]) => {
            let on_string = t.size.add(Size::fixed(1)).times(STRING_TRAVERSAL_COST_FACTOR);
            (on_string.multiply(re.size.times(REGEX_STRING_LENGTH_COST_FACTOR)), Some(Size { min: 0, max: t.size.max }))
        }
        ("matches", Some(t), [re]) | ("matches", None, [t, re]) => {
            let on_string = t.size.add(Size::fixed(1)).times(STRING_TRAVERSAL_COST_FACTOR);
            (on_string.multiply(re.size.times(REGEX_STRING_LENGTH_COST_FACTOR)), None)
        }
        ("contains", Some(t), [sub]) if t.text => (traversal(t.size).multiply(traversal(sub.size)), None),
        ("startsWith" | "endsWith", Some(t), [prefix]) if t.text => (traversal(prefix.size), None),
        ("cidr" | "isIP" | "isCIDR" | "quantity" | "isQuantity" | "semver" | "isSemver", _, [a, ..]) => {
            (traversal(a.size), None)
        }
        ("ip", None, [a]) => (traversal(a.size), None),
        ("ip.isCanonical", None, [a]) => (a.size.times(2.0 * STRING_TRAVERSAL_COST_FACTOR), None),
        ("containsIP" | "containsCIDR", Some(_), [other]) => {
            let address = Size { min: 4, max: 16 };
            let mut cost = address.add(address).times(STRING_TRAVERSAL_COST_FACTOR);
            if function == "containsCIDR" {
                cost = cost.add(traversal(address)).add(Cost::fixed(1));
            }
            if other.text {
                cost = cost.add(traversal(other.size));
            }
            (cost, None)
        }
        ("validate", Some(_), [a]) => {
            (traversal(a.size).times(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_STRING_LENGTH_COST_FACTOR), None)
        }
        _ => one,
    }
}

/// The size of `replace`'s result (kube's estimate).
fn replaced(s: Size, what: Size, with: Size) -> Size {
    let (count_max, kept_max) = if what.min == 0 {
        (s.max.saturating_add(u64::from(s.max < u64::MAX)), s.max)
    } else if with.max <= what.min {
        (0, s.max)
    } else {
        (by_factor(s.max, 1.0 / what.min as f64), 0)
    };
    let (count_min, kept_min) = if what.max == 0 {
        (s.min.saturating_add(u64::from(s.min < u64::MAX)), s.min)
    } else if what.max <= with.min {
        (0, s.min)
    } else {
        (by_factor(s.min, 1.0 / what.max as f64), 0)
    };
    Size { min: count_min, max: count_max }.multiply(with).add(Size { min: kept_min, max: kept_max })
}

/// `<what> exceeds budget by factor of <n>x (...)`, kube's words for a cost over its limit.
pub(crate) fn over_budget(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// kube's runtime texts.
pub(crate) const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// kube's text when a rule's `messageExpression` is beyond the budget.
pub(crate) const MESSAGE_OUT_OF_BUDGET: &str =
    "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run";

/// kube's text when a rule's `messageExpression` would exceed [`PER_CALL_LIMIT`].
pub(crate) fn message_over_call_limit(expression: &str) -> String {
    format!(
        "no further validation rules will be run due to call cost exceeds limit for messageExpression: {expression:?}"
    )
}

/// The failure of a rule whose evaluation would exceed [`PER_CALL_LIMIT`].
pub(crate) fn over_call_limit(rule_or_message: &str) -> String {
    format!(
        "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {rule_or_message}"
    )
}

/// The budget of one object's rules, spent rule by rule.
#[derive(Debug)]
pub(crate) struct RuntimeBudget {
    remaining: u64,
    /// Set once a rule failed for cost: no rule runs after it.
    pub(crate) exhausted: bool,
}

impl Default for RuntimeBudget {
    fn default() -> Self {
        RuntimeBudget { remaining: RUNTIME_COST_BUDGET, exhausted: false }
    }
}

/// An evaluation cost more than what was left of the budget.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OverBudget;

impl RuntimeBudget {
    /// Takes what one evaluation cost from the budget; past what is left, nothing is taken
    /// and the budget is closed.
    pub(crate) fn spend(&mut self, cost: u64) -> Result<(), OverBudget> {
        if cost > self.remaining {
            self.exhausted = true;
            return Err(OverBudget);
        }
        self.remaining -= cost;
        Ok(())
    }

    /// Nothing is left: kube runs no further node's rules.
    pub(crate) fn is_spent(&self) -> bool {
        self.remaining == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_budget_reads_as_kube_words_it() {
        assert!(over_budget("estimated rule cost", 10_485_760, 10_000_000)
            .starts_with("estimated rule cost exceeds budget by factor of 1.048576x (try simplifying"));
        assert!(over_budget("estimated rule cost", 47_185_910, 10_000_000).contains("by factor of 4.7x"));
        assert!(over_budget("estimated rule cost", u64::MAX, 10_000_000).contains("by factor of more than 100x"));
    }

    #[test]
    fn budget_refuses_what_is_not_left() {
        let mut b = RuntimeBudget::default();
        for _ in 0..10 {
            assert_eq!(b.spend(PER_CALL_LIMIT), Ok(()));
        }
        assert!(b.is_spent() && !b.exhausted);
        assert_eq!(b.spend(0), Ok(()));
        assert_eq!(b.spend(1), Err(OverBudget));
        assert!(b.exhausted);
    }
}
