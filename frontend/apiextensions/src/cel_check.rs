//! A type checker and cost estimator for CEL rules, over the parsed program of the cel-rust
//! crate (which has neither): `self` and `oldSelf` are typed by the schema ([`Decl`]), and
//! each expression gets a type, the cost of evaluating it and the size of its value, by the
//! rules of cel-go's checker and estimator that Kubernetes uses.
//!
//! The checker reports what kube's reports when the types make it certain: a field the schema
//! does not declare (`undefined field 'foo'`), a name nothing declares (`undeclared reference
//! to 'x' (in container '')`), operators and functions applied to arguments none of their
//! overloads takes (`found no matching overload for '_+_' applied to '(int, string)'`; the
//! functions' overloads are those [`crate::cel_signatures`] declares, resolved as cel-go
//! resolves them, member calls apart from global ones), operands that must be of one type and
//! are not (`?:` branches, `==`, `in`, an index: an int is not a double here), list literals of
//! mixed types, and a rule whose result cannot be a bool. A schema object is of a type of its
//! own, named as kube names it: `selfType<n>` for `self` (`n` the nanoseconds of the clock when
//! the rule is compiled, so that no rule can depend on the name), then the path of escaped
//! field names, `@idx` for a list's items and `@elem` for a map's values
//! (`selfType123.spec.ports.@idx`); two objects agree only when their names do (`self.spec ==
//! oldSelf.spec`), as cel-go's struct types. `null` agrees only with what cel-go lets be null:
//! objects, durations, timestamps, optional and library values, and values of unknown type.
//! Where a type is not known (an int-or-string, a library function's result) it assumes the
//! best and reports nothing: a rule is never refused that kube's checker would pass for lack
//! of knowledge here.

use std::collections::BTreeMap;
use std::rc::Rc;

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, SourceInfo};
use cel::IdedExpr;

use crate::cel_cost::{
    call_cost, Cost, Operand, Size, LIST_CREATE_BASE_COST, MAP_CREATE_BASE_COST, SELECT_AND_IDENT_COST,
    STRING_TRAVERSAL_COST_FACTOR,
};
use crate::cel_decl::{Decl, DeclKind, MAP_KEY};
use crate::cel_signatures::Param;

