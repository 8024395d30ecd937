//! Runtime cost of a rule, counted as Kubernetes' CEL interpreter counts it while it evaluates
//! (cel-go's cost tracker with kube's library costs), so that a rule stops with kube's error
//! as soon as it passes the per-call limit and a rule that kube lets finish finishes here.
//!
//! The cel-rust interpreter counts nothing, so each rule's expression is rewritten once, when
//! it is compiled, into one that counts as it goes: the parts of it that are evaluated
//! together are charged together by a call of a metering function around them, placed where
//! the evaluation may branch (the right side of `&&` and `||`, the branches of `?:`, each step
//! and condition of a comprehension). A branch that is not taken, or a step not made, is not
//! charged, as in kube. A call whose cost depends on its operands (string comparison, `in`,
//! `matches`, `contains`, ...) has its operands' sizes recorded as they are evaluated and is
//! charged from them once it returns. Costs, per node, are cel-go's: 1 for a variable and
//! each field or index selected, 10 for a list literal, 30 for a map, the call's own cost for
//! a function (kube's `CallCost`, cel-go's defaults), nothing for a constant, `&&`, `||` and
//! `?:`; the per-call limit is checked at every charge.
//!
//! A two-variable comprehension ([`crate::cel_comprehensions`]) runs as its lowered form, a
//! one-variable comprehension over `[key, value]` pairs binding the two variables, while kube
//! runs cel-go's form of it. The lowered form's nodes that stand for one of cel-go's carry its
//! id: each is charged what cel-go's node of that id costs (the accumulator's reads, the
//! condition and step of each iteration, the filter, `cel.@mapInsert` at 1, the key variable
//! it inserts at 1), and the lowered form's own nodes (the list of pairs, the binds, the lists
//! maps are built from) nothing.
//!
//! What stays apart from kube: a subexpression that fails with an error (a missing key, say)
//! is not charged for the parts of it that had run, where cel-go charges them; such a rule
//! fails anyway, and what it is charged only matters to the budget of the rules after it.
//! `or` and `orValue` of optionals evaluate their argument in any case here (cel-rust has no
//! short circuit for them), and it is charged.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use cel::common::ast::{operators, CallExpr, EntryExpr, Expr, LiteralValue};
use cel::common::types::{Kind, Type, DYN_TYPE};
use cel::common::value::{BuiltinRef, CowVal, StaticVal, Val};
use cel::{ExecutionError, IdedExpr};

use crate::cel_comprehensions::TwoVar;
use crate::cel_cost::{
    LIST_CREATE_BASE_COST, MAP_CREATE_BASE_COST, PER_CALL_LIMIT, REGEX_STRING_LENGTH_COST_FACTOR,
    SELECT_AND_IDENT_COST, STRING_TRAVERSAL_COST_FACTOR, STRUCT_CREATE_BASE_COST,
};

/// The variable the meter of an evaluation is bound to; `@` keeps rules from naming it.
pub(crate) const METER_VARIABLE: &str = "@meter";
/// Charges a constant amount after its operand is evaluated.
const CHARGE: &str = "@cost.charge";
/// Records its operand's size in a slot of the meter.
const RECORD: &str = "@cost.record";
/// Charges a call from the sizes recorded for its operands, or from its result.
const CALL: &str = "@cost.call";

/// The error a metering function stops an evaluation with once the limit is passed (cel-go's
/// text). The rule's verdict comes from the meter, not from this error, which `||` or a
/// comprehension could absorb.
const LIMIT_TEXT: &str = "operation cancelled: actual cost limit exceeded";

/// A rule's expression rewritten to count its cost.
#[derive(Debug)]
pub(crate) struct Metered {
    expr: IdedExpr,
    /// The cost of what is evaluated whenever the whole expression is, charged after it.
    root_cost: u64,
    /// The operand sizes known when compiling (literals), per slot; 0 for the others.
    slots: Vec<u64>,
}

/// The count of one evaluation, bound to the variable [`METER_VARIABLE`] of its context.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    cost: AtomicU64,
    exceeded: AtomicBool,
    /// Operand sizes of calls charged by size, tagged with their kind ([`tagged`]).
    slots: Vec<AtomicU64>,
}

/// What one evaluation came to.
#[derive(Debug)]
pub(crate) struct Counted {
    pub(crate) result: Result<cel::Value, String>,
    pub(crate) cost: u64,
    /// It was stopped for passing [`PER_CALL_LIMIT`].
    pub(crate) over_limit: bool,
}

static METER_TYPE: Type = Type::simple_type(Kind::Opaque, "@meter");

/// The meter as the interpreter sees it: a value shared with the code that runs the rule.
#[derive(Debug, Clone)]
pub(crate) struct MeterVal(pub(crate) Arc<Meter>);

impl Val for MeterVal {
    fn get_type(&self) -> &Type {
        &METER_TYPE
    }

    fn cel_type() -> &'static Type {
        &METER_TYPE
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl StaticVal for MeterVal {}

impl Meter {
    /// A meter with room for the slots of any of `programs`.
    pub(crate) fn for_programs<'a>(programs: impl Iterator<Item = &'a Metered>) -> Meter {
        let slots = programs.map(|m| m.slots.len()).max().unwrap_or(0);
        Meter { slots: (0..slots).map(|_| AtomicU64::new(0)).collect(), ..Meter::default() }
    }

    fn add(&self, n: u64) -> Result<(), ExecutionError> {
        let total = self.cost.load(Ordering::Relaxed).saturating_add(n);
        self.cost.store(total, Ordering::Relaxed);
        if total > PER_CALL_LIMIT {
            self.exceeded.store(true, Ordering::Relaxed);
            return Err(ExecutionError::function_error(CHARGE, LIMIT_TEXT));
        }
        Ok(())
    }

    fn slot(&self, i: usize) -> u64 {
        self.slots.get(i).map_or(0, |s| s.load(Ordering::Relaxed))
    }

