//! What of a node's value its rules can read, and that part handed to the interpreter.
//!
//! A rule sees `self` and `oldSelf` only through the expressions it is made of. When every use
//! of them selects a field (`self.replicas`, `has(oldSelf.walStorage)`), the other fields of the
//! object change neither the rule's result nor its cost: a rule on a node above a pod template
//! that reads three numbers of it needs neither the template converted to CEL values nor its
//! sizes measured, and converting and sizing it is most of what checking such a node costs.
//! Likewise the cost estimate reaches an object's field only by selecting it by name, so a
//! node's type, sized before each evaluation, keeps only the fields some rule of the node names.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use cel::common::ast::Expr;
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelTimestamp,
    CelUInt,
};
use cel::common::value::Val;
use cel::IdedExpr;
use serde_json::Value;

use crate::cel_decl::{escape, keyword, Decl, DeclKind};

/// How a node's type shapes the values its rules see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spelling {
    /// Some field at or below the node is named differently in CEL (`__namespace__`): fields
    /// go under their CEL names.
    pub(crate) renames: bool,
    /// Some string at or below the node has a format rules read as another type (durations,
    /// timestamps, bytes): such strings are converted by the type.
    pub(crate) formatted: bool,
}

/// What a node's rules (and message expressions) read of `self` and `oldSelf`.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    /// The fields they select on `self` or `oldSelf` themselves, by CEL name; `None` when some
    /// use of either is not a selection (the value compared, iterated, measured or passed
    /// whole).
    root: Option<BTreeSet<String>>,
    /// Every field name they select anywhere: the fields of object types a cost estimate can
    /// reach.
    pub(crate) names: BTreeSet<String>,
}

impl Reads {
    /// What `programs` read.
    pub(crate) fn of<'p>(programs: impl IntoIterator<Item = &'p cel::Program>) -> Reads {
        let mut reads = Reads { root: Some(BTreeSet::new()), names: BTreeSet::new() };
        for p in programs {
            reads.visit(p.expression());
        }
        reads
    }

    fn visit(&mut self, e: &IdedExpr) {
        match &e.expr {
            // A name bound by a comprehension may shadow `self`: taking it for the node's value
            // only keeps more of that value.
            Expr::Ident(name) if is_self(name) => self.root = None,
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
            Expr::Select(s) => {
                // A reserved word selects the field escaped from it as well (`namespace`,
                // `__namespace__`).
                let escaped = keyword(&s.field).then(|| format!("__{}__", s.field));
                self.names.extend(std::iter::once(s.field.clone()).chain(escaped.clone()));
                match &s.operand.expr {
                    Expr::Ident(name) if is_self(name) => {
                        if let Some(root) = &mut self.root {
                            root.extend(std::iter::once(s.field.clone()).chain(escaped));
                        }
                    }
                    _ => self.visit(&s.operand),
                }
            }
            _ => crate::cel_check::children(e).into_iter().for_each(|c| self.visit(c)),
        }
    }

    /// The entries of `v` the rules can read, under their CEL names (renamed by `decl`, the
    /// node's type, when `renames`), each with its field's type; `None` when they read all of
    /// `v`.
    fn entries<'a, 'd>(&self, decl: Option<&'d Decl>, renames: bool, v: &'a Value) -> Option<Vec<Entry<'a, 'd>>> {
        let (Some(root), Value::Object(m)) = (&self.root, v) else { return None };
        let entries = m
            .iter()
            .flat_map(|(k, v)| {
                let (name, field) = cel_name(decl, renames, k);
                let plain = also_plain(&name, k).map(|k| (Cow::Borrowed(k), field, v));
                std::iter::once((name, field, v)).chain(plain)
            })
            .filter(|(name, _, _)| root.contains(name.as_ref()))
            .collect();
        Some(entries)
    }

    /// `v` as the node's rules see it: only what they read, under CEL names, formatted strings
    /// typed, as `spelling` asks.
    pub(crate) fn value<'a>(&self, decl: Option<&Decl>, spelling: Spelling, v: &'a Value) -> Box<dyn Val + 'a> {
        let decl = decl.filter(|_| spelling.renames || spelling.formatted);
        match self.entries(decl, spelling.renames, v) {
            Some(entries) => Box::new(CelMap::from(
                entries
                    .into_iter()
                    .map(|(name, field, v)| (key(name), to_val(field, spelling.renames, v)))
                    .collect::<HashMap<_, _>>(),
            )),
            None => to_val(decl, spelling.renames, v),
        }
    }
}