/// A type as far as the checker knows it.
#[derive(Debug, Clone, PartialEq)]
enum Ty<'d> {
    /// Not known (an int-or-string, a library function's result, ...).
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    /// A type name (`int`, `string`, ...) used as a value.
    Type,
    List(Box<Ty<'d>>),
    Map(Box<Ty<'d>>, Box<Ty<'d>>),
    /// An object of the schema: kube's generated name of its type (empty where only the cost
    /// is wanted), and its fields. The name comes first so that unequal names compare fast.
    Object(Rc<str>, &'d BTreeMap<String, Decl>),
    /// A library's own type (a quantity, a URL, ...), by cel-go's name of it.
    Opaque(&'static str),
    /// An optional value of the type.
    Optional(Box<Ty<'d>>),
}

impl<'d> Ty<'d> {
    /// The type of a value of `decl`, `name` being kube's name of that type should it be an
    /// object (of its items' or values' type, with `.@idx` or `.@elem` added, for a list or a
    /// map).
    fn of(decl: &'d Decl, name: &Rc<str>) -> Ty<'d> {
        let inner = |suffix: &str| if name.is_empty() { name.clone() } else { Rc::from(format!("{name}.{suffix}")) };
        match &decl.kind {
            DeclKind::Dyn => Ty::Dyn,
            DeclKind::Bool => Ty::Bool,
            DeclKind::Int => Ty::Int,
            DeclKind::Double => Ty::Double,
            DeclKind::String => Ty::String,
            DeclKind::Bytes => Ty::Bytes,
            DeclKind::Duration => Ty::Duration,
            DeclKind::Timestamp => Ty::Timestamp,
            DeclKind::List(e) => Ty::List(Box::new(Ty::of(e, &inner("@idx")))),
            DeclKind::Map(v) => Ty::Map(Box::new(Ty::String), Box::new(Ty::of(v, &inner("@elem")))),
            DeclKind::Object(f) => Ty::Object(name.clone(), f),
        }
    }

    /// cel-go's name of the type in messages; `None` for a type named here as nothing (such
    /// messages are not reported).
    fn name(&self) -> Option<String> {
        Some(match self {
            Ty::Dyn => "dyn".into(),
            Ty::Null => "null".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Duration => "duration".into(),
            Ty::Timestamp => "timestamp".into(),
            Ty::Type => return None,
            Ty::List(e) => format!("list({})", e.name()?),
            Ty::Map(k, v) => format!("map({}, {})", k.name()?, v.name()?),
            Ty::Object(name, _) => name.to_string(),
            Ty::Opaque(name) => (*name).into(),
            Ty::Optional(t) => format!("optional_type({})", t.name()?),
        })
    }

    /// Whether the type is known well enough to refuse an operation on it.
    fn certain(&self) -> bool {
        !matches!(self, Ty::Dyn | Ty::Type)
    }

    /// Whether cel-go lets `null` stand for a value of this type: its legacy nullable kinds
    /// (structs, durations, timestamps, opaque types, optional ones among them) and null.
    fn nullable(&self) -> bool {
        matches!(self, Ty::Null | Ty::Object(..) | Ty::Duration | Ty::Timestamp | Ty::Opaque(_) | Ty::Optional(_))
    }

    /// The type a declared parameter or result stands for, `a` being what the overload's
    /// type parameter is bound to.
    fn of_param(p: &Param, a: &Option<Ty<'d>>) -> Ty<'d> {
        match p {
            Param::Bool => Ty::Bool,
            Param::Int => Ty::Int,
            Param::Uint => Ty::Uint,
            Param::Double => Ty::Double,
            Param::String => Ty::String,
            Param::Bytes => Ty::Bytes,
            Param::Duration => Ty::Duration,
            Param::Timestamp => Ty::Timestamp,
            Param::Dyn => Ty::Dyn,
            Param::A => a.clone().unwrap_or(Ty::Dyn),
            Param::List(e) => Ty::List(Box::new(Ty::of_param(e, a))),
            Param::Map(k, v) => Ty::Map(Box::new(Ty::of_param(k, a)), Box::new(Ty::of_param(v, a))),
            Param::Opaque(name) => Ty::Opaque(name),
            Param::Type => Ty::Type,
            Param::Optional(t) => Ty::Optional(Box::new(Ty::of_param(t, a))),
        }
    }

    /// Whether a value of this type may be passed as `p`, binding the type parameter in `a`
    /// (cel-go's assignability, a type not known being assignable to anything).
    fn binds(&self, p: &Param, a: &mut Option<Ty<'d>>) -> bool {
        if !self.certain() {
            return true;
        }
        // `null` binds a type parameter as any value does (and is then taken over by the
        // first nullable type it agrees with); a declared type only if nullable.
        if *self == Ty::Null && !matches!(p, Param::A | Param::Dyn) {
            return Ty::of_param(p, &None).nullable();
        }
        match (p, self) {
            (Param::Dyn, _) => true,
            (Param::A, t) => match a {
                None => {
                    *a = Some(t.clone());
                    true
                }
                Some(bound) => {
                    let fits = bound.agrees(t);
                    if fits && (!bound.certain() || *bound == Ty::Null) {
                        *a = Some(t.clone());
                    }
                    fits
                }
            },
            (Param::List(e), Ty::List(t)) => t.binds(e, a),
            (Param::Map(k, v), Ty::Map(tk, tv)) => tk.binds(k, a) && tv.binds(v, a),
            (Param::Opaque(name), Ty::Opaque(t)) => name == t,
            (Param::Type, Ty::Type) => true,
            (Param::Optional(p), Ty::Optional(t)) => t.binds(p, a),
            (p, t) => Ty::of_param(p, &None) == *t,
        }
    }

    /// Whether two values of these types may be compared, or be the branches of one `?:`
    /// (both bind one type parameter): a type not known agrees with any.
    fn agrees(&self, other: &Ty<'_>) -> bool {
        match (self, other) {
            (a, b) if !a.certain() || !b.certain() => true,
            (Ty::Null, t) | (t, Ty::Null) => t.nullable(),
            (Ty::List(a), Ty::List(b)) => a.agrees(b),
            (Ty::Map(ak, av), Ty::Map(bk, bv)) => ak.agrees(bk) && av.agrees(bv),
            (Ty::Optional(a), Ty::Optional(b)) => a.agrees(b),
            (a, b) => a.name() == b.name(),
        }
    }

    fn text(&self) -> bool {
        matches!(self, Ty::String | Ty::Bytes)
    }

    fn numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    fn scalar(&self) -> bool {
        matches!(self, Ty::Bool | Ty::Int | Ty::Uint | Ty::Double | Ty::Duration | Ty::Timestamp)
    }
}

/// What the walk knows about one expression.
#[derive(Debug, Clone)]
struct Node<'d> {
    ty: Ty<'d>,
    /// The schema node the value comes from, if it comes from one.
    decl: Option<&'d Decl>,
    cost: Cost,
    /// The size of the value, where known.
    size: Option<Size>,
    /// The size of a literal list's elements or a literal map's values.
    entry: Option<Size>,
}

impl<'d> Node<'d> {
    /// A value not read from the schema: a scalar's size is 1 (cel-go's), others' unknown.
    fn new(ty: Ty<'d>, cost: Cost) -> Node<'d> {
        let size = ty.scalar().then_some(Size::fixed(1));
        Node { ty, decl: None, cost, size, entry: None }
    }

    /// A value of `decl`, whose type kube names `name` should it be an object.
    fn of_decl(decl: &'d Decl, cost: Cost, name: &Rc<str>) -> Node<'d> {
        Node {
            ty: Ty::of(decl, name),
            decl: Some(decl),
            cost,
            size: Some(Size { min: 0, max: decl.max_elements }),
            entry: None,
        }
    }

    /// The size, or `unknown` where it is not known.
    fn size_or(&self, unknown: Size) -> Size {
        self.size.unwrap_or(unknown)
    }

    /// The decl and size of an element (of a list) or a value (of a map).
    fn element(&self) -> (Option<&'d Decl>, Option<Size>) {
        let decl = match self.decl.map(|d| &d.kind) {
            Some(DeclKind::List(e) | DeclKind::Map(e)) => Some(&**e),
            _ => None,
        };
        (decl, decl.map(|d| Size { min: 0, max: d.max_elements }).or(self.entry))
    }

    fn operand(&self, unknown: Size) -> Operand {
        let elements = match &self.ty {
            Ty::List(e) => {
                let (decl, _) = self.element();
                Some((decl.map_or(unknown, |d| Size { min: 0, max: d.max_elements }), e.text()))
            }
            _ => None,
        };
        Operand { size: self.size_or(unknown), text: self.ty.text(), elements, int_literal: None }
    }
}

/// The keys' or values' type of a map literal, as far as its entries went.
#[derive(Default)]
struct Joined<'d> {
    /// The first entry's.
    first: Option<Ty<'d>>,
    /// Whether another entry's differed.
    mixed: bool,
}

impl<'d> Joined<'d> {
    fn ty(self) -> Ty<'d> {
        if self.mixed {
            Ty::Dyn
        } else {
            self.first.unwrap_or(Ty::Dyn)
        }
    }
}

/// A variable in scope.
struct Var<'d> {
    name: String,
    node: Node<'d>,
}

/// One finding, at a byte offset of the source.
struct Finding {
    offset: Option<u32>,
    message: String,
}

struct Walk<'d, 's> {
    root: &'d Decl,
    source_info: &'s SourceInfo,
    vars: Vec<Var<'d>>,
    findings: Vec<Finding>,
    /// Whether findings are collected (not when only the cost is wanted).
    checking: bool,
    /// The size taken for a value whose size is not followed (a conversion's result, ...).
    unknown: Size,
    /// How `oldSelf` is bound.
    old: OldSelf,
    /// kube's name of the type of `self` should it be an object (empty where only the cost is
    /// wanted: no message names it).
    self_type: Rc<str>,
    /// Expressions (by id) whose nodes a two-variable comprehension wants, as they are walked.
    watched: Vec<(u64, Option<Node<'d>>)>,
    /// The environment the expression is checked in.
    expressions: Expressions,
}

/// Which of kube's environments an expression is checked in: a rule new to a definition in
/// that of the version before the one served (kube's minimum compatibility version), one
/// stored already in that of the version served.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Expressions {
    New,
    Stored,
}

/// How a rule sees `oldSelf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum OldSelf {
    /// The old value, as `self` is typed (the rule runs on updates only).
    Value,
    /// An optional of it (`optionalOldSelf`: the rule runs on creates too, with none).
    Optional,
}

/// The result of checking one expression.
#[derive(Debug)]
pub(crate) struct Checked {
    /// cel-go's issues text (`ERROR: <input>:1:6: ...` with the source line and a caret),
    /// when there are findings.
    pub issues: Option<String>,
    /// The most evaluating it can cost.
    pub max_cost: u64,
    /// What the result's type is, when known: `Some(true)` for bool, `Some(false)` for
    /// another known type.
    result_is_bool: Option<bool>,
    result_is_string: Option<bool>,
}

impl Checked {
    /// Whether the expression certainly does not evaluate to a bool.
    pub(crate) fn not_bool(&self) -> bool {
        self.result_is_bool == Some(false)
    }

    /// Whether the expression certainly does not evaluate to a string.
    pub(crate) fn not_string(&self) -> bool {
        self.result_is_string == Some(false)
    }
}

/// Checks `expr` (parsed from `source`) with `self` of type `root` and `oldSelf` bound as
/// `old` says, as a stored expression (the tests' shorthand of [`check_in`]).
#[cfg(test)]
pub(crate) fn check(program: &cel::Program, source: &str, root: &Decl, old: OldSelf) -> Checked {
    check_in(program, source, root, old, Expressions::Stored)
}

/// [`check`] in the environment `expressions` says.
pub(crate) fn check_in(
    program: &cel::Program,
    source: &str,
    root: &Decl,
    old: OldSelf,
    expressions: Expressions,
) -> Checked {
    let mut walk = Walk {
        root,
        source_info: program.source_info(),
        vars: Vec::new(),
        findings: Vec::new(),
        checking: true,
        unknown: Size::unknown(),
        old,
        self_type: generated_self_type(),
        watched: Vec::new(),
        expressions,
    };
    let node = walk.visit(program.expression(), false);
    // kube's validators of constant arguments look only at a program whose types check.
    if walk.findings.is_empty() {
        constant_arguments(program.expression(), program.source_info(), &mut walk.findings);
    }
    let issues = (!walk.findings.is_empty()).then(|| issues_text(source, walk.findings));
    Checked {
        issues,
        max_cost: node.cost.max,
        result_is_bool: node.ty.certain().then_some(node.ty == Ty::Bool),
        result_is_string: node.ty.certain().then_some(node.ty == Ty::String),
    }
}

/// The field `field` selects of an object's `fields`, with its declared (escaped) name: a
/// reserved word selects the field escaped from it too (`namespace` is `__namespace__`), as
/// kube's type provider resolves it since 1.31.
fn field_of<'d>(fields: &'d BTreeMap<String, Decl>, field: &str) -> Option<(&'d String, &'d Decl)> {
    fields
        .get_key_value(field)
        .or_else(|| crate::cel_decl::keyword(field).then(|| fields.get_key_value(&format!("__{field}__"))).flatten())
}

/// kube's name for the type of `self` in a rule being compiled: `selfType` and the clock's
/// nanoseconds, a name meant to change with every compilation so that no rule comes to depend
/// on it.
fn generated_self_type() -> Rc<str> {
    Rc::from(format!("selfType{}", ballast_apimachinery::clock::subsec_nanos_now()))
}

/// The direct subexpressions of `expr`.
pub(crate) fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
        entries
            .iter()
            .flat_map(|e| match &e.expr {
                EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
                EntryExpr::StructField(field) => vec![&field.value],
            })
            .collect()
    }
    match &expr.expr {
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(select) => vec![&*select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// kube's checks of constant arguments (cel-go's validators): a `duration` or `timestamp` of a
/// string that does not convert, and a `matches` pattern Go cannot compile, each reported at
/// the constant as `invalid <function> argument`. As cel-go's, they look at the first
/// argument after the receiver: the pattern of `s.matches(p)`, but the subject of
/// `matches(s, p)`.
fn constant_arguments(expr: &IdedExpr, source_info: &SourceInfo, findings: &mut Vec<Finding>) {
    if let Expr::Call(call) = &expr.expr {
        // A two-variable macro's arguments are in both of its forms: checked once.
        if let Some(two) = crate::cel_comprehensions::TwoVar::of(call) {
            for child in [&two.cel_go.iter_range, &two.cel_go.loop_step, &two.cel_go.result] {
                constant_arguments(child, source_info, findings);
            }
            return;
        }
        let f = call.func_name.as_str();
        if let Some(arg) = call.args.first() {
            if let Expr::Literal(LiteralValue::String(s)) = &arg.expr {
                let s = s.inner();
                let invalid = match f {
                    "duration" => !crate::formats::go_duration(s),
                    "timestamp" => !rfc3339(s),
                    "matches" => crate::cel_regex_syntax::compile(s).is_err(),
                    _ => false,
                };
                if invalid {
                    let offset = source_info.offset_for(arg.id).map(|(start, _)| start);
                    findings.push(Finding { offset, message: format!("invalid {f} argument") });
                }
            }
        }
    }
    for child in children(expr) {
        constant_arguments(child, source_info, findings);
    }
}

/// Whether `s` is a timestamp as CEL's `timestamp` reads one (Go's RFC 3339:
/// `2006-01-02T15:04:05Z07:00`, the seconds optionally with a fraction), in years 1 to 9999.
fn rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>, max: u32| {
        b.get(r.clone()).is_some_and(|d| d.iter().all(u8::is_ascii_digit))
            && s[r].parse::<u32>().is_ok_and(|n| n <= max)
    };
    if !(s.is_char_boundary(10) && crate::formats::full_date(&s[..10]) && &s[..4] != "0000") {
        return false;
    }
    if !(b.get(10) == Some(&b'T')
        && digits(11..13, 23)
        && b.get(13) == Some(&b':')
        && digits(14..16, 59)
        && b.get(16) == Some(&b':')
        && digits(17..19, 59))
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix(['.', ',']) {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    let z = rest.as_bytes();
    rest == "Z"
        || (z.len() == 6
            && (z[0] == b'+' || z[0] == b'-')
            && rest[1..3].parse::<u32>().is_ok_and(|h| h <= 23)
            && z[3] == b':'
            && rest[4..6].parse::<u32>().is_ok_and(|m| m <= 59)
            && z[1..3].iter().chain(&z[4..6]).all(u8::is_ascii_digit))
}

/// cel-go's text of findings: each `ERROR: <input>:<line>:<column>: <message>` with the
/// source line and a caret under the column, in source order.
fn issues_text(source: &str, mut findings: Vec<Finding>) -> String {
    findings.sort_by_key(|f| f.offset);
    findings
        .iter()
        .map(|f| {
            let (line, column) = f.offset.map_or((1, 0), |o| line_column(source, o as usize));
            let snippet = source.lines().nth(line - 1).unwrap_or("");
            frame(line, column + 1, &f.message, snippet)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One error in cel-go's frame: `column` counts from 1.
pub(crate) fn frame(line: usize, column: usize, message: &str, snippet: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{column}: {message}");
    if !snippet.is_empty() || line == 1 {
        let snippet = snippet.replace('\t', " ");
        out.push_str(&format!("\n | {snippet}\n | {}^", ".".repeat(column.saturating_sub(1))));
    }
    out
}

/// The line (from 1) and column (from 0, in characters) of a byte offset.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = source.get(..offset.min(source.len())).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count();
    (line, column)
}

/// The parse errors of a rule in kube's frame (cel-rust's own text frames them differently).
pub(crate) fn parse_issues(source: &str, errors: &cel::ParseErrors) -> String {
    errors
        .errors
        .iter()
        .map(|e| {
            let (line, column) = (e.pos.0.max(1) as usize, e.pos.1.max(1) as usize);
            frame(line, column, &e.msg, source.lines().nth(line - 1).unwrap_or(""))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn signature(args: &[&Ty<'_>], instance: bool) -> Option<String> {
    let names: Option<Vec<String>> = args.iter().map(|t| t.name()).collect();
    let names = names?;
    Some(if instance { format!("{}.({})", names[0], names[1..].join(", ")) } else { format!("({})", names.join(", ")) })
}

/// Functions kube's environment declares that rules here do not type (the checker lets them
/// through untyped): the authorization library's (usable only with an authorizer, which rules
/// do not have), and `has`, should it reach the walk unexpanded. kube's list extension
/// (`distinct`, `flatten`, `slice`, `sortBy`, ...) and lists' `includes` come after the
/// version served here: undeclared, as kube's checker finds them at that version.
const DECLARED_ELSEWHERE: &[&str] = &[
    "has",
    "path",
    "group",
    "serviceAccount",
    "resource",
    "subresource",
    "namespace",
    "name",
    "check",
    "allowed",
    "reason",
    "errored",
    "error",
    "fieldSelector",
    "labelSelector",
];

/// Macros of CEL extensions that kube enables, that name variables in their arguments and
/// that the parser leaves unexpanded: optional values' `optMap` and `optFlatMap`. (The
/// standard macros and the two-variable comprehensions are expanded.)
const MACROS_WITH_VARIABLES: &[&str] = &["optMap", "optFlatMap"];

const TYPE_NAMES: &[&str] = &["int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"];

impl<'d> Walk<'d, '_> {
    fn report(&mut self, id: u64, message: String) {
        if self.checking {
            let offset = self.source_info.offset_for(id).map(|(start, _)| start);
            self.findings.push(Finding { offset, message });
        }
    }

    fn no_overload(&mut self, id: u64, function: &str, args: &[&Ty<'_>], instance: bool) {
        if let Some(sig) = signature(args, instance) {
            self.report(id, format!("found no matching overload for '{function}' applied to '{sig}'"));
        }
    }

    fn lookup(&self, name: &str) -> Option<Node<'d>> {
        if let Some(v) = self.vars.iter().rev().find(|v| v.name == name) {
            let mut node = v.node.clone();
            node.cost = Cost::fixed(SELECT_AND_IDENT_COST);
            return Some(node);
        }
        let node = (name == "self" || name == "oldSelf")
            .then(|| Node::of_decl(self.root, Cost::fixed(SELECT_AND_IDENT_COST), &self.self_type));
        match node {
            Some(mut n) if name == "oldSelf" && self.old == OldSelf::Optional => {
                n.ty = Ty::Optional(Box::new(n.ty));
                Some(n)
            }
            n => n,
        }
    }

    /// `as_target`: the expression is the receiver of a call, where a name nothing declares
    /// may be a function's namespace (`strings.quote`).
    fn visit(&mut self, e: &IdedExpr, as_target: bool) -> Node<'d> {
        let node = self.visit_expr(e, as_target);
        if let Some(slot) = self.watched.iter_mut().rev().find(|(id, _)| *id == e.id) {
            slot.1 = Some(node.clone());
        }
        node
    }

    fn visit_expr(&mut self, e: &IdedExpr, as_target: bool) -> Node<'d> {
        match &e.expr {
            Expr::Ident(name) => self.ident(e.id, name, as_target),
            Expr::Literal(lit) => literal(lit),
            Expr::Select(select) => {
                let operand = self.visit(&select.operand, as_target);
                self.select(e.id, &operand, &select.field, select.test)
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::List(list) => {
                let mut cost = Cost::fixed(LIST_CREATE_BASE_COST);
                let mut entry: Option<Size> = None;
                let mut elem_ty: Option<Ty<'d>> = None;
                let mut mixed = false;
                for (index, item) in list.elements.iter().enumerate() {
                    let mut n = self.visit(item, false);
                    // An optional entry (`[?x]`) adds the value, if any.
                    if list.optional_indices.contains(&index) {
                        if let Ty::Optional(t) = n.ty {
                            n.ty = *t;
                        }
                    }
                    cost = cost.add(n.cost);
                    let s = n.size_or(self.unknown);
                    entry = Some(entry.map_or(s, |x| x.union(s)));
                    match &elem_ty {
                        None => elem_ty = Some(n.ty),
                        // kube's validator of homogeneous literals reports the first element
                        // of another type than the first's (`null` among others too).
                        Some(first) if first.certain() && n.ty.certain() && *first != n.ty => {
                            if let (false, Some(want), Some(got)) = (mixed, first.name(), n.ty.name()) {
                                self.report(item.id, format!("expected type '{want}' but found '{got}'"));
                            }
                            mixed = true;
                        }
                        Some(_) => {}
                    }
                }
                let elem = if mixed { Ty::Dyn } else { elem_ty.unwrap_or(Ty::Dyn) };
                Node {
                    ty: Ty::List(Box::new(elem)),
                    decl: None,
                    cost,
                    size: Some(Size::fixed(list.elements.len() as u64)),
                    entry: Some(entry.unwrap_or(Size::fixed(0))),
                }
            }
            Expr::Map(map) => {
                let mut cost = Cost::fixed(MAP_CREATE_BASE_COST);
                let mut entry: Option<Size> = None;
                // The literal's key and value types, as for a list's elements (`Dyn` once
                // mixed; kube's validator reports every key and value of another type than
                // the first entry's).
                let (mut key_ty, mut value_ty): (Joined<'d>, Joined<'d>) = Default::default();
                for item in &map.entries {
                    match &item.expr {
                        EntryExpr::MapEntry(m) => {
                            let k = self.visit(&m.key, false);
                            cost = cost.add(k.cost);
                            let mut v = self.visit(&m.value, false);
                            if m.optional {
                                if let Ty::Optional(t) = v.ty {
                                    v.ty = *t;
                                }
                            }
                            cost = cost.add(v.cost);
                            let s = v.size_or(self.unknown);
                            entry = Some(entry.map_or(s, |x| x.union(s)));
                            self.join_entry(&mut key_ty, k.ty, m.key.id);
                            self.join_entry(&mut value_ty, v.ty, m.value.id);
                        }
                        EntryExpr::StructField(f) => cost = cost.add(self.visit(&f.value, false).cost),
                    }
                }
                Node {
                    ty: Ty::Map(Box::new(key_ty.ty()), Box::new(value_ty.ty())),
                    decl: None,
                    cost,
                    size: Some(Size::fixed(map.entries.len() as u64)),
                    entry: Some(entry.unwrap_or(Size::fixed(0))),
                }
            }
            Expr::Struct(s) => {
                let mut cost = Cost::fixed(40);
                for item in &s.entries {
                    if let EntryExpr::StructField(f) = &item.expr {
                        cost = cost.add(self.visit(&f.value, false).cost);
                    }
                }
                Node::new(Ty::Dyn, cost)
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Unspecified => Node::new(Ty::Dyn, Cost::default()),
        }
    }

    /// Joins the type of one key or value of a map literal into the literal's: another type
    /// than the first entry's is reported as kube's validator of homogeneous literals reports
    /// it, and makes the literal's `Dyn`.
    fn join_entry(&mut self, joined: &mut Joined<'d>, ty: Ty<'d>, id: u64) {
        match &joined.first {
            None => joined.first = Some(ty),
            Some(first) if first.certain() && ty.certain() && *first != ty => {
                if let (Some(want), Some(got)) = (first.name(), ty.name()) {
                    self.report(id, format!("expected type '{want}' but found '{got}'"));
                }
                joined.mixed = true;
            }
            Some(_) => {}
        }
    }

    fn ident(&mut self, id: u64, name: &str, as_target: bool) -> Node<'d> {
        if let Some(node) = self.lookup(name) {
            return node;
        }
        if TYPE_NAMES.contains(&name) {
            return Node::new(Ty::Type, Cost::fixed(SELECT_AND_IDENT_COST));
        }
        if !as_target {
            self.report(id, format!("undeclared reference to '{name}' (in container '')"));
        }
        Node::new(Ty::Dyn, Cost::fixed(SELECT_AND_IDENT_COST))
    }

    fn select(&mut self, id: u64, operand: &Node<'d>, field: &str, test: bool) -> Node<'d> {
        let mut cost = operand.cost;
        // A presence test costs nothing of its own (kube keeps cel-go's old figure).
        if !test && matches!(operand.ty, Ty::Map(..) | Ty::Object(..)) {
            cost = cost.add(Cost::fixed(SELECT_AND_IDENT_COST));
        }
        let field_node = match &operand.ty {
            Ty::Object(name, fields) => match field_of(fields, field) {
                Some((key, decl)) => {
                    let name = if name.is_empty() { name.clone() } else { Rc::from(format!("{name}.{key}")) };
                    Node::of_decl(decl, cost, &name)
                }
                None => {
                    self.report(id, format!("undefined field '{field}'"));
                    Node::new(Ty::Dyn, cost)
                }
            },
            Ty::Map(_, v) => {
                let (decl, size) = operand.element();
                Node { ty: (**v).clone(), decl, cost, size, entry: None }
            }
            t if t.certain() => {
                if let Some(name) = t.name() {
                    self.report(id, format!("type '{name}' does not support field selection"));
                }
                Node::new(Ty::Dyn, cost)
            }
            _ => Node::new(Ty::Dyn, cost),
        };
        if test {
            return Node::new(Ty::Bool, cost);
        }
        field_node
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Node<'d> {
        let range = self.visit(&c.iter_range, false);
        let init = self.visit(&c.accu_init, false);
        let (key, value) = self.iteration_vars(c, &range);
        let pushed = self.vars.len();
        let accu = init.clone();
        self.vars.push(Var { name: c.accu_var.clone(), node: accu });
        match &c.iter_var2 {
            Some(second) => {
                self.vars.push(Var { name: c.iter_var.clone(), node: key });
                self.vars.push(Var { name: second.clone(), node: value });
            }
            None => {
                let single = if matches!(range.ty, Ty::Map(..)) { key } else { value };
                self.vars.push(Var { name: c.iter_var.clone(), node: single });
            }
        }
        let cond = self.visit(&c.loop_cond, false);
        let step = self.visit(&c.loop_step, false);
        self.vars.truncate(pushed + 1);
        let result = self.visit(&c.result, false);
        self.vars.truncate(pushed);
        let count = range.size_or(self.unknown);
        let cost = range.cost.add(init.cost).add(result.cost).add(count.times_cost(step.cost.add(cond.cost)));
        let size = match &c.accu_init.expr {
            Expr::Literal(l) => literal(l).size,
            Expr::List(_) | Expr::Map(_) => Some(count),
            _ => None,
        };
        let ty = match (&result.ty, &c.accu_init.expr) {
            (Ty::List(_), Expr::List(_)) => Ty::List(Box::new(Ty::Dyn)),
            (t, _) => t.clone(),
        };
        Node { ty, decl: None, cost, size, entry: None }
    }

    /// A two-variable comprehension, as cel-go's macro writes it: checked and costed as any
    /// comprehension, its result typed as cel-go's checker infers it from what the macro
    /// builds (a list of the transform's values, a map from the keys or indices to them, or
    /// the transform's maps merged), which the accumulator's start (`[]`, `{}`) does not say.
    fn two_var(&mut self, c: &ComprehensionExpr) -> Node<'d> {
        // The step appends `[transform]` or calls `cel.@mapInsert(..., transform)`, itself or
        // as the `?:` of a filter.
        let step = match &c.loop_step.expr {
            Expr::Call(call) if call.func_name == "_?_:_" => call.args.get(1).unwrap_or(&c.loop_step),
            _ => &c.loop_step,
        };
        let (transform, insert) = match &step.expr {
            Expr::Call(call) if call.func_name == "_+_" => match call.args.get(1).map(|a| &a.expr) {
                Some(Expr::List(item)) => (item.elements.first(), None),
                _ => (None, None),
            },
            Expr::Call(call) if call.func_name == crate::cel_comprehensions::MAP_INSERT => {
                (call.args.last(), Some(step.id))
            }
            _ => (None, None),
        };
        let Some(transform) = transform else { return self.comprehension(c) };
        // Their nodes, kept as the walk passes them (walking them again would walk nested
        // macros once more per level).
        let watched = self.watched.len();
        self.watched.push((transform.id, None));
        if let Some(insert) = insert {
            self.watched.push((insert, None));
        }
        let mut node = self.comprehension(c);
        let mut seen = self.watched.split_off(watched).into_iter().map(|(_, n)| n);
        let body = seen.next().flatten();
        let inserted = seen.next().flatten();
        node.ty = match (inserted, &body) {
            (Some(map), _) => map.ty,
            (None, Some(body)) if insert.is_none() => Ty::List(Box::new(body.ty.clone())),
            _ => node.ty,
        };
        node.entry = body.and_then(|b| b.size);
        node
    }

    /// `cel.@mapInsert` of cel-go's form of `transformMap` (`(map, key, value)`) and
    /// `transformMapEntry` (`(map, map)`): cel-go's cost of a function it has no figure for.
    fn map_insert(&mut self, id: u64, args: &[Node<'d>], base: impl Fn(Cost) -> Cost) -> Node<'d> {
        let ty = match args {
            [accu, key, value] => match &accu.ty {
                Ty::Map(..) => Ty::Map(Box::new(key.ty.clone()), Box::new(value.ty.clone())),
                t => t.clone(),
            },
            [accu, entry] => {
                if entry.ty.certain() && !matches!(entry.ty, Ty::Map(..) | Ty::Null) {
                    let tys = [&accu.ty, &entry.ty];
                    self.no_overload(id, crate::cel_comprehensions::MAP_INSERT, &tys, false);
                }
                entry.ty.clone()
            }
            _ => Ty::Dyn,
        };
        Node::new(ty, base(Cost::fixed(1)))
    }

    /// The nodes of a comprehension's variables: an element of a list range (or, with two
    /// variables, its index and the element), a key of a map range (and its value).
    fn iteration_vars(&mut self, c: &ComprehensionExpr, range: &Node<'d>) -> (Node<'d>, Node<'d>) {
        match &range.ty {
            Ty::List(e) => {
                let (decl, size) = range.element();
                let value = Node { ty: (**e).clone(), decl, cost: Cost::default(), size, entry: None };
                (Node::new(Ty::Int, Cost::default()), value)
            }
            Ty::Map(k, v) => {
                let (decl, size) = range.element();
                let key = Node {
                    ty: (**k).clone(),
                    decl: Some(&MAP_KEY),
                    cost: Cost::default(),
                    size: Some(Size::fixed(0)),
                    entry: None,
                };
                (key, Node { ty: (**v).clone(), decl, cost: Cost::default(), size, entry: None })
            }
            t => {
                if t.certain() {
                    if let Some(name) = t.name() {
                        self.report(
                            c.iter_range.id,
                            format!("expression of type '{name}' cannot be range of a comprehension (must be list, map, or dynamic)"),
                        );
                    }
                }
                (Node::new(Ty::Dyn, Cost::default()), Node::new(Ty::Dyn, Cost::default()))
            }
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> Node<'d> {
        // An expanded two-variable macro: cel-go's form is what kube checks and costs.
        if let Some(two) = crate::cel_comprehensions::TwoVar::of(call) {
            return self.two_var(two.cel_go);
        }
        let f = call.func_name.as_str();
        // A receiver nothing declares names a namespace of functions (`strings.quote(x)`).
        let namespace = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(n)) if self.lookup(n).is_none() && !TYPE_NAMES.contains(&n.as_str()) => Some(n.as_str()),
            _ => None,
        };
        let target = match &call.target {
            Some(t) if namespace.is_none() => Some(self.visit(t, true)),
            _ => None,
        };
        let args: Vec<Node<'d>> = self.visit_args(call, target.is_some());
        let arg_costs = args.iter().fold(Cost::default(), |c, a| c.add(a.cost));
        let target_cost = target.as_ref().map_or(Cost::default(), |t| t.cost);
        let base = |c: Cost| c.add(arg_costs).add(target_cost);
        let tys: Vec<&Ty<'d>> = args.iter().map(|a| &a.ty).collect();
        match (f, args.as_slice()) {
            ("dyn", [a]) if target.is_none() => {
                Node { ty: Ty::Dyn, decl: a.decl, cost: Cost::fixed(1).add(a.cost), size: a.size, entry: a.entry }
            }
            ("_&&_" | "_||_", [l, r]) => {
                // cel-go checks each operand of a logical operator against bool on its own.
                for (arg, t) in call.args.iter().zip([&l.ty, &r.ty]) {
                    if t.certain() && *t != Ty::Bool {
                        if let Some(name) = t.name() {
                            self.report(arg.id, format!("expected type 'bool' but found '{name}'"));
                        }
                    }
                }
                Node::new(Ty::Bool, Cost { min: l.cost.min, max: l.cost.max.saturating_add(r.cost.max) })
            }
            ("_?_:_", [c, t, e]) => {
                if (c.ty.certain() && c.ty != Ty::Bool) || !t.ty.agrees(&e.ty) {
                    self.no_overload(id, f, &tys, false);
                }
                let ty = if t.ty == e.ty { t.ty.clone() } else { Ty::Dyn };
                let size = t.size_or(self.unknown).union(e.size_or(self.unknown));
                let entry = match (t.entry, e.entry) {
                    (Some(a), Some(b)) => Some(a.union(b)),
                    _ => None,
                };
                Node { ty, decl: None, cost: c.cost.add(t.cost.union(e.cost)), size: Some(size), entry }
            }
            ("!_", [a]) => {
                if a.ty.certain() && a.ty != Ty::Bool {
                    self.no_overload(id, f, &tys, false);
                }
                Node::new(Ty::Bool, base(Cost::fixed(1)))
            }
            ("-_", [a]) => {
                if a.ty.certain() && !matches!(a.ty, Ty::Int | Ty::Double) {
                    self.no_overload(id, f, &tys, false);
                }
                let ty = a.ty.clone();
                let scalar = ty.scalar();
                let mut n = Node::new(ty, base(Cost::fixed(1)));
                n.size = scalar.then_some(Size::fixed(1));
                n
            }
            ("_==_" | "_!=_", [l, r]) => {
                // Both sides bind one type parameter: an int is not a double here (kube's
                // checker compares numbers of different types only in order, not equality).
                if !l.ty.agrees(&r.ty) {
                    self.no_overload(id, f, &tys, false);
                }
                Node::new(Ty::Bool, base(compare_cost(l, r, self.unknown)))
            }
            ("_<_" | "_<=_" | "_>_" | "_>=_", [l, r]) => {
                let ordered = |t: &Ty<'_>| {
                    matches!(
                        t,
                        Ty::Int
                            | Ty::Uint
                            | Ty::Double
                            | Ty::String
                            | Ty::Bytes
                            | Ty::Bool
                            | Ty::Duration
                            | Ty::Timestamp
                    )
                };
                if l.ty.certain() && r.ty.certain() {
                    let ok = ordered(&l.ty) && (l.ty == r.ty || (l.ty.numeric() && r.ty.numeric()));
                    if !ok {
                        self.no_overload(id, f, &tys, false);
                    }
                }
                let textual = (l.ty.text() || r.ty.text()) || (l.ty == Ty::Dyn && r.ty == Ty::Dyn);
                let own = if textual { compare_cost(l, r, self.unknown) } else { Cost::fixed(1) };
                Node::new(Ty::Bool, base(own))
            }
            ("_+_", [l, r]) => self.add(id, l, r, &tys, base),
            ("_-_" | "_*_" | "_/_" | "_%_", [l, r]) => {
                let ty = if l.ty.certain() && r.ty.certain() {
                    let result = arithmetic(f, &l.ty, &r.ty);
                    if result.is_none() {
                        self.no_overload(id, f, &tys, false);
                    }
                    result.unwrap_or(Ty::Dyn)
                } else if l.ty == r.ty {
                    l.ty.clone()
                } else {
                    Ty::Dyn
                };
                let mut n = Node::new(ty, base(Cost::fixed(1)));
                n.size = n.ty.scalar().then_some(Size::fixed(1));
                n
            }
            ("@in", [l, r]) => {
                let own = match &r.ty {
                    Ty::List(e) | Ty::Map(e, _) if !l.ty.agrees(e) => {
                        self.no_overload(id, f, &[&l.ty, &r.ty], false);
                        Cost::fixed(1)
                    }
                    Ty::List(_) | Ty::Dyn => r.size_or(self.unknown).times(1.0),
                    Ty::Map(..) => Cost::fixed(1),
                    _ => {
                        self.no_overload(id, f, &[&l.ty, &r.ty], false);
                        Cost::fixed(1)
                    }
                };
                Node::new(Ty::Bool, base(own))
            }
            ("_[_]", [c, i]) => {
                let (ty, decl, size) = match &c.ty {
                    Ty::List(e) => {
                        if !i.ty.agrees(&Ty::Int) {
                            self.no_overload(id, f, &tys, false);
                        }
                        let (decl, size) = c.element();
                        ((**e).clone(), decl, size)
                    }
                    Ty::Map(k, v) => {
                        if !i.ty.agrees(k) {
                            self.no_overload(id, f, &tys, false);
                        }
                        let (decl, size) = c.element();
                        ((**v).clone(), decl, size)
                    }
                    t if t.certain() => {
                        self.no_overload(id, f, &tys, false);
                        (Ty::Dyn, None, None)
                    }
                    _ => (Ty::Dyn, None, None),
                };
                let size = size.or(decl.map(|d| Size { min: 0, max: d.max_elements }));
                let size = size.or(ty.scalar().then_some(Size::fixed(1)));
                Node { ty, decl, cost: base(Cost::fixed(1)), size, entry: None }
            }
            ("@not_strictly_false", [_]) => Node::new(Ty::Bool, base(Cost::fixed(1))),
            (crate::cel_comprehensions::MAP_INSERT, _) if target.is_none() => self.map_insert(id, &args, base),
            ("_?._", [operand, _]) => {
                let field = match call.args.get(1).map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::String(f))) => f.inner().to_string(),
                    _ => String::new(),
                };
                // Selecting on an optional selects on its value, if any.
                let inner = match &operand.ty {
                    Ty::Optional(t) => Node { ty: (**t).clone(), ..operand.clone() },
                    _ => operand.clone(),
                };
                let mut n = self.select(id, &inner, &field, false);
                n.ty = optional(n.ty);
                n.cost = base(Cost::fixed(1));
                n
            }
            ("_[?_]", [c, i]) => {
                let ty = match &c.ty {
                    Ty::List(e) | Ty::Map(_, e) => optional((**e).clone()),
                    Ty::Optional(t) => match &**t {
                        Ty::List(e) | Ty::Map(_, e) => optional((**e).clone()),
                        _ => Ty::Dyn,
                    },
                    _ => Ty::Dyn,
                };
                let _ = i;
                Node::new(ty, base(Cost::fixed(1)))
            }
            _ => self.function(id, call, target.as_ref(), &args, namespace, base),
        }
    }

    /// The arguments of a call. The macros of kube's extensions the parser does not expand
    /// (`optMap`, `optFlatMap`) name their variables in their leading arguments: those are
    /// bound, of unknown type, for the last one.
    fn visit_args(&mut self, call: &CallExpr, member: bool) -> Vec<Node<'d>> {
        let binds = member
            && MACROS_WITH_VARIABLES.contains(&call.func_name.as_str())
            && call.args.len() >= 2
            && call.args[..call.args.len() - 1].iter().all(|a| matches!(a.expr, Expr::Ident(_)));
        if !binds {
            return call.args.iter().map(|a| self.visit(a, false)).collect();
        }
        let pushed = self.vars.len();
        let mut out = Vec::new();
        for a in &call.args[..call.args.len() - 1] {
            if let Expr::Ident(name) = &a.expr {
                self.vars.push(Var { name: name.clone(), node: Node::new(Ty::Dyn, Cost::default()) });
            }
            out.push(Node::new(Ty::Dyn, Cost::default()));
        }
        if let Some(last) = call.args.last() {
            out.push(self.visit(last, false));
        }
        self.vars.truncate(pushed);
        out
    }

    fn add(&mut self, id: u64, l: &Node<'d>, r: &Node<'d>, tys: &[&Ty<'d>], base: impl Fn(Cost) -> Cost) -> Node<'d> {
        let size = l.size_or(self.unknown).add(r.size_or(self.unknown));
        let ty = if l.ty.certain() && r.ty.certain() {
            let result = match (&l.ty, &r.ty) {
                (Ty::List(a), Ty::List(b)) if a.agrees(b) => {
                    Some(Ty::List(Box::new(if a == b { (**a).clone() } else { Ty::Dyn })))
                }
                (Ty::List(_), Ty::List(_)) => None,
                (a, b) => arithmetic("_+_", a, b),
            };
            if result.is_none() {
                self.no_overload(id, "_+_", tys, false);
            }
            result.unwrap_or(Ty::Dyn)
        } else if l.ty == r.ty {
            l.ty.clone()
        } else {
            Ty::Dyn
        };
        let entry = match (l.entry, r.entry) {
            (Some(a), Some(b)) => Some(a.union(b)),
            _ => None,
        };
        let textual = ty.text() || (ty == Ty::Dyn && (l.ty.text() || r.ty.text()));
        let (own, size) = match &ty {
            Ty::List(_) => (Cost::fixed(1), Some(size)),
            _ if textual => (size.times(STRING_TRAVERSAL_COST_FACTOR), Some(size)),
            t => (Cost::fixed(1), t.scalar().then_some(Size::fixed(1))),
        };
        Node { ty, decl: None, cost: base(own), size, entry }
    }

    /// Any other function: the standard ones' types are checked where certain, and every
    /// one costs what [`call_cost`] says.
    fn function(
        &mut self,
        id: u64,
        call: &CallExpr,
        target: Option<&Node<'d>>,
        args: &[Node<'d>],
        namespace: Option<&str>,
        base: impl Fn(Cost) -> Cost,
    ) -> Node<'d> {
        let f = call.func_name.as_str();
        let qualified = namespace.map(|ns| format!("{ns}.{f}"));
        let name = qualified.as_deref().unwrap_or(f);
        let newer = self.expressions == Expressions::New && crate::cel_signatures::STORED_ONLY.contains(&name);
        let resolved = if newer { None } else { self.resolve(id, name, target, args) };
        let ty = resolved.unwrap_or_else(|| {
            // A function nothing declares (kube's other libraries aside); a namespaced name's
            // namespace may be a variable of a macro this walk does not follow.
            if namespace.is_none() && !MACROS_WITH_VARIABLES.contains(&f) && !DECLARED_ELSEWHERE.contains(&f) {
                self.report(id, format!("undeclared reference to '{f}' (in container '')"));
            }
            Ty::Dyn
        });
        let mut operands: Vec<Operand> = args.iter().map(|a| a.operand(self.unknown)).collect();
        for (o, a) in operands.iter_mut().zip(&call.args) {
            if let Expr::Literal(LiteralValue::Int(n)) = &a.expr {
                o.int_literal = Some(*n.inner());
            }
        }
        let target_operand = target.map(|t| t.operand(self.unknown));
        let (own, result_size) = call_cost(name, target_operand.as_ref(), &operands);
        let size = result_size.or(ty.scalar().then_some(Size::fixed(1)));
        Node { ty, decl: None, cost: base(own), size, entry: None }
    }
}

impl<'d> Walk<'d, '_> {
    /// The result type of a call of `function` on the declared overloads, reporting cel-go's
    /// error when none takes the arguments; `None` when nothing here declares the function.
    fn resolve(&mut self, id: u64, function: &str, target: Option<&Node<'d>>, args: &[Node<'d>]) -> Option<Ty<'d>> {
        let all: Vec<&Ty<'d>> = target.into_iter().chain(args).map(|n| &n.ty).collect();
        let mut declared = false;
        let mut result: Option<Ty<'d>> = None;
        for o in crate::cel_signatures::overloads(function) {
            declared = true;
            if o.member != target.is_some() || o.params.len() != all.len() {
                continue;
            }
            let mut a = None;
            if o.params.iter().zip(&all).all(|(p, t)| t.binds(p, &mut a)) {
                let ty = Ty::of_param(&o.result, &a);
                // Several overloads that fit: the result is known only when they agree.
                result = Some(match result {
                    None => ty,
                    Some(r) if r == ty => r,
                    Some(_) => Ty::Dyn,
                });
            }
        }
        if !declared {
            return None;
        }
        if result.is_none() {
            self.no_overload(id, function, &all, target.is_some());
        }
        Some(result.unwrap_or(Ty::Dyn))
    }
}

/// An optional of `t`; of `dyn`, `dyn`.
fn optional(t: Ty<'_>) -> Ty<'_> {
    match t {
        Ty::Dyn | Ty::Type => Ty::Dyn,
        t => Ty::Optional(Box::new(t)),
    }
}

/// A literal's type, and its size (characters of a string, bytes of bytes, else 1).
fn literal<'d>(lit: &LiteralValue) -> Node<'d> {
    let (ty, size) = match lit {
        LiteralValue::Boolean(_) => (Ty::Bool, 1),
        LiteralValue::Bytes(b) => (Ty::Bytes, b.inner().len() as u64),
        LiteralValue::Double(_) => (Ty::Double, 1),
        LiteralValue::Int(_) => (Ty::Int, 1),
        LiteralValue::Null => (Ty::Null, 1),
        LiteralValue::String(s) => (Ty::String, s.inner().chars().count() as u64),
        LiteralValue::UInt(_) => (Ty::Uint, 1),
    };
    let mut n = Node::new(ty, Cost::default());
    n.size = Some(Size::fixed(size));
    n
}

/// What comparing two values costs: the shorter one's length, walked (cel-go's figure for
/// equality of any type and for ordering strings and bytes).
fn compare_cost(l: &Node<'_>, r: &Node<'_>, unknown: Size) -> Cost {
    let smallest = l.size_or(unknown).max.min(r.size_or(unknown).max);
    Cost { min: u64::from(smallest > 0), max: smallest }.times(STRING_TRAVERSAL_COST_FACTOR)
}

/// The result type of an arithmetic operator on two known types, `None` when there is no
/// such overload.
fn arithmetic<'d>(op: &str, l: &Ty<'d>, r: &Ty<'d>) -> Option<Ty<'d>> {
    use Ty::{Bytes, Double, Duration, Int, String, Timestamp, Uint};
    let same_numeric = l == r && matches!(l, Int | Uint | Double);
    match (op, l, r) {
        ("_+_", String, String) | ("_+_", Bytes, Bytes) => Some(l.clone()),
        ("_+_", Timestamp, Duration) | ("_+_", Duration, Timestamp) => Some(Timestamp),
        ("_+_" | "_-_", Duration, Duration) => Some(Duration),
        ("_-_", Timestamp, Timestamp) => Some(Duration),
        ("_-_", Timestamp, Duration) => Some(Timestamp),
        ("_%_", _, _) => (l == r && matches!(l, Int | Uint)).then(|| l.clone()),
        _ => same_numeric.then(|| l.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn rule_type(t: &str) -> Value {
        match t {
            "duration" | "date" | "date-time" => json!({"type": "string", "format": t}),
            "int-or-string" => json!({"x-kubernetes-int-or-string": true}),
            t => json!({"type": t}),
        }
    }

    fn with(mut v: Value, key: &str, max: Option<i64>) -> Value {
        if let Some(m) = max {
            v[key] = json!(m);
        }
        v
    }

    fn array(item: &str) -> impl Fn(Option<i64>) -> Value + '_ {
        move |m| with(json!({"type": "array", "items": rule_type(item)}), "maxItems", m)
    }

    fn map(value: &str) -> impl Fn(Option<i64>) -> Value + '_ {
        move |m| with(json!({"type": "object", "additionalProperties": rule_type(value)}), "maxProperties", m)
    }

    fn string(m: Option<i64>) -> Value {
        with(json!({"type": "string"}), "maxLength", m)
    }

    fn object_item() -> Value {
        json!({"type": "object", "required": ["required"],
            "properties": {"required": {"type": "string"}, "optional": {"type": "string"}}})
    }

    fn cost(schema: &Value, rule: &str) -> u64 {
        let decl = crate::cel_decl::of_schema(schema, false).expect("a typed schema");
        let program = crate::cel_parse::compile(rule).expect("a rule that parses");
        let checked = check(&program, rule, &decl, OldSelf::Value);
        assert_eq!(checked.issues, None, "{rule}");
        checked.max_cost
    }

    /// Kubernetes' own table of estimated costs (its compilation tests): each rule on a
    /// schema without limits, and with limits set to the figure given.
    #[test]
    fn estimates_match_kubernetes_figures() {
        type Gen<'a> = Box<dyn Fn(Option<i64>) -> Value + 'a>;
        let cases: Vec<(&str, Gen<'_>, &str, u64, i64, u64)> = vec![
            ("number array with all", Box::new(array("number")), "self.all(x, true)", 4718591, 10, 32),
            ("string array with all", Box::new(array("string")), "self.all(x, true)", 3145727, 20, 62),
            ("boolean array with all", Box::new(array("boolean")), "self.all(x, true)", 1887437, 5, 17),
            (
                "array of number arrays with all",
                Box::new(|m| {
                    with(
                        json!({"type": "array", "items": {"type": "array", "items": {"type": "number"}}}),
                        "maxItems",
                        m,
                    )
                }),
                "self.all(x, true)",
                3145727,
                100,
                302,
            ),
            (
                "array of objects with all",
                Box::new(|m| with(json!({"type": "array", "items": object_item()}), "maxItems", m)),
                "self.all(x, true)",
                555128,
                50,
                152,
            ),
            ("map of numbers with all", Box::new(map("number")), "self.all(x, true)", 1348169, 10, 32),
            ("map of strings with all", Box::new(map("string")), "self.all(x, true)", 1179647, 3, 11),
            ("map of booleans with all", Box::new(map("boolean")), "self.all(x, true)", 943718, 100, 302),
            ("string with contains", Box::new(string), "self.contains('test')", 314574, 10, 5),
            ("string with startsWith", Box::new(string), "self.startsWith('test')", 2, 15, 2),
            ("string with endsWith", Box::new(string), "self.endsWith('test')", 2, 30, 2),
            ("concat string", Box::new(string), r#"size(self + "hello") > size("hello")"#, 314578, 4, 7),
            ("index of array with numbers", Box::new(array("number")), "self[1] == 0.0", 2, 5000, 2),
            ("index of array with strings", Box::new(array("string")), "self[1] == self[1]", 314577, 8, 314577),
            ("regex matches simple", Box::new(string), r#"self.matches("x")"#, 314574, 50, 22),
            ("regex matches empty string", Box::new(string), r#""".matches("(((((((((())))))))))[0-9]")"#, 7, 10, 7),
            ("regex matches empty regex", Box::new(string), r#"self.matches("")"#, 1, 100, 1),
            (
                "map of strings with value length",
                Box::new(|m| {
                    with(
                        json!({"type": "object", "additionalProperties": with(json!({"type": "string"}), "maxLength", m)}),
                        "maxProperties",
                        m,
                    )
                }),
                "self.all(x, x.contains(self[x]))",
                2752507,
                10,
                72,
            ),
            ("set array maxLength to zero", Box::new(array("number")), "self[3] == 0.0", 2, 0, 2),
            ("set map maxLength to zero", Box::new(map("number")), r#"self["x"] == 0.0"#, 2, 0, 2),
            ("set string maxLength to zero", Box::new(string), r#"self == "x""#, 2, 0, 1),
            (
                "set bytes maxLength to zero",
                Box::new(|m| with(json!({"type": "string", "format": "byte"}), "maxLength", m)),
                r#"self == b"x""#,
                2,
                0,
                1,
            ),
            (
                "set maxLength greater than estimated maxLength",
                Box::new(array("number")),
                "self.all(x, x == 0.0)",
                6291454,
                3 * 1024 * 2048,
                25165826,
            ),
            ("int-or-string array with all", Box::new(array("int-or-string")), "self.all(x, true)", 4718591, 10, 32),
            ("index of array with int-or-strings", Box::new(array("int-or-string")), "self[0] == 5", 3, 10, 3),
            ("index of array with booleans", Box::new(array("boolean")), "self[0] == false", 2, 25, 2),
            (
                "index of array of objects",
                Box::new(|m| with(json!({"type": "array", "items": object_item()}), "maxItems", m)),
                "self[0] == null",
                2,
                422,
                2,
            ),
            (
                "index of array of array of numbers",
                Box::new(|m| {
                    with(
                        json!({"type": "array", "items": {"type": "array", "items": {"type": "number"}}}),
                        "maxItems",
                        m,
                    )
                }),
                "self[0][0] == -1.0",
                3,
                51,
                3,
            ),
            ("duration array with all", Box::new(array("duration")), "self.all(x, true)", 2359295, 5, 17),
            ("index of duration array", Box::new(array("duration")), "self[0] == duration('1s')", 4, 525, 4),
            ("date array with all", Box::new(array("date")), "self.all(x, true)", 725936, 15, 47),
            ("date-time array with all", Box::new(array("date-time")), "self.all(x, true)", 428963, 25, 77),
            ("map of int-or-strings with all", Box::new(map("int-or-string")), "self.all(x, true)", 1348169, 15, 47),
            (
                "map of objects with all",
                Box::new(|m| {
                    with(json!({"type": "object", "additionalProperties": object_item()}), "maxProperties", m)
                }),
                "self.all(x, true)",
                428963,
                20,
                62,
            ),
            ("map of durations with all", Box::new(map("duration")), "self.all(x, true)", 1048577, 5, 17),
            ("map of dates with all", Box::new(map("date")), "self.all(x, true)", 524288, 10, 32),
            ("map of date-times with all", Box::new(map("date-time")), "self.all(x, true)", 349526, 25, 77),
            ("extended library regex find", Box::new(string), "self.find('[0-9]+') == ''", 629147, 10, 11),
            (
                "extended library join",
                Box::new(|m| with(json!({"type": "array", "items": string(m)}), "maxItems", m)),
                "self.join(' ') == 'aa bb'",
                329853068905,
                10,
                43,
            ),
            (
                "extended library isSorted",
                Box::new(|m| with(json!({"type": "array", "items": string(m)}), "maxItems", m)),
                "self.isSorted() == true",
                329854432052,
                10,
                52,
            ),
            (
                "extended library replace",
                Box::new(|m| {
                    json!({"type": "object", "properties": {"str": string(m),
                        "before": {"type": "string", "maxLength": 2}, "after": {"type": "string", "maxLength": 4}}})
                }),
                "self.str.replace(self.before, self.after) == 'does not matter'",
                629154,
                4,
                12,
            ),
            (
                "extended library split",
                Box::new(|m| json!({"type": "object", "properties": {"str": string(m), "separator": string(m)}})),
                "self.str.split(self.separator) == []",
                629160,
                10,
                22,
            ),
            ("extended library lowerAscii", Box::new(string), "self.lowerAscii() == 'lower!'", 314575, 10, 6),
            ("check cost of size call", Box::new(map("integer")), "oldSelf.size() == self.size()", 5, 10, 5),
            ("check cost of timestamp comparison", Box::new(map("date-time")), r#"self["a"] == self["b"]"#, 8, 7, 8),
            ("check cost of duration comparison", Box::new(map("duration")), r#"self["c"] == self["d"]"#, 8, 42, 8),
            (
                "enums with maxLength equals to the longest possible value",
                Box::new(|m| with(json!({"type": "string", "enum": ["A", "B", "C", "LongValue"]}), "maxLength", m)),
                "self.contains('A')",
                2,
                1000,
                401,
            ),
            (
                "IntOrString type with quantity rule",
                Box::new(|m| with(json!({"x-kubernetes-int-or-string": true}), "maxLength", m)),
                "isQuantity(self)",
                314574,
                20,
                9,
            ),
        ];
        let mut wrong = Vec::new();
        for (name, schema, rule, calc, limit, set) in &cases {
            let got = (cost(&schema(None), rule), cost(&schema(Some(*limit)), rule));
            if got != (*calc, *set) {
                wrong.push(format!("{name}: want ({calc}, {set}), got {got:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // A bool computed by an operator is of size 1 (cel-go sizes scalars), so comparing two
        // of them costs 1, not an unknown size: pairwise checks of a bounded list stay cheap.
        let refs = json!({"type": "array", "maxItems": 32, "items": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 253}, "section": {"type": "string", "maxLength": 253}}}});
        let pairwise = "self.all(a, self.all(b, a.name == b.name ? ((!has(a.section) || a.section == '') == (!has(b.section) || b.section == '')) : true))";
        assert!(cost(&refs, pairwise) < 1_000_000);
        // Nested loops exceed the per-rule limit without limits, and cost what kube says with.
        assert!(cost(&array("number")(None), "self.all(x, self.all(y, true))") > crate::cel_cost::PER_CALL_LIMIT);
        assert_eq!(cost(&array("number")(Some(10)), "self.all(x, self.all(y, true))"), 352);
        assert_eq!(cost(&array("number")(Some(10)), "self.all(x, self.all(y, self.all(z, true)))"), 3552);
    }

    fn issues(schema: &Value, rule: &str) -> Option<String> {
        let decl = crate::cel_decl::of_schema(schema, true).expect("a typed schema");
        let program = crate::cel_parse::compile(rule).expect("a rule that parses");
        check(&program, rule, &decl, OldSelf::Value).issues
    }

    /// Calls of library functions on arguments no overload takes, refused in cel-go's words;
    /// calls their declarations allow, passed.
    #[test]
    fn library_calls_are_checked_against_their_declarations() {
        let spec = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "replicas": {"type": "integer"}, "ratio": {"type": "number"},
            "ports": {"type": "array", "items": {"type": "integer"}},
            "flags": {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "any": {"x-kubernetes-int-or-string": true}}});
        let refused = |rule: &str| issues(&spec, rule).unwrap_or_else(|| panic!("{rule}: passed"));
        let first_line = |rule: &str| refused(rule).lines().next().unwrap_or("").to_string();
        assert_eq!(
            refused("self.name.indexOf(1) > 0"),
            "ERROR: <input>:1:18: found no matching overload for 'indexOf' applied to 'string.(int)'\n | self.name.indexOf(1) > 0\n | .................^"
        );
        for (rule, error) in [
            ("url(1).getHost() == ''", "ERROR: <input>:1:4: found no matching overload for 'url' applied to '(int)'"),
            (
                "quantity(self.replicas).isInteger()",
                "ERROR: <input>:1:9: found no matching overload for 'quantity' applied to '(int)'",
            ),
            (
                "self.flags.isSorted()",
                "ERROR: <input>:1:20: found no matching overload for 'isSorted' applied to 'list(list(bool)).()'",
            ),
            (
                "self.ports.indexOf('80') >= 0",
                "ERROR: <input>:1:19: found no matching overload for 'indexOf' applied to 'list(int).(string)'",
            ),
            (
                "self.name.quantity().isInteger()",
                "ERROR: <input>:1:19: found no matching overload for 'quantity' applied to 'string.()'",
            ),
            (
                "quantity(self.name) < quantity('1')",
                "ERROR: <input>:1:21: found no matching overload for '_<_' applied to '(kubernetes.Quantity, kubernetes.Quantity)'",
            ),
            (
                "ip(self.name).family() == '4'",
                "ERROR: <input>:1:24: found no matching overload for '_==_' applied to '(int, string)'",
            ),
            (
                "cidr(self.name).containsIP(1)",
                "ERROR: <input>:1:27: found no matching overload for 'containsIP' applied to 'net.CIDR.(int)'",
            ),
            (
                "sets.contains(self.ports, ['a'])",
                "ERROR: <input>:1:14: found no matching overload for 'sets.contains' applied to '(list(int), list(string))'",
            ),
            (
                "self.name.split(',', '2').size() > 0",
                "ERROR: <input>:1:16: found no matching overload for 'split' applied to 'string.(string, string)'",
            ),
            (
                "semver(self.name).isLessThan(quantity('1'))",
                "ERROR: <input>:1:29: found no matching overload for 'isLessThan' applied to 'kubernetes.Semver.(kubernetes.Quantity)'",
            ),
            (
                "self.ports.sum() == 1.0",
                "ERROR: <input>:1:18: found no matching overload for '_==_' applied to '(int, double)'",
            ),
            ("int(self.ports) > 0", "ERROR: <input>:1:4: found no matching overload for 'int' applied to '(list(int))'"),
            (
                "self.name.find(1) == ''",
                "ERROR: <input>:1:15: found no matching overload for 'find' applied to 'string.(int)'",
            ),
            (
                "format.dns1123Label().validate(self.replicas).hasValue()",
                "ERROR: <input>:1:31: found no matching overload for 'validate' applied to 'kubernetes.NamedFormat.(int)'",
            ),
        ] {
            assert_eq!(first_line(rule), error, "{rule}");
        }
        for fine in [
            "self.name.indexOf('a') >= 0 && self.ports.indexOf(80) >= 0 && self.name.indexOf('a', 1) >= 0",
            "url(self.name).getQuery()['a'][0] == 'b' && isURL(self.name)",
            "quantity(self.name).add(1).isLessThan(quantity('1')) && quantity(self.name).compareTo(quantity('2')) < 0",
            "ip(self.name).family() == 4 && cidr(self.name).containsIP(ip(self.name)) && cidr(self.name).containsIP(self.name)",
            "string(ip(self.name)) == self.name && string(cidr(self.name).masked()) == self.name",
            "self.ports.isSorted() && self.ports.sum() < 10 && self.ports.max() > self.ports.min()",
            "sets.contains(self.ports, [1]) && sets.intersects(self.ports, self.ports)",
            "semver(self.name, true).isGreaterThan(semver('1.0.0')) && semver(self.name).major() == 1",
            "self.name.split(',').join('-') == self.name && self.name.substring(1, 2).trim() == ''",
            "'%s'.format([self.name]) == strings.quote(self.name)",
            "format.named(self.name).hasValue() && format.dns1123Label().validate(self.name).hasValue()",
            "self.any.indexOf('a') > 0 && quantity(self.any).isInteger() && int(self.any) > 0",
            "duration(self.name).getHours() > 1 && timestamp(self.name).getFullYear('UTC') > 1",
            "self.labels.all(k, k.startsWith('a') && self.labels[k].endsWith('b'))",
            "size(self.labels) > 0 && self.name.size() > 0 && matches(self.name, '^a') && self.name.matches('a')",
            "self.replicas < self.ratio && double(self.replicas) == self.ratio && self.ratio > 1",
            "(self.replicas > 1 ? self.name : 'x') == 'x' && (self.replicas > 1 ? self.any : 1) == 1",
            "dyn(self.replicas) == self.ratio && dyn(self.name) != null",
            "self.ports == [] && self.labels == {} && [1, 2] == self.ports",
        ] {
            assert_eq!(issues(&spec, fine), None, "{fine}");
        }
    }

    /// A function nothing declares is an undeclared reference, as in kube.
    #[test]
    fn undeclared_functions_are_refused() {
        let spec = json!({"type": "object", "properties": {"name": {"type": "string"},
            "ports": {"type": "array", "items": {"type": "integer"}}}});
        assert_eq!(
            issues(&spec, "self.name.lenght() > 1").as_deref(),
            Some("ERROR: <input>:1:17: undeclared reference to 'lenght' (in container '')\n | self.name.lenght() > 1\n | ................^")
        );
        assert!(issues(&spec, "lower(self.name) == 'a'").is_some_and(|i| i.contains("undeclared reference to 'lower'")));
        // kube's list extension and lists' `includes` come after the version served.
        assert_eq!(
            issues(&spec, "self.ports.includes(1)").as_deref(),
            Some("ERROR: <input>:1:20: undeclared reference to 'includes' (in container '')\n | self.ports.includes(1)\n | ...................^")
        );
        for later in
            ["self.ports.distinct() == self.ports", "self.ports.sort()[0] == 1", "self.ports.slice(0, 1) == []"]
        {
            assert!(issues(&spec, later).is_some_and(|i| i.contains("undeclared reference to '")), "{later}");
        }
        let sort_by = issues(&spec, "self.ports.sortBy(p, -p).size() > 0").expect("findings");
        assert!(
            sort_by.contains("undeclared reference to 'sortBy'") && sort_by.contains("undeclared reference to 'p'")
        );
        assert_eq!(issues(&spec, "self.ports.all(i, p, p > i)"), None);
    }

    /// Operators whose operands must be of one type: `?:` branches, equality, `in`, indexes.
    #[test]
    fn operands_of_one_type_are_checked() {
        let spec = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "replicas": {"type": "integer"},
            "ports": {"type": "array", "items": {"type": "integer"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
        for (rule, error) in [
            (
                "(self.replicas > 1 ? 1 : 'a') == 1",
                "ERROR: <input>:1:20: found no matching overload for '_?_:_' applied to '(bool, int, string)'",
            ),
            (
                "self.replicas == 1.0",
                "ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(int, double)'",
            ),
            (
                "self.replicas != 1u",
                "ERROR: <input>:1:15: found no matching overload for '_!=_' applied to '(int, uint)'",
            ),
            (
                "self.ports == ['80']",
                "ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(list(int), list(string))'",
            ),
            (
                "self.name in self.ports",
                "ERROR: <input>:1:11: found no matching overload for '@in' applied to '(string, list(int))'",
            ),
            (
                "self.ports['a'] > 0",
                "ERROR: <input>:1:11: found no matching overload for '_[_]' applied to '(list(int), string)'",
            ),
            (
                "self.ports[0u] > 0",
                "ERROR: <input>:1:11: found no matching overload for '_[_]' applied to '(list(int), uint)'",
            ),
            (
                "self.labels[1] == ''",
                "ERROR: <input>:1:12: found no matching overload for '_[_]' applied to '(map(string, string), int)'",
            ),
        ] {
            let issues = issues(&spec, rule).unwrap_or_else(|| panic!("{rule}: passed"));
            assert_eq!(issues.lines().next(), Some(error), "{rule}");
        }
    }

    /// Optional values as kube's checker types them: `.?` selections and `[?]` indexes, the
    /// optional functions, and `oldSelf` of a rule with `optionalOldSelf`.
    #[test]
    fn optional_values_are_typed() {
        let spec = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "replicas": {"type": "integer"},
            "ports": {"type": "array", "items": {"type": "integer"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
        let decl = crate::cel_decl::of_schema(&spec, false).expect("typed");
        let issues = |rule: &str, old: OldSelf| {
            let program = crate::cel_parse::compile(rule).unwrap_or_else(|e| panic!("{rule}: {e:?}"));
            check(&program, rule, &decl, old).issues.map(|i| i.lines().next().unwrap_or("").to_string())
        };
        for fine in [
            "self.?name.orValue('') == 'a' && self.?name.hasValue() && self.?name.value().size() > 0",
            "self.ports[?0].orValue(1) > 0 && self.labels[?'a'].or(optional.of('b')).value() == 'b'",
            "self.?labels.?a.orValue('') == '' && [?self.?name] == ['a'] && optional.none().orValue(1) == 1",
            "optional.ofNonZeroValue(self.replicas).hasValue() && self.?ports.orValue([]).size() == 0",
        ] {
            assert_eq!(issues(fine, OldSelf::Value), None, "{fine}");
        }
        assert_eq!(issues("!oldSelf.hasValue() || self.replicas >= oldSelf.value().replicas", OldSelf::Optional), None);
        assert_eq!(issues("oldSelf.?replicas.orValue(0) <= self.replicas", OldSelf::Optional), None);
        for (rule, old, error) in [
            (
                "self.?name.orValue(1) == 1",
                OldSelf::Value,
                "ERROR: <input>:1:19: found no matching overload for 'orValue' applied to 'optional_type(string).(int)'",
            ),
            ("self.?nom.hasValue()", OldSelf::Value, "ERROR: <input>:1:5: undefined field 'nom'"),
            (
                "optional.of(1).or(optional.of('a')).hasValue()",
                OldSelf::Value,
                "ERROR: <input>:1:18: found no matching overload for 'or' applied to 'optional_type(int).(optional_type(string))'",
            ),
            (
                "self.?replicas > 1",
                OldSelf::Value,
                "ERROR: <input>:1:16: found no matching overload for '_>_' applied to '(optional_type(int), int)'",
            ),
            (
                "self.name.hasValue()",
                OldSelf::Value,
                "ERROR: <input>:1:19: found no matching overload for 'hasValue' applied to 'string.()'",
            ),
        ] {
            assert_eq!(issues(rule, old).as_deref(), Some(error), "{rule}");
        }
    }

    /// Kubernetes' own cases of fields of unknown type (its validation tests): what rules may
    /// and may not select.
    #[test]
    fn unknown_fields_are_undefined_as_in_kube() {
        let unknown = json!({"x-kubernetes-preserve-unknown-fields": true});
        let object = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let schema = json!({"type": "object", "properties": {
            "withUnknown": object,
            "withUnknownList": {"type": "array", "items": object},
            "withUnknownFieldList": {"type": "array", "items": {"type": "object",
                "properties": {"fieldOfUnknownType": unknown}}},
            "anyvalList": {"type": "array", "items": unknown},
            "anyvalMap": {"type": "object", "additionalProperties": unknown},
            "anyvalField1": unknown, "anyvalField2": unknown}});
        let decl = crate::cel_decl::of_schema(&schema, false).expect("typed");
        let check_rule = |rule: &str| {
            let program = cel::Program::compile(rule).expect("parses");
            check(&program, rule, &decl, OldSelf::Value).issues
        };
        for valid in [
            "has(self.withUnknown)",
            "self.withUnknownList.size() == 5",
            "self.withUnknownList[0] != self.withUnknownList[1]",
            "self.withUnknownFieldList[1] == self.withUnknownFieldList[2]",
        ] {
            assert_eq!(check_rule(valid), None, "{valid}");
        }
        for (rule, error) in [
            ("has(self.withUnknown.field1)", "undefined field 'field1'"),
            ("has(self.anyvalList)", "undefined field 'anyvalList'"),
            ("has(self.anyvalMap)", "undefined field 'anyvalMap'"),
            ("has(self.anyvalField1)", "undefined field 'anyvalField1'"),
            ("has(self.anyvalField2)", "undefined field 'anyvalField2'"),
        ] {
            let issues = check_rule(rule).unwrap_or_default();
            assert!(issues.contains(error), "{rule}: {issues}");
        }
    }

    #[test]
    fn type_errors_read_as_kube_reports_them() {
        let spec = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"}, "name": {"type": "string"},
            "ports": {"type": "array", "items": {"type": "integer"}},
            "any": {"x-kubernetes-int-or-string": true}}}}});
        assert_eq!(
            issues(&spec, "self.spec.foo == 1").as_deref(),
            Some("ERROR: <input>:1:10: undefined field 'foo'\n | self.spec.foo == 1\n | .........^")
        );
        assert_eq!(
            issues(&spec, "has(self.spec.bar) && x > 1").as_deref(),
            Some(
                "ERROR: <input>:1:4: undefined field 'bar'\n | has(self.spec.bar) && x > 1\n | ...^\n\
                 ERROR: <input>:1:23: undeclared reference to 'x' (in container '')\n | has(self.spec.bar) && x > 1\n | ......................^"
            )
        );
        assert_eq!(
            issues(&spec, "self.spec.replicas + self.spec.name == 'a'").as_deref(),
            Some(
                "ERROR: <input>:1:20: found no matching overload for '_+_' applied to '(int, string)'\n | self.spec.replicas + self.spec.name == 'a'\n | ...................^"
            )
        );
        assert_eq!(
            issues(&spec, "[1, 'a'].all(x, true)").as_deref(),
            Some("ERROR: <input>:1:5: expected type 'int' but found 'string'\n | [1, 'a'].all(x, true)\n | ....^")
        );
        // The root's metadata is name and generateName only; unknown types pass.
        assert!(issues(&spec, "has(self.metadata.namespace)")
            .expect("findings")
            .contains("undefined field 'namespace'"));
        for fine in [
            "self.spec.any == 'a' || self.spec.any > 1",
            "self.spec.ports.all(p, p > 0 && p < 65536)",
            "self.metadata.name.startsWith('a') && self.kind == 'X'",
            "self.spec.name.matches('^a') && size(self.spec.ports) < 3",
            "type(self.spec.replicas) == int && quantity(self.spec.name).isLessThan(quantity('1'))",
            "self.spec.ports.map(p, p * 2).exists(q, q == 4)",
            "self.spec.ports.all(i, p, p > i)",
        ] {
            assert_eq!(issues(&spec, fine), None, "{fine}");
        }
        let decl = crate::cel_decl::of_schema(&spec, true).expect("typed");
        let program = cel::Program::compile("self.spec.replicas + 1").expect("parses");
        assert!(check(&program, "", &decl, OldSelf::Value).not_bool());
    }
    /// kube's generated name of the type of `self` (`selfType` and the clock's nanoseconds)
    /// made `selfTypeN`, so that messages can be compared.
    fn generic_self_type(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("selfType") {
            out.push_str(&rest[..at + "selfType".len()]);
            rest = rest[at + "selfType".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
            out.push('N');
        }
        out.push_str(rest);
        out
    }

    /// Schema objects are of types of their own, named by their path from `self`'s generated
    /// name as kube names them, and agree only with themselves; `null` only with what cel-go
    /// lets be null (objects, durations, timestamps, optional values, values of unknown type).
    #[test]
    fn schema_objects_and_null_are_typed_as_kube_types_them() {
        let named = json!({"type": "object", "properties": {"n": {"type": "string"}}});
        let spec = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"}, "name": {"type": "string"},
            "template": named, "other": named,
            "items": {"type": "array", "items": named},
            "byName": {"type": "object", "additionalProperties": named},
            "timeout": {"type": "string", "format": "duration"},
            "any": {"x-kubernetes-int-or-string": true}}}}});
        let first_line = |rule: &str| {
            let issues = issues(&spec, rule).unwrap_or_else(|| panic!("{rule}: passed"));
            generic_self_type(issues.lines().next().unwrap_or(""))
        };
        for (rule, error) in [
            (
                "self.spec == 1",
                "ERROR: <input>:1:11: found no matching overload for '_==_' applied to '(selfTypeN.spec, int)'",
            ),
            (
                "self.spec.template == self.spec.other",
                "ERROR: <input>:1:20: found no matching overload for '_==_' applied to '(selfTypeN.spec.template, selfTypeN.spec.other)'",
            ),
            (
                "self.spec.items[0] != self.spec.byName['a']",
                "ERROR: <input>:1:20: found no matching overload for '_!=_' applied to '(selfTypeN.spec.items.@idx, selfTypeN.spec.byName.@elem)'",
            ),
            ("size(self.spec) > 0", "ERROR: <input>:1:5: found no matching overload for 'size' applied to '(selfTypeN.spec)'"),
            (
                "self.spec.name.startsWith(self.spec.template)",
                "ERROR: <input>:1:26: found no matching overload for 'startsWith' applied to 'string.(selfTypeN.spec.template)'",
            ),
            (
                "(self.spec.replicas > 1 ? self.spec : 'a') == self.spec",
                "ERROR: <input>:1:25: found no matching overload for '_?_:_' applied to '(bool, selfTypeN.spec, string)'",
            ),
            (
                "self.spec['name'] == ''",
                "ERROR: <input>:1:10: found no matching overload for '_[_]' applied to '(selfTypeN.spec, string)'",
            ),
            (
                "'a' in self.spec",
                "ERROR: <input>:1:5: found no matching overload for '@in' applied to '(string, selfTypeN.spec)'",
            ),
            (
                "self.spec.items + [self.spec] == []",
                "ERROR: <input>:1:17: found no matching overload for '_+_' applied to '(list(selfTypeN.spec.items.@idx), list(selfTypeN.spec))'",
            ),
            (
                "self.spec.replicas > 1 && self.spec",
                "ERROR: <input>:1:31: expected type 'bool' but found 'selfTypeN.spec'",
            ),
            (
                "[self.spec.template, self.spec.other].size() == 2",
                "ERROR: <input>:1:31: expected type 'selfTypeN.spec.template' but found 'selfTypeN.spec.other'",
            ),
            (
                "self.spec.name != null",
                "ERROR: <input>:1:16: found no matching overload for '_!=_' applied to '(string, null)'",
            ),
            (
                "null == self.spec.items",
                "ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(null, list(selfTypeN.spec.items.@idx))'",
            ),
            (
                "(self.spec.replicas > 1 ? 1 : null) == 1",
                "ERROR: <input>:1:25: found no matching overload for '_?_:_' applied to '(bool, int, null)'",
            ),
            (
                "self.spec.name.startsWith(null)",
                "ERROR: <input>:1:26: found no matching overload for 'startsWith' applied to 'string.(null)'",
            ),
            (
                "[self.spec.template, null].size() == 1",
                "ERROR: <input>:1:22: expected type 'selfTypeN.spec.template' but found 'null'",
            ),
            ("null || true", "ERROR: <input>:1:1: expected type 'bool' but found 'null'"),
            (
                "self.spec.byName == {'a': 1}",
                "ERROR: <input>:1:18: found no matching overload for '_==_' applied to '(map(string, selfTypeN.spec.byName.@elem), map(string, int))'",
            ),
            ("{'a': 1, 'b': 'c'}.size() == 2", "ERROR: <input>:1:15: expected type 'int' but found 'string'"),
        ] {
            assert_eq!(first_line(rule), error, "{rule}");
        }
        for fine in [
            "self.spec == oldSelf.spec && self.spec.template != oldSelf.spec.template",
            "self.spec.template != null && self.spec.timeout != null && self.spec.byName['a'] != null",
            "self.spec.items.all(i, i == self.spec.items[0] && i.n != '' && i in oldSelf.spec.items)",
            "(self.spec.replicas > 1 ? self.spec.template : null) == self.spec.template",
            "(self.spec.replicas > 1 ? null : self.spec.template) == null",
            "null == null && dyn(self.spec.name) != null && self.spec.any != null",
            "optional.of(self.spec).orValue(self.spec) == self.spec && optional.of(self.spec) != null",
            "self.spec.items.map(i, i.n).size() > 0 && [self.spec, self.spec].size() == 2",
            "self.spec.items + oldSelf.spec.items == self.spec.items && has(self.spec.template.n)",
            "self.spec.byName.all(k, self.spec.byName[k] == oldSelf.spec.byName[k])",
            "{'a': self.spec.template}['a'] == self.spec.template && {'a': 1} == {'b': 2}",
        ] {
            assert_eq!(issues(&spec, fine).map(|i| generic_self_type(&i)), None, "{fine}");
        }
        let decl = crate::cel_decl::of_schema(&spec, true).expect("typed");
        let program = cel::Program::compile("self.spec.template").expect("parses");
        assert!(check(&program, "", &decl, OldSelf::Value).not_bool(), "an object is not a bool");
        // The generated name changes from one compilation to the next, as kube's does; within
        // one rule it is one name.
        let names: Vec<String> = (0..3)
            .map(|_| issues(&spec, "self.spec == 1").expect("findings"))
            .map(|i| i.split("'(").nth(1).unwrap_or("").split('.').next().unwrap_or("").to_string())
            .collect();
        assert!(names.iter().all(|n| n.starts_with("selfType") && n.len() > "selfType".len()), "{names:?}");
    }
}