    /// Evaluates `program` in `context`, whose [`METER_VARIABLE`] is bound to this meter.
    pub(crate) fn evaluate(&self, program: &Metered, context: &cel::Context<'_, '_>) -> Counted {
        self.cost.store(0, Ordering::Relaxed);
        self.exceeded.store(false, Ordering::Relaxed);
        for (slot, known) in self.slots.iter().zip(&program.slots) {
            slot.store(*known, Ordering::Relaxed);
        }
        let result = cel::Value::resolve(&program.expr, context);
        let result = match result {
            Ok(v) => self.add(program.root_cost).map(|()| v),
            Err(e) => Err(e),
        };
        let over_limit = self.exceeded.load(Ordering::Relaxed);
        Counted {
            result: result.map_err(|e| crate::cel_error::text(&e)),
            cost: self.cost.load(Ordering::Relaxed),
            over_limit,
        }
    }
}

/// Declares the metering functions on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(CHARGE, "cost_charge", vec![DYN_TYPE, DYN_TYPE, DYN_TYPE], charge)?;
    env.add_overload(RECORD, "cost_record", vec![DYN_TYPE, DYN_TYPE, DYN_TYPE], record)?;
    env.add_overload(CALL, "cost_call", vec![DYN_TYPE, DYN_TYPE, DYN_TYPE], call)?;
    Ok(())
}

/// Runs `f` with the meter and the code of a metering call, and returns its value.
fn metering<'b, 'v>(
    function: &str,
    mut args: Vec<CowVal<'b, 'v>>,
    f: impl FnOnce(&Meter, u64, &dyn Val) -> Result<(), ExecutionError>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let misused = || ExecutionError::function_error(function, "metering call out of place");
    let value = args.pop().ok_or_else(misused)?;
    let [meter, code] = args.as_slice() else { return Err(misused()) };
    let meter = meter.as_ref().as_any().and_then(|m| m.downcast_ref::<MeterVal>()).ok_or_else(misused)?;
    let code = code.downcast_ref::<cel::common::types::CelInt>().ok_or_else(misused)?;
    f(&meter.0, *code.inner() as u64, value.as_ref())?;
    Ok(value)
}

fn charge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    metering(CHARGE, args, |meter, n, _| meter.add(n))
}

fn record<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    metering(RECORD, args, |meter, code, value| {
        let slot = (code & 0xffff_ffff) as usize;
        let measured = match Mode::from(code >> 32) {
            Mode::Size => tagged(value),
            Mode::Traversal => traversal_cost(value),
            Mode::SelfCompare => self_compare_cost(value),
            Mode::Int => value.downcast_ref::<cel::common::types::CelInt>().map_or(1, |i| (*i.inner()).max(0) as u64),
        };
        if let Some(s) = meter.slots.get(slot) {
            s.store(measured, Ordering::Relaxed);
        }
        Ok(())
    })
}

fn call<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    metering(CALL, args, |meter, code, value| {
        let kind = SizedCall::from((code & 0xff) as u8);
        let base = (code >> 8) as usize;
        meter.add(kind.cost(|i| meter.slot(base + i), || size_of(value)))
    })
}

/// What a record call keeps of its operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Its size and kind ([`tagged`]).
    Size,
    /// kube's `traversalCost` of it.
    Traversal,
    /// The cost of comparing a list's elements with each other (cel-go's sort and distinct).
    SelfCompare,
    /// Its value, an integer.
    Int,
}

impl From<u64> for Mode {
    fn from(n: u64) -> Mode {
        match n {
            1 => Mode::Traversal,
            2 => Mode::SelfCompare,
            3 => Mode::Int,
            _ => Mode::Size,
        }
    }
}

impl Mode {
    fn code(self) -> u64 {
        match self {
            Mode::Size => 0,
            Mode::Traversal => 1,
            Mode::SelfCompare => 2,
            Mode::Int => 3,
        }
    }
}

const TAG_SHIFT: u32 = 60;
const SIZE_MASK: u64 = (1 << TAG_SHIFT) - 1;
const TAG_STRING: u64 = 1;
const TAG_BYTES: u64 = 2;
const TAG_LIST: u64 = 3;

fn tag(slot: u64) -> u64 {
    slot >> TAG_SHIFT
}

fn size(slot: u64) -> u64 {
    slot & SIZE_MASK
}

/// cel-go's `actualSize`: the size of a string (code points), bytes, list or map, the size of
/// an optional's value, 1 for anything else.
fn size_of(v: &dyn Val) -> u64 {
    match v.as_builtin() {
        BuiltinRef::String(s) => s.inner().chars().count() as u64,
        BuiltinRef::Bytes(b) => b.inner().len() as u64,
        BuiltinRef::Optional(o) => o.inner().map_or(1, size_of),
        _ => v.as_sizer().map_or(1, |s| (*s.size().inner()).max(0) as u64),
    }
}

/// The size of `v` with its kind in the top bits: string, bytes, list or other.
fn tagged(v: &dyn Val) -> u64 {
    let t = match v.get_type().kind() {
        Kind::String => TAG_STRING,
        Kind::Bytes => TAG_BYTES,
        Kind::List => TAG_LIST,
        _ => 0,
    };
    (t << TAG_SHIFT) | size_of(v).min(SIZE_MASK)
}