/// A field of a value as rules read it: its CEL name, its type when known, its value.
type Entry<'a, 'd> = (Cow<'a, str>, Option<&'d Decl>, &'a Value);

fn is_self(name: &str) -> bool {
    name == "self" || name == "oldSelf"
}

/// The CEL name of the field `k` of an object of type `decl` and that field's type: its escaped
/// form where the type declares it (when `renames`, else as it is).
fn cel_name<'a, 'd>(decl: Option<&'d Decl>, renames: bool, k: &'a str) -> (Cow<'a, str>, Option<&'d Decl>) {
    let Some(DeclKind::Object(fields)) = decl.map(|d| &d.kind) else { return (Cow::Borrowed(k), None) };
    if !renames {
        return (Cow::Borrowed(k), fields.get(k));
    }
    match escape(k).and_then(|e| fields.get(&e).map(|d| (e, d))) {
        Some((name, d)) => (Cow::Owned(name), Some(d)),
        None => (Cow::Borrowed(k), None),
    }
}

/// The property `k` once more under its own name when its CEL name `name` is the escaped
/// form of a reserved word: rules may select it by the word (kube's type provider resolves
/// `x.namespace` to `__namespace__` since 1.31, and its values find either spelling).
fn also_plain<'a>(name: &str, k: &'a str) -> Option<&'a str> {
    (keyword(k) && name != k).then_some(k)
}

fn key(name: Cow<'_, str>) -> CelMapKey<'_> {
    match name {
        Cow::Borrowed(s) => CelMapKey::from(s),
        Cow::Owned(s) => CelMapKey::from(s),
    }
}

/// A JSON value as CEL sees it, borrowing its strings: schema integers are CEL `int`s, as kube
/// binds them (a value serialised as it is would make every non-negative number a `uint`, and
/// `self.replicas + 1` would then mix `uint` with `int` and fail); only integers beyond `int`'s
/// range stay `uint`. With `decl`, an object's fields go under their CEL names (when
/// `renames`), and a string of format duration is a duration, of format date or date-time a
/// timestamp and of format byte bytes, as kube binds them (one that does not read as such stays
/// a string, and a rule converting it fails as kube's fails on it).
fn to_val<'a>(decl: Option<&Decl>, renames: bool, v: &'a Value) -> Box<dyn Val + 'a> {
    if let (Some(d), Value::String(s)) = (decl, v) {
        if let Some(typed) = formatted(&d.kind, s) {
            return typed;
        }
    }
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            let item = match decl.map(|d| &d.kind) {
                Some(DeclKind::List(e)) => Some(&**e),
                _ => None,
            };
            Box::new(CelList::from(items.iter().map(|i| to_val(item, renames, i)).collect::<Vec<_>>()))
        }
        Value::Object(m) => {
            let mut entries = HashMap::with_capacity(m.len());
            for (k, v) in m {
                match decl.map(|d| &d.kind) {
                    Some(DeclKind::Map(e)) => {
                        entries.insert(CelMapKey::from(k.as_str()), to_val(Some(e), renames, v));
                    }
                    Some(DeclKind::Object(_)) => {
                        let (name, field) = cel_name(decl, renames, k);
                        if let Some(plain) = also_plain(&name, k) {
                            entries.insert(CelMapKey::from(plain), to_val(field, renames, v));
                        }
                        entries.insert(key(name), to_val(field, renames, v));
                    }
                    _ => {
                        entries.insert(CelMapKey::from(k.as_str()), to_val(None, renames, v));
                    }
                }
            }
            Box::new(CelMap::from(entries))
        }
    }
}

/// A string of a type rules read as another: a duration, a timestamp or bytes; `None` for
/// other types and for a string that does not read as its type.
fn formatted<'a>(kind: &DeclKind, s: &str) -> Option<Box<dyn Val + 'a>> {
    use base64::Engine;
    match kind {
        DeclKind::Duration => crate::formats::duration_nanos(s)
            .map(|n| Box::new(CelDuration::from(chrono::Duration::nanoseconds(n))) as Box<dyn Val>),
        DeclKind::Timestamp => timestamp(s).map(|t| Box::new(CelTimestamp::from(t)) as Box<dyn Val>),
        DeclKind::Bytes => base64::engine::general_purpose::STANDARD
            .decode(s)
            .ok()
            .map(|b| Box::new(CelBytes::from(b)) as Box<dyn Val>),
        _ => None,
    }
}