/// kube's `traversalCost`: a tenth of the length of a string or bytes (rounded down), the sum
/// over a list's elements or a map's keys and values, 1 for anything else.
fn traversal_cost(v: &dyn Val) -> u64 {
    match v.as_builtin() {
        BuiltinRef::String(s) => (s.inner().len() as f64 * STRING_TRAVERSAL_COST_FACTOR) as u64,
        BuiltinRef::Bytes(b) => (b.inner().len() as f64 * STRING_TRAVERSAL_COST_FACTOR) as u64,
        _ => match cel::Value::try_from(v) {
            Ok(cel::Value::String(s)) => (s.len() as f64 * STRING_TRAVERSAL_COST_FACTOR) as u64,
            Ok(cel::Value::Bytes(b)) => (b.len() as f64 * STRING_TRAVERSAL_COST_FACTOR) as u64,
            Ok(cel::Value::List(l)) => l.iter().map(value_traversal_cost).sum(),
            Ok(cel::Value::Map(m)) => m.map.iter().map(|(k, v)| key_traversal_cost(k) + value_traversal_cost(v)).sum(),
            _ => 1,
        },
    }
}

fn value_traversal_cost(v: &cel::Value) -> u64 {
    match v {
        cel::Value::String(s) => (s.len() as f64 * STRING_TRAVERSAL_COST_FACTOR) as u64,
        cel::Value::Bytes(b) => (b.len() as f64 * STRING_TRAVERSAL_COST_FACTOR) as u64,
        cel::Value::List(l) => l.iter().map(value_traversal_cost).sum(),
        cel::Value::Map(m) => m.map.iter().map(|(k, v)| key_traversal_cost(k) + value_traversal_cost(v)).sum(),
        _ => 1,
    }
}

fn key_traversal_cost(k: &cel::objects::Key) -> u64 {
    match k {
        cel::objects::Key::String(s) => (s.len() as f64 * STRING_TRAVERSAL_COST_FACTOR) as u64,
        _ => 1,
    }
}

/// cel-go's cost of sorting a list or dropping its duplicates: every element compared with
/// every other, at twice the size squared (a little more for strings), plus a call and a list.
fn self_compare_cost(v: &dyn Val) -> u64 {
    let n = size_of(v);
    let mut factor = 2.0;
    if let Ok(cel::Value::List(l)) = cel::Value::try_from(v) {
        if matches!(l.first(), Some(cel::Value::String(_) | cel::Value::Bytes(_))) {
            factor += STRING_TRAVERSAL_COST_FACTOR;
        }
    }
    (n.saturating_mul(n) as f64 * factor) as u64
}

fn ceil_factor(n: u64, factor: f64) -> u64 {
    (n as f64 * factor).ceil() as u64
}

/// A call whose cost depends on its operands or result, by formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SizedCall {
    /// A tenth of the first operand's size, rounded up (`startsWith`, `lowerAscii`, `url`,
    /// `quantity`, ...).
    Traverse,
    /// Twice that (`replace`, `split`, `ip.isCanonical`).
    TraverseTwice,
    /// `string(bytes)`: a traversal; any other conversion to string costs 1.
    ToString,
    /// `bytes(string)`: a traversal; else 1.
    ToBytes,
    /// `join`: twice a traversal of the result.
    Join,
    /// `matches`, `find`, `findAll`: the string's traversal (plus one) times a quarter of the
    /// pattern's length.
    Regex,
    /// String `contains`: the product of both traversals.
    Contains,
    /// `==`, `!=`: a traversal of the smaller operand.
    Equals,
    /// `<`, `<=`, `>`, `>=`: a traversal of the smaller of two strings or bytes; else 1.
    Order,
    /// `+`: a traversal of both strings or bytes; else 1.
    Add,
    /// `in`: the size of a list; else 1.
    In,
    /// kube's lists functions (`isSorted`, `sum`, `indexOf`, ...): the recorded traversal.
    Recorded,
    /// The sets extension, at the product of both sizes (times 2 for `equivalent`), plus 1.
    Sets,
    SetsTwice,
    /// cel-go's lists that build a list as long as their result (`slice`, `reverse`,
    /// `lists.range`): that size, plus a call and a list.
    ListOut,
    /// `sort`, `distinct`: the recorded comparisons, plus a call and a list.
    SelfCompare,
    /// `flatten()`: the list's size, plus a call and a list.
    Flatten,
    /// `flatten(depth)`: the list's size times the depth, plus a call and a list.
    FlattenBy,
    /// `containsIP`: the CIDR compared, plus parsing a string.
    ContainsIp,
    /// `containsCIDR`: that, plus masking.
    ContainsCidr,
    /// A format's `validate`: the string's traversal (plus one) times a long pattern.
    Validate,
}

const ALL_SIZED: [SizedCall; 21] = [
    SizedCall::Traverse,
    SizedCall::TraverseTwice,
    SizedCall::ToString,
    SizedCall::ToBytes,
    SizedCall::Join,
    SizedCall::Regex,
    SizedCall::Contains,
    SizedCall::Equals,
    SizedCall::Order,
    SizedCall::Add,
    SizedCall::In,
    SizedCall::Recorded,
    SizedCall::Sets,
    SizedCall::SetsTwice,
    SizedCall::ListOut,
    SizedCall::SelfCompare,
    SizedCall::Flatten,
    SizedCall::FlattenBy,
    SizedCall::ContainsIp,
    SizedCall::ContainsCidr,
    SizedCall::Validate,
];

impl From<u8> for SizedCall {
    fn from(n: u8) -> SizedCall {
        ALL_SIZED.get(usize::from(n)).copied().unwrap_or(SizedCall::Traverse)
    }
}

/// The longest regular expression of a named format, as kube's estimate assumes.
const FORMAT_REGEX_SIZE: f64 = 128.0;
/// What cel-go's list functions charge for the call and the list they build.
const LIST_CALL_BASE: u64 = 1 + LIST_CREATE_BASE_COST;

impl SizedCall {
    fn code(self) -> u64 {
        ALL_SIZED.iter().position(|k| *k == self).unwrap_or(0) as u64
    }

    /// Which operands it reads, and what of each.
    fn operands(self, arity: usize) -> Vec<(usize, Mode)> {
        use SizedCall::*;
        match self {
            Traverse | TraverseTwice | ToString | ToBytes => vec![(0, Mode::Size)],
            Join | ListOut => vec![],
            Regex | Contains | Equals | Order | Add | Sets | SetsTwice | ContainsIp | ContainsCidr => {
                vec![(0, Mode::Size), (1, Mode::Size)]
            }
            In | Validate => vec![(1, Mode::Size)],
            Recorded => vec![(0, Mode::Traversal)],
            SelfCompare => vec![(arity.saturating_sub(1).min(1), Mode::SelfCompare)],
            Flatten => vec![(0, Mode::Size)],
            FlattenBy => vec![(0, Mode::Size), (1, Mode::Int)],
        }
    }

    /// The cost from the recorded operands (by position in [`Self::operands`]) and the result.
    fn cost(self, slot: impl Fn(usize) -> u64, result: impl Fn() -> u64) -> u64 {
        use SizedCall::*;
        let t = STRING_TRAVERSAL_COST_FACTOR;
        let text = |s: u64| matches!(tag(s), TAG_STRING | TAG_BYTES);
        match self {
            Traverse => ceil_factor(size(slot(0)), t),
            TraverseTwice => ceil_factor(size(slot(0)), 2.0 * t),
            ToString if tag(slot(0)) == TAG_BYTES => ceil_factor(size(slot(0)), t),
            ToBytes if tag(slot(0)) == TAG_STRING => ceil_factor(size(slot(0)), t),
            ToString | ToBytes => 1,
            Join => ceil_factor(result(), 2.0 * t),
            Regex => ceil_factor(1 + size(slot(0)), t)
                .saturating_mul(ceil_factor(size(slot(1)), REGEX_STRING_LENGTH_COST_FACTOR)),
            Contains if tag(slot(0)) == TAG_STRING => {
                ceil_factor(size(slot(0)), t).saturating_mul(ceil_factor(size(slot(1)), t))
            }
            Contains => 1,
            Equals => ceil_factor(size(slot(0)).min(size(slot(1))), t),
            Order if text(slot(0)) && tag(slot(0)) == tag(slot(1)) => ceil_factor(size(slot(0)).min(size(slot(1))), t),
            Order => 1,
            Add if text(slot(0)) => ceil_factor(size(slot(0)).saturating_add(size(slot(1))), t),
            Add => 1,
            In if tag(slot(0)) == TAG_LIST => size(slot(0)),
            In => 1,
            Recorded => slot(0),
            Sets => 1 + size(slot(0)).saturating_mul(size(slot(1))),
            SetsTwice => 1 + (size(slot(0)).saturating_mul(size(slot(1))) as f64 * 2.0) as u64,
            ListOut => result().saturating_add(LIST_CALL_BASE),
            SelfCompare => slot(0).saturating_add(LIST_CALL_BASE),
            Flatten => size(slot(0)).saturating_add(LIST_CALL_BASE),
            FlattenBy => size(slot(0)).saturating_mul(slot(1)).saturating_add(LIST_CALL_BASE),
            ContainsIp | ContainsCidr => {
                let cidr = size(slot(0));
                let mut cost = ceil_factor(cidr + cidr, t);
                if self == ContainsCidr {
                    cost += ceil_factor(cidr, t) + 1;
                }
                if tag(slot(1)) == TAG_STRING {
                    cost += ceil_factor(size(slot(1)), t);
                }
                cost
            }
            Validate => ceil_factor(1 + size(slot(0)), t)
                .saturating_mul(ceil_factor(1, FORMAT_REGEX_SIZE * REGEX_STRING_LENGTH_COST_FACTOR)),
        }
    }
}

/// How a call is charged: a fixed amount, or by formula.
enum CallCost {
    Fixed(u64),
    Sized(SizedCall),
}

/// The cost of calling `function` (`ns.function` for a namespaced one) with `arity` operands,
/// the receiver counted, by kube's `CallCost` and then cel-go's defaults: 1 for anything
/// neither names, as cel-go charges any function it has no figure for.
fn call_cost(function: &str, receiver: bool, arity: usize) -> CallCost {
    use SizedCall::*;
    let sized = CallCost::Sized;
    match function {
        operators::LOGICAL_AND | operators::LOGICAL_OR | operators::CONDITIONAL => CallCost::Fixed(0),
        operators::EQUALS | operators::NOT_EQUALS => sized(Equals),
        operators::LESS | operators::LESS_EQUALS | operators::GREATER | operators::GREATER_EQUALS => sized(Order),
        operators::ADD => sized(Add),
        operators::IN => sized(In),
        "startsWith" | "endsWith" | "lowerAscii" | "upperAscii" | "substring" | "trim" | "format" if receiver => {
            sized(Traverse)
        }
        "url"
        | "cidr"
        | "isIP"
        | "isCIDR"
        | "quantity"
        | "isQuantity"
        | "semver"
        | "isSemver"
        | "strings.quote"
        | "jsonpatch.escapeKey"
            if !receiver =>
        {
            sized(Traverse)
        }
        // `ip(string)` parses; a CIDR's `ip()` reads a field.
        "ip" if !receiver => sized(Traverse),
        "ip.isCanonical" => sized(TraverseTwice),
        "replace" | "split" if receiver => sized(TraverseTwice),
        "string" if !receiver && arity == 1 => sized(ToString),
        "bytes" if !receiver && arity == 1 => sized(ToBytes),
        "join" if receiver => sized(Join),
        "matches" | "find" | "findAll" if arity == 2 => sized(Regex),
        "contains" if receiver && arity == 2 => sized(Contains),
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" if receiver => sized(Recorded),
        "sets.contains" | "sets.intersects" if arity == 2 => sized(Sets),
        "sets.equivalent" if arity == 2 => sized(SetsTwice),
        "slice" | "reverse" if receiver => sized(ListOut),
        "lists.range" => sized(ListOut),
        "sort" | "distinct" if receiver => sized(SelfCompare),
        "@sortByAssociatedKeys" => sized(SelfCompare),
        "flatten" if receiver && arity == 1 => sized(Flatten),
        "flatten" if receiver => sized(FlattenBy),
        "containsIP" if receiver && arity == 2 => sized(ContainsIp),
        "containsCIDR" if receiver && arity == 2 => sized(ContainsCidr),
        "validate" if receiver && arity == 2 => sized(Validate),
        _ => CallCost::Fixed(1),
    }
}