/// A `date-time` (RFC 3339) or `date` (midnight UTC) as a timestamp.
fn timestamp(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).ok().or_else(|| {
        let date = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
        Some(date.and_hms_opt(0, 0, 0)?.and_utc().fixed_offset())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reads(sources: &[&str]) -> Reads {
        let programs: Vec<cel::Program> =
            sources.iter().map(|s| crate::cel_parse::compile(s).expect("parses")).collect();
        Reads::of(&programs)
    }

    fn set(names: &[&str]) -> Option<BTreeSet<String>> {
        Some(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn selections_of_self_are_all_a_rule_reads() {
        let r = reads(&["self.a <= self.b", "!has(oldSelf.c) || has(self.c)", "self.l.all(e, e.name != 'x')"]);
        assert_eq!(r.root, set(&["a", "b", "c", "l"]));
        assert_eq!(r.names, ["a", "b", "c", "l", "name"].iter().map(|s| s.to_string()).collect());
        assert_eq!(reads(&["self.a == 1", "self == oldSelf"]).root, None);
        assert_eq!(reads(&["self.size() > 1"]).root, None);
        assert_eq!(reads(&["self.all(k, k != 'x')"]).root, None);
    }

    #[test]
    fn the_view_keeps_what_rules_read_under_cel_names() {
        let schema = json!({"type": "object", "properties": {"namespace": {"type": "string"},
            "max-size": {"type": "integer"}, "big": {"type": "object", "properties": {"x": {"type": "string"}}}}});
        let decl = crate::cel_decl::of_schema(&schema, false).expect("typed");
        let v = json!({"namespace": "a", "max-size": 3, "big": {"x": "yyyy"}});
        let program =
            crate::cel_parse::compile("self.__namespace__ == 'a' && self.max__dash__size == 3").expect("parses");
        let r = Reads::of([&program]);
        let mut context = cel::Context::default();
        context.add_variable_as_val("self", r.value(Some(&decl), Spelling { renames: true, formatted: false }, &v));
        assert_eq!(program.execute(&context), Ok(cel::Value::Bool(true)));
        let missing = crate::cel_parse::compile("has(self.big)").expect("parses");
        assert_eq!(missing.execute(&context), Ok(cel::Value::Bool(false)), "a field no rule reads is left out");
    }

    /// A reserved word selects the field escaped from it, at the node and below it, as kube
    /// (since 1.31) resolves it.
    #[test]
    fn reserved_words_select_their_escaped_fields() {
        let meta = json!({"type": "object", "properties": {"namespace": {"type": "string"}}});
        let schema = json!({"type": "object", "properties": {"namespace": {"type": "string"},
            "templates": {"type": "array", "items": {"type": "object", "properties": {"metadata": meta}}}}});
        let decl = crate::cel_decl::of_schema(&schema, false).expect("typed");
        let v = json!({"namespace": "a", "templates": [{"metadata": {"namespace": "b"}}, {"metadata": {}}]});
        let rules = [
            "self.namespace == 'a' && self.__namespace__ == 'a'",
            "self.templates.exists(t, t.metadata.namespace == 'b' && t.metadata.__namespace__ == 'b')",
            "self.templates.exists(t, !has(t.metadata.namespace))",
        ];
        let programs: Vec<cel::Program> = rules.iter().map(|r| crate::cel_parse::compile(r).expect("parses")).collect();
        let r = Reads::of(&programs);
        assert!(r.names.contains("__namespace__") && r.names.contains("namespace"), "{:?}", r.names);
        let mut context = cel::Context::default();
        context.add_variable_as_val("self", r.value(Some(&decl), Spelling { renames: true, formatted: false }, &v));
        for (rule, program) in rules.iter().zip(&programs) {
            assert_eq!(program.execute(&context), Ok(cel::Value::Bool(true)), "{rule}");
            let checked = crate::cel_check::check(program, rule, &decl, crate::cel_check::OldSelf::Value);
            assert_eq!(checked.issues, None, "{rule}");
        }
    }
}