/// The names a rule's context binds (anything else a call is made on is a namespace).
const CONTEXT_VARIABLES: &[&str] = &["self", "oldSelf"];

/// Rewrites a rule's expression to count its cost.
pub(crate) fn instrument(expr: &IdedExpr) -> Metered {
    let mut w = Rewriter {
        next_id: max_id(expr) + 1,
        slots: Vec::new(),
        bound: Vec::new(),
        scaffolding: HashSet::new(),
        stand_ins: HashMap::new(),
    };
    let (expr, root_cost) = w.rewrite(expr);
    Metered { expr, root_cost, slots: w.slots }
}

fn max_id(expr: &IdedExpr) -> u64 {
    let mut max = expr.id;
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        max = max.max(e.id);
        stack.extend(crate::cel_check::children(e));
    }
    max
}

struct Rewriter {
    next_id: u64,
    /// Operand sizes known when compiling, per slot.
    slots: Vec<u64>,
    /// Comprehension variables in scope.
    bound: Vec<String>,
    /// The nodes of two-variable macros' lowered forms that stand for no node of cel-go's
    /// form (listing the pairs, binding the variables, building maps of lists): kube's
    /// interpreter runs none of them, so they cost nothing of their own.
    scaffolding: HashSet<u64>,
    /// The nodes of lowered forms that stand for a node of cel-go's of another kind, with
    /// that node's own cost: `@pair[0]` for the key variable of `transformMap`'s insert, an
    /// append to the accumulated list for `cel.@mapInsert`.
    stand_ins: HashMap<u64, u64>,
}

/// Whether `e` is what cel-go plans as an attribute: a variable, a selection or index on
/// one, or a conditional.
fn is_attribute(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Ident(_) => true,
        Expr::Select(s) => !s.test,
        Expr::Call(c) => matches!(
            c.func_name.as_str(),
            operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT | operators::CONDITIONAL
        ),
        _ => false,
    }
}

fn is_conditional(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Call(c) if c.func_name == operators::CONDITIONAL)
}

impl Rewriter {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn ided(&mut self, expr: Expr) -> IdedExpr {
        IdedExpr { id: self.id(), expr }
    }

    /// `function(@meter, code, e)`.
    fn wrap(&mut self, function: &str, code: u64, e: IdedExpr) -> IdedExpr {
        let meter = self.ided(Expr::Ident(METER_VARIABLE.to_string()));
        let code = self.ided(Expr::Literal(LiteralValue::Int((code as i64).into())));
        self.ided(Expr::Call(CallExpr { func_name: function.to_string(), target: None, args: vec![meter, code, e] }))
    }

    /// `e`, charged `cost` after it is evaluated.
    fn charged(&mut self, e: IdedExpr, cost: u64) -> IdedExpr {
        if cost == 0 {
            e
        } else {
            self.wrap(CHARGE, cost, e)
        }
    }

    /// A part evaluated only sometimes: its cost is charged where it runs.
    fn conditional(&mut self, e: &IdedExpr) -> IdedExpr {
        let (e, cost) = self.rewrite(e);
        self.charged(e, cost)
    }

    fn is_namespace(&self, e: &IdedExpr) -> Option<String> {
        match &e.expr {
            Expr::Ident(name)
                if !CONTEXT_VARIABLES.contains(&name.as_str()) && !self.bound.iter().any(|b| b == name) =>
            {
                Some(name.clone())
            }
            Expr::Select(s) if !s.test => self.is_namespace(&s.operand).map(|ns| format!("{ns}.{}", s.field)),
            _ => None,
        }
    }

    /// The rewritten expression and the cost of evaluating it that is not charged inside it
    /// (the caller charges it with whatever is evaluated along with it).
    fn rewrite(&mut self, e: &IdedExpr) -> (IdedExpr, u64) {
        let id = e.id;
        if is_constant(e) {
            return (e.clone(), 0);
        }
        if self.scaffolding.contains(&id) || self.stand_ins.contains_key(&id) {
            let (x, cost) = self.scaffold(e);
            return (x, cost + self.stand_ins.get(&id).copied().unwrap_or(0));
        }
        match &e.expr {
            Expr::Literal(_) | Expr::Unspecified => (e.clone(), 0),
            Expr::Ident(name) => {
                let bound = CONTEXT_VARIABLES.contains(&name.as_str()) || self.bound.iter().any(|b| b == name);
                (e.clone(), if bound { SELECT_AND_IDENT_COST } else { 0 })
            }
            Expr::Select(s) => {
                let (operand, cost) = self.rewrite(&s.operand);
                // A presence test costs nothing of its own (kube turns off its cost); a field
                // of something that is not a variable also costs the attribute made of it.
                let own = if s.test {
                    0
                } else if is_attribute(&s.operand) {
                    SELECT_AND_IDENT_COST
                } else {
                    2 * SELECT_AND_IDENT_COST
                };
                let mut select = s.clone();
                select.operand = Box::new(operand);
                (IdedExpr { id, expr: Expr::Select(select) }, cost + own)
            }
            Expr::List(l) => {
                let mut cost = LIST_CREATE_BASE_COST;
                let mut list = l.clone();
                for el in &mut list.elements {
                    let (x, c) = self.rewrite(el);
                    *el = x;
                    cost += c;
                }
                (IdedExpr { id, expr: Expr::List(list) }, cost)
            }
            Expr::Map(m) => self.entries(id, MAP_CREATE_BASE_COST, &m.entries, |entries| {
                let mut m = m.clone();
                m.entries = entries;
                Expr::Map(m)
            }),
            Expr::Struct(s) => self.entries(id, STRUCT_CREATE_BASE_COST, &s.entries, |entries| {
                let mut s = s.clone();
                s.entries = entries;
                Expr::Struct(s)
            }),
            Expr::Comprehension(c) => self.comprehension(id, c),
            Expr::Call(c) => self.call(id, c),
        }
    }

    /// Records which nodes of a two-variable macro's lowered form are its own and which stand
    /// for a node of cel-go's form of another kind. Those of macros nested in it are found
    /// too: their lowered forms are part of this one, their cel-go forms part of cel-go's.
    fn mark(&mut self, two: &TwoVar<'_>) {
        let go = two.cel_go;
        let mut cel_go: HashMap<u64, &IdedExpr> = HashMap::new();
        let mut stack = vec![&go.iter_range, &go.accu_init, &go.loop_cond, &go.loop_step, &go.result];
        while let Some(e) = stack.pop() {
            cel_go.insert(e.id, e);
            stack.extend(crate::cel_check::children(e));
        }
        let mut stack = vec![two.lowered];
        while let Some(e) = stack.pop() {
            match cel_go.get(&e.id) {
                None => {
                    self.scaffolding.insert(e.id);
                }
                Some(g) if !same_kind(e, g) => {
                    self.stand_ins.insert(e.id, own_cost(g));
                }
                Some(_) => {}
            }
            stack.extend(crate::cel_check::children(e));
        }
    }

    /// A node of a lowered form that kube's interpreter does not run: what is evaluated
    /// inside it is charged, the node itself is not. (A lowered form's own nodes are
    /// comprehensions, calls that neither branch nor short-circuit, lists, variables and
    /// literals.)
    fn scaffold(&mut self, e: &IdedExpr) -> (IdedExpr, u64) {
        let id = e.id;
        match &e.expr {
            Expr::Comprehension(c) => self.comprehension(id, c),
            Expr::Call(c) => {
                let mut out = c.clone();
                let mut cost = 0;
                if let Some(t) = &c.target {
                    let (x, tc) = self.rewrite(t);
                    out.target = Some(Box::new(x));
                    cost += tc;
                }
                for a in &mut out.args {
                    let (x, ac) = self.rewrite(a);
                    *a = x;
                    cost += ac;
                }
                (IdedExpr { id, expr: Expr::Call(out) }, cost)
            }
            Expr::List(l) => {
                let mut list = l.clone();
                let mut cost = 0;
                for el in &mut list.elements {
                    let (x, c) = self.rewrite(el);
                    *el = x;
                    cost += c;
                }
                (IdedExpr { id, expr: Expr::List(list) }, cost)
            }
            _ => (e.clone(), 0),
        }
    }

    fn entries(
        &mut self,
        id: u64,
        base: u64,
        entries: &[cel::common::ast::IdedEntryExpr],
        build: impl FnOnce(Vec<cel::common::ast::IdedEntryExpr>) -> Expr,
    ) -> (IdedExpr, u64) {
        let mut cost = base;
        let mut out = entries.to_vec();
        for entry in &mut out {
            match &mut entry.expr {
                EntryExpr::MapEntry(m) => {
                    let (k, kc) = self.rewrite(&m.key);
                    let (v, vc) = self.rewrite(&m.value);
                    m.key = k;
                    m.value = v;
                    cost += kc + vc;
                }
                EntryExpr::StructField(f) => {
                    let (v, vc) = self.rewrite(&f.value);
                    f.value = v;
                    cost += vc;
                }
            }
        }
        (IdedExpr { id, expr: build(out) }, cost)
    }

    fn comprehension(&mut self, id: u64, c: &cel::common::ast::ComprehensionExpr) -> (IdedExpr, u64) {
        let (range, range_cost) = self.rewrite(&c.iter_range);
        let (init, init_cost) = self.rewrite(&c.accu_init);
        let vars: Vec<String> =
            std::iter::once(c.iter_var.clone()).chain(c.iter_var2.clone()).chain([c.accu_var.clone()]).collect();
        let depth = self.bound.len();
        self.bound.extend(vars);
        let accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == c.accu_var);
        // The condition and the step run once per element: each is charged where it runs.
        let cond = self.conditional(&c.loop_cond);
        let step = self.step(&c.loop_step, &accu);
        // The result is evaluated once the loop is done: charged with the comprehension. An
        // accumulator result stays a bare name (the interpreter builds `map` and `filter`
        // results in place when it sees one).
        let (result, result_cost) = self.rewrite(&c.result);
        self.bound.truncate(depth);
        let mut out = c.clone();
        out.iter_range = range;
        out.accu_init = init;
        out.loop_cond = cond;
        out.loop_step = step;
        out.result = result;
        (IdedExpr { id, expr: Expr::Comprehension(Box::new(out)) }, range_cost + init_cost + result_cost)
    }

    /// A comprehension's step, charged per iteration. The shapes the standard macros make
    /// are kept, the charge moved inside them, because the interpreter recognises them: an
    /// `all` or `exists` step (`@result && p`) defers errors as cel-go does, and a `map` or
    /// `filter` step (`@result + [x]`, maybe under `p ? ... : @result`) appends in place.
    fn step(&mut self, step: &IdedExpr, accu: &dyn Fn(&IdedExpr) -> bool) -> IdedExpr {
        if let Expr::Call(c) = &step.expr {
            match (c.func_name.as_str(), c.args.as_slice()) {
                // The accumulator is read on every step that runs, which the loop's condition
                // only lets happen while it does not decide the result: its cost goes with `p`.
                (operators::LOGICAL_AND | operators::LOGICAL_OR, [a, p]) if c.target.is_none() && accu(a) => {
                    let (p, cost) = self.rewrite(p);
                    let p = self.charged(p, cost + SELECT_AND_IDENT_COST);
                    let mut out = c.clone();
                    out.args = vec![a.clone(), p];
                    return IdedExpr { id: step.id, expr: Expr::Call(out) };
                }
                (operators::ADD, [a, _]) if c.target.is_none() && accu(a) => {
                    if let Some(append) = self.append(step, 0) {
                        return append;
                    }
                }
                (operators::CONDITIONAL, [guard, then, otherwise]) if accu(otherwise) => {
                    if let Some(then) = self.append(then, 0) {
                        let guard = self.conditional(guard);
                        let mut out = c.clone();
                        // The accumulator as a branch of `?:` is an attribute cel-go
                        // resolves without charging it.
                        out.args = vec![guard, then, otherwise.clone()];
                        return IdedExpr { id: step.id, expr: Expr::Call(out) };
                    }
                }
                _ => {}
            }
        }
        self.conditional(step)
    }

    /// `@result + [x, ...]` with its whole cost (accumulator, list, the elements, the
    /// concatenation and `extra`) charged on its first element.
    fn append(&mut self, e: &IdedExpr, extra: u64) -> Option<IdedExpr> {
        let Expr::Call(c) = &e.expr else { return None };
        let [a, items] = c.args.as_slice() else { return None };
        let Expr::List(list) = &items.expr else { return None };
        if c.func_name != operators::ADD || list.elements.is_empty() {
            return None;
        }
        // The list built, unless it is the lowered form's own (a map's entries are appended
        // as lists); the call, `+` of lists or the `cel.@mapInsert` it stands for, 1.
        let built = if self.scaffolding.contains(&items.id) { 0 } else { LIST_CREATE_BASE_COST };
        let call = self.stand_ins.get(&e.id).copied().unwrap_or(1);
        let mut cost = extra + SELECT_AND_IDENT_COST + built + call;
        let mut elements = Vec::with_capacity(list.elements.len());
        for el in &list.elements {
            let (x, c) = self.rewrite(el);
            cost += c;
            elements.push(x);
        }
        let first = elements.remove(0);
        elements.insert(0, self.charged(first, cost));
        let mut list = list.clone();
        list.elements = elements;
        let mut out = c.clone();
        out.args = vec![a.clone(), IdedExpr { id: items.id, expr: Expr::List(list) }];
        Some(IdedExpr { id: e.id, expr: Expr::Call(out) })
    }

    fn call(&mut self, id: u64, c: &CallExpr) -> (IdedExpr, u64) {
        // A two-variable macro: the lowered form runs in place of the pair of forms (it is
        // the branch `@lowered()` always takes), charged as kube charges cel-go's form.
        if let Some(two) = TwoVar::of(c) {
            self.mark(&two);
            return self.rewrite(two.lowered);
        }
        let name = c.func_name.as_str();
        match (name, c.args.as_slice()) {
            (operators::LOGICAL_AND | operators::LOGICAL_OR, [l, r]) if c.target.is_none() => {
                let (l, cost) = self.rewrite(l);
                let r = self.conditional(r);
                let mut out = c.clone();
                out.args = vec![l, r];
                return (IdedExpr { id, expr: Expr::Call(out) }, cost);
            }
            (operators::CONDITIONAL, [cond, then, otherwise]) if c.target.is_none() => {
                let (cond, cost) = self.rewrite(cond);
                let then = self.branch(then);
                let otherwise = self.branch(otherwise);
                let mut out = c.clone();
                out.args = vec![cond, then, otherwise];
                return (IdedExpr { id, expr: Expr::Call(out) }, cost);
            }
            (operators::INDEX | operators::OPT_INDEX, [operand, index]) if c.target.is_none() => {
                let (operand_x, oc) = self.rewrite(operand);
                let (index_x, ic) = self.rewrite(index);
                // An index that is itself a variable or a selection qualifies the operand as
                // it is read, at no cost of its own beyond its reading; any other index is a
                // qualification of 1. An operand that is not a variable costs the attribute
                // made of it.
                let qualify = u64::from(!is_attribute(index) || is_conditional(index));
                let own = qualify + u64::from(!is_attribute(operand));
                let mut out = c.clone();
                out.args = vec![operand_x, index_x];
                return (IdedExpr { id, expr: Expr::Call(out) }, oc + ic + own);
            }
            // kube's interpreter turns `x in` a list of constant numbers, strings and bools
            // into a set lookup that costs nothing but `x` (nothing at all for an empty list).
            (operators::IN, [x, list]) if c.target.is_none() && is_set(list) => {
                let Expr::List(l) = &list.expr else { return (IdedExpr { id, expr: Expr::Call(c.clone()) }, 0) };
                if l.elements.is_empty() {
                    return (IdedExpr { id, expr: Expr::Call(c.clone()) }, 0);
                }
                let (x, cost) = self.rewrite(x);
                let mut out = c.clone();
                out.args = vec![x, list.clone()];
                return (IdedExpr { id, expr: Expr::Call(out) }, cost);
            }
            (operators::OPT_SELECT, [operand, field]) if c.target.is_none() => {
                let (operand_x, oc) = self.rewrite(operand);
                let own = if is_attribute(operand) { SELECT_AND_IDENT_COST } else { 2 * SELECT_AND_IDENT_COST };
                let mut out = c.clone();
                out.args = vec![operand_x, field.clone()];
                return (IdedExpr { id, expr: Expr::Call(out) }, oc + own);
            }
            _ => {}
        }
        // A call on a namespace (`sets.contains(a, b)`, `optional.of(x)`) is a call of the
        // qualified function: the namespace is left as written and costs nothing.
        let namespace = c.target.as_deref().and_then(|t| self.is_namespace(t));
        let (function, receiver) = match &namespace {
            Some(ns) => (format!("{ns}.{name}"), false),
            None => (name.to_string(), c.target.is_some()),
        };
        let operands: Vec<&IdedExpr> =
            if receiver { c.target.as_deref().into_iter().chain(&c.args).collect() } else { c.args.iter().collect() };
        let arity = operands.len();
        let mut cost = 0;
        let mut rewritten: Vec<IdedExpr> = Vec::with_capacity(arity);
        for o in &operands {
            let (x, oc) = self.rewrite(o);
            cost += oc;
            rewritten.push(x);
        }
        let mut sized_code = None;
        match call_cost(&function, receiver, arity) {
            CallCost::Fixed(n) => cost += n,
            CallCost::Sized(kind) => {
                let reads = kind.operands(arity);
                let known: Vec<Option<u64>> = reads
                    .iter()
                    .map(|(i, mode)| operands.get(*i).filter(|_| *mode == Mode::Size).and_then(|o| literal_size(o)))
                    .collect();
                let needs_result = matches!(kind, SizedCall::Join | SizedCall::ListOut);
                // A comparison or sum with a number, boolean or null literal is one of
                // fixed-size scalars: cel-go charges it 1.
                let scalar = matches!(kind, SizedCall::Equals | SizedCall::Order | SizedCall::Add)
                    && known.iter().any(|k| k.is_some_and(|k| tag(k) == 0));
                if scalar {
                    cost += 1;
                } else if !needs_result && known.iter().all(Option::is_some) {
                    // Every operand it reads is a literal: its cost is known now.
                    let known: Vec<u64> = known.into_iter().flatten().collect();
                    cost += kind.cost(|i| known.get(i).copied().unwrap_or(0), || 0);
                } else {
                    let base = self.slots.len();
                    for (slot, ((i, mode), literal)) in reads.iter().zip(&known).enumerate() {
                        self.slots.push(literal.unwrap_or(0));
                        if literal.is_none() {
                            let x = std::mem::take(&mut rewritten[*i]);
                            rewritten[*i] = self.wrap(RECORD, (base + slot) as u64 | (mode.code() << 32), x);
                        }
                    }
                    sized_code = Some(kind.code() | ((base as u64) << 8));
                }
            }
        }
        let mut out = c.clone();
        if receiver {
            out.target = Some(Box::new(rewritten.remove(0)));
        }
        out.args = rewritten;
        let call = IdedExpr { id, expr: Expr::Call(out) };
        let call = match sized_code {
            Some(code) => self.wrap(CALL, code, call),
            None => call,
        };
        (call, cost)
    }

    /// A branch of `?:`: an attribute there is resolved by cel-go without charging for it
    /// itself (only for what it selects).
    fn branch(&mut self, e: &IdedExpr) -> IdedExpr {
        let (x, cost) = self.rewrite(e);
        let cost =
            if is_attribute(e) && !is_conditional(e) { cost.saturating_sub(SELECT_AND_IDENT_COST) } else { cost };
        self.charged(x, cost)
    }
}

/// Whether `a` and `b` are nodes of the same kind (calls of the same function).
fn same_kind(a: &IdedExpr, b: &IdedExpr) -> bool {
    match (&a.expr, &b.expr) {
        (Expr::Call(x), Expr::Call(y)) => x.func_name == y.func_name,
        (x, y) => std::mem::discriminant(x) == std::mem::discriminant(y),
    }
}

/// What cel-go's interpreter charges for node `e` itself, its operands apart: a variable (an
/// iteration variable, always bound), a list or map built, a call (the calls of cel-go's
/// forms that a lowered form does not make are `cel.@mapInsert`, of fixed cost).
fn own_cost(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Ident(_) => SELECT_AND_IDENT_COST,
        Expr::List(_) => LIST_CREATE_BASE_COST,
        Expr::Map(_) => MAP_CREATE_BASE_COST,
        Expr::Call(c) => {
            let arity = c.args.len() + usize::from(c.target.is_some());
            match call_cost(&c.func_name, c.target.is_some(), arity) {
                CallCost::Fixed(n) => n,
                CallCost::Sized(_) => 1,
            }
        }
        _ => 0,
    }
}

/// The conversions kube's interpreter computes once when their operand is a constant.
const CONVERSIONS: &[&str] =
    &["bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"];

/// Whether kube's interpreter (which evaluates with cel-go's `OptOptimize`) makes `e` a
/// constant before evaluating, so that it costs nothing: a literal, a list or map literal of
/// constants, a conversion of a constant.
fn is_constant(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Literal(_) => true,
        Expr::List(l) => l.optional_indices.is_empty() && l.elements.iter().all(is_constant),
        Expr::Map(m) => m.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(m) => !m.optional && is_constant(&m.key) && is_constant(&m.value),
            EntryExpr::StructField(_) => false,
        }),
        Expr::Call(c) => {
            c.target.is_none()
                && CONVERSIONS.contains(&c.func_name.as_str())
                && matches!(c.args.as_slice(), [a] if is_constant(a))
        }
        _ => false,
    }
}

/// Whether `e` is a constant list of numbers, strings, bools and nulls, which kube's
/// interpreter looks members up in as a set.
fn is_set(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::List(l) => {
            l.optional_indices.is_empty()
                && l.elements.iter().all(|x| {
                    matches!(&x.expr, Expr::Literal(lit) if !matches!(lit, LiteralValue::Bytes(_) | LiteralValue::Null))
                })
        }
        _ => false,
    }
}

/// The tagged size of a literal operand (a list literal of fixed length included).
fn literal_size(e: &IdedExpr) -> Option<u64> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some((TAG_STRING << TAG_SHIFT) | s.inner().chars().count() as u64),
        Expr::Literal(LiteralValue::Bytes(b)) => Some((TAG_BYTES << TAG_SHIFT) | b.inner().len() as u64),
        Expr::Literal(_) => Some(1),
        Expr::List(l) if l.optional_indices.is_empty() => Some((TAG_LIST << TAG_SHIFT) | l.elements.len() as u64),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
