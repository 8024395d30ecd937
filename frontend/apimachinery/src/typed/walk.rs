//! The four walks of an object along its [`TypeSchema`]: the field set it sets
//! ([`to_set`]), how two objects differ ([`compare`]), an applied configuration merged into a
//! live object ([`merge`]), and an object with some paths taken out ([`remove_items`]).
//!
//! They follow kube's rules: atomic lists, atomic maps and atomic structs are leaves (one
//! member, compared and replaced whole); list-map elements are found by their key fields, set
//! elements by value; a map entry or an undeclared struct field is a member on its own (as is
//! every list element), a declared struct field only when it holds a scalar, null, `{}` or
//! an atomic value.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::schema::{ListKind, Node, TypeId, TypeSchema, DEDUCED};
use crate::fieldpath::{path_string, Path, PathElement, Set};

/// A value that does not fit its schema (kube's typed-value validation errors), e.g.
/// `.spec.containers: element 0: associative list with keys has an element that omits all key
/// fields ["name"] (and doesn't have default values for any key fields)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TypedError {
    /// Where, as kube prints paths.
    pub path: String,
    /// What.
    pub message: String,
}

fn error(path: &[PathElement], message: impl Into<String>) -> TypedError {
    TypedError { path: path_string(path), message: message.into() }
}

/// The shape a value takes under its type.
enum Shape<'s> {
    Leaf,
    Granular(TypeId),
    List(TypeId, &'s ListKind),
}

/// The shape `v` takes under type `id`. A null takes its type's shape, empty (kube's typed
/// values treat a nil slice or map as one with nothing in it).
fn shape<'s>(schema: &'s TypeSchema, id: TypeId, v: &Value) -> Shape<'s> {
    match (schema.node(id), v) {
        (Node::Struct { atomic: false, .. } | Node::Map { atomic: false, .. }, Value::Object(_) | Value::Null) => {
            Shape::Granular(id)
        }
        (Node::Deduced, Value::Object(_)) => Shape::Granular(DEDUCED),
        (Node::List { items, kind }, Value::Array(_) | Value::Null) if *kind != ListKind::Atomic => {
            Shape::List(*items, kind)
        }
        _ => Shape::Leaf,
    }
}

fn same_shape(a: &Shape<'_>, b: &Shape<'_>) -> bool {
    matches!(
        (a, b),
        (Shape::Leaf, Shape::Leaf) | (Shape::Granular(_), Shape::Granular(_)) | (Shape::List(..), Shape::List(..))
    )
}

/// The path element of a list element: its key fields (with declared defaults for omitted
/// ones), or its value for sets.
fn element_of(kind: &ListKind, item: &Value, path: &[PathElement], index: usize) -> Result<PathElement, TypedError> {
    match kind {
        ListKind::Map { keys, defaults } => {
            let Value::Object(m) = item else {
                let what = if item.is_null() {
                    "associative list with keys may not have a null element"
                } else {
                    "associative list with keys may not have non-map elements"
                };
                return Err(error(path, format!("element {index}: {what}")));
            };
            let mut fields: Vec<(String, Value)> = Vec::with_capacity(keys.len());
            for k in keys {
                if let Some(v) = m.get(k) {
                    fields.push((k.clone(), v.clone()));
                } else if let Some((_, d)) = defaults.iter().find(|(name, _)| name == k) {
                    fields.push((k.clone(), d.clone()));
                }
            }
            if fields.is_empty() {
                let quoted: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
                return Err(error(
                    path,
                    format!(
                        "element {index}: associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                        quoted.join(" ")
                    ),
                ));
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
        _ => match item {
            Value::Object(_) => Err(error(
                path,
                format!("element {index}: associative list without keys has an element that's a map type"),
            )),
            Value::Array(_) => {
                Err(error(path, format!("element {index}: not supported: associative list with lists as elements")))
            }
            Value::Null => Err(error(
                path,
                format!("element {index}: associative list without keys has an element that's an explicit null"),
            )),
            v => Ok(PathElement::Value(v.clone())),
        },
    }
}

/// Returns the set of fields `value` sets (kube's `ToFieldSet`). Duplicate list elements
/// (which a stored object may hold) are members without their insides.
///
/// # Errors
///
/// A list element without its keys, or of the wrong kind.
pub fn to_set(schema: &TypeSchema, value: &Value) -> Result<Set, TypedError> {
    let mut set = Set::new();
    let mut path = Vec::new();
    to_set_at(schema, schema.root(), value, &mut path, &mut set)?;
    Ok(set)
}

/// Fills `set` with the paths below `v` (at `path`, kept for errors) and says whether `v` is
/// a leaf, a member of its parent's set. Each level's set is built in place and handed to
/// its parent, so no path is walked from the root again.
fn to_set_at(schema: &TypeSchema, id: TypeId, v: &Value, path: &mut Path, set: &mut Set) -> Result<bool, TypedError> {
    match shape(schema, id, v) {
        Shape::Leaf => return Ok(true),
        Shape::Granular(id) => {
            let Value::Object(m) = v else { return Ok(false) };
            for (k, child) in m {
                path.push(PathElement::Field(k.clone()));
                let mut below = Set::new();
                let leaf = to_set_at(schema, schema.field(id, k), child, path, &mut below)?;
                let empty_map = matches!(child, Value::Object(c) if c.is_empty());
                let member = leaf || child.is_null() || empty_map || !schema.is_named_field(id, k);
                let pe = path.pop().unwrap_or_else(|| PathElement::Field(k.clone()));
                add(set, pe, member, below);
            }
        }
        Shape::List(items, kind) => {
            let Value::Array(list) = v else { return Ok(false) };
            let mut seen: HashMap<PathElement, usize> = HashMap::new();
            let mut elements = Vec::with_capacity(list.len());
            for (i, item) in list.iter().enumerate() {
                let pe = element_of(kind, item, path, i)?;
                *seen.entry(pe.clone()).or_default() += 1;
                elements.push(pe);
            }
            for (pe, item) in elements.into_iter().zip(list) {
                let duplicate = seen.get(&pe).copied().unwrap_or(0) > 1;
                let mut below = Set::new();
                path.push(pe);
                if !duplicate {
                    to_set_at(schema, items, item, path, &mut below)?;
                }
                let pe = path.pop().unwrap_or(PathElement::Index(0));
                add(set, pe, true, below);
            }
        }
    }
    Ok(false)
}

/// Adds `pe` to `set`, as a member if `member`, with the paths `below` it.
fn add(set: &mut Set, pe: PathElement, member: bool, below: Set) {
    match (member, below.is_empty()) {
        (true, true) => {
            set.members.insert(pe);
        }
        (true, false) => {
            set.members.insert(pe.clone());
            set.children.entry(pe).or_default().union_in_place_owned(below);
        }
        (false, false) => set.children.entry(pe).or_default().union_in_place_owned(below),
        (false, true) => {}
    }
}

/// How two objects differ, as three sets of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Paths only the right side has.
    pub added: Set,
    /// Paths only the left side has.
    pub removed: Set,
    /// Leaves both have, with different values.
    pub modified: Set,
}

impl Comparison {
    /// Whether the two sides are the same.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.modified.is_empty()
    }
}

/// Compares `lhs` (before) with `rhs` (after), kube's `Compare`.
///
/// # Errors
///
/// As [`to_set`].
pub fn compare(schema: &TypeSchema, lhs: &Value, rhs: &Value) -> Result<Comparison, TypedError> {
    let mut out = Comparison::default();
    let mut path = Vec::new();
    compare_at(schema, schema.root(), Some(lhs), Some(rhs), &mut path, &mut out)?;
    Ok(out)
}

fn compare_at(
    schema: &TypeSchema,
    id: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Path,
    out: &mut Comparison,
) -> Result<(), TypedError> {
    let ls = lhs.map(|v| shape(schema, id, v));
    let rs = rhs.map(|v| shape(schema, id, v));
    let leaf = |out: &mut Comparison, path: &Path| match (lhs, rhs) {
        (None, _) => out.added.insert(path),
        (_, None) => out.removed.insert(path),
        (Some(l), Some(r)) if l != r => out.modified.insert(path),
        _ => {}
    };
    let shape = match (&ls, &rs) {
        (Some(l), Some(r)) if !same_shape(l, r) => {
            leaf(out, path);
            return Ok(());
        }
        (_, Some(s)) | (Some(s), None) => s,
        (None, None) => return Ok(()),
    };
    match shape {
        Shape::Leaf => {
            leaf(out, path);
            return Ok(());
        }
        Shape::Granular(id) => {
            let empty = Map::new();
            let lm = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let rm = rhs.and_then(Value::as_object).unwrap_or(&empty);
            for (k, lv) in lm {
                path.push(PathElement::Field(k.clone()));
                compare_at(schema, schema.field(*id, k), Some(lv), rm.get(k), path, out)?;
                path.pop();
            }
            for (k, rv) in rm.iter().filter(|(k, _)| !lm.contains_key(*k)) {
                path.push(PathElement::Field(k.clone()));
                compare_at(schema, schema.field(*id, k), None, Some(rv), path, out)?;
                path.pop();
            }
        }
        Shape::List(items, kind) => {
            let l = index_list(kind, lhs, path)?;
            let r = index_list(kind, rhs, path)?;
            let mut order: Vec<&PathElement> = Vec::new();
            let mut groups: HashMap<&PathElement, (Vec<&Value>, Vec<&Value>)> = HashMap::new();
            for (pe, v) in &l {
                let g = groups.entry(pe).or_insert_with(|| {
                    order.push(pe);
                    (Vec::new(), Vec::new())
                });
                g.0.push(v);
            }
            for (pe, v) in &r {
                let g = groups.entry(pe).or_insert_with(|| {
                    order.push(pe);
                    (Vec::new(), Vec::new())
                });
                g.1.push(v);
            }
            for pe in order {
                let (ll, rl) = &groups[pe];
                path.push(pe.clone());
                match (ll.len(), rl.len()) {
                    (a, b) if a <= 1 && b <= 1 => {
                        compare_at(schema, *items, ll.first().copied(), rl.first().copied(), path, out)?
                    }
                    (a, b) if a >= 2 && b >= 2 => {
                        if ll != rl {
                            out.modified.insert(path);
                        }
                    }
                    (a, _) if a >= 2 => {
                        if let Some(r) = rl.first() {
                            compare_at(schema, *items, None, Some(r), path, out)?;
                        }
                        out.removed.insert(path);
                    }
                    _ => {
                        if let Some(l) = ll.first() {
                            compare_at(schema, *items, Some(l), None, path, out)?;
                        }
                        out.added.insert(path);
                    }
                }
                path.pop();
            }
        }
    }
    if lhs.is_none() {
        out.added.insert(path);
    } else if rhs.is_none() {
        out.removed.insert(path);
    }
    Ok(())
}

/// The elements of a list with their path elements.
fn index_list<'v>(
    kind: &ListKind,
    v: Option<&'v Value>,
    path: &Path,
) -> Result<Vec<(PathElement, &'v Value)>, TypedError> {
    let Some(Value::Array(list)) = v else { return Ok(Vec::new()) };
    list.iter().enumerate().map(|(i, item)| Ok((element_of(kind, item, path, i)?, item))).collect()
}

/// Merges an applied configuration `rhs` into the live object `lhs` (kube's `Merge`): the
/// configuration's values win; granular maps and structs merge field by field; list-maps and
/// sets merge element by element, the configuration's elements in its order with the live
/// object's other elements kept where they stood.
///
/// # Errors
///
/// As [`to_set`], and duplicate elements in the configuration.
pub fn merge(schema: &TypeSchema, lhs: &Value, rhs: &Value) -> Result<Value, TypedError> {
    let mut path = Vec::new();
    Ok(merge_at(schema, schema.root(), Some(lhs), Some(rhs), &mut path)?.unwrap_or(Value::Null))
}

/// Merges `rhs` into `lhs`. The live side is read, not taken: only what the result keeps of it
/// is copied (a configuration usually sets most of the object, whose live values it replaces).
fn merge_at(
    schema: &TypeSchema,
    id: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Path,
) -> Result<Option<Value>, TypedError> {
    let (l, r) = match (lhs, rhs) {
        (None, None) => return Ok(None),
        (Some(l), None) => return Ok(Some(l.clone())),
        (None, Some(r)) => {
            // Validates the configuration's own lists (keys, duplicates) on the way.
            check_config(schema, id, r, path)?;
            return Ok(Some(r.clone()));
        }
        (Some(l), Some(r)) => (l, r),
    };
    let (ls, rs) = (shape(schema, id, l), shape(schema, id, r));
    if !same_shape(&ls, &rs) {
        check_config(schema, id, r, path)?;
        return Ok(Some(r.clone()));
    }
    match rs {
        Shape::Leaf => Ok(Some(r.clone())),
        Shape::Granular(id) => {
            let (Value::Object(lm), Value::Object(rm)) = (l, r) else { return Ok(Some(r.clone())) };
            if lm.is_empty() && rm.is_empty() {
                return Ok(Some(r.clone()));
            }
            let mut out: Map<String, Value> =
                lm.iter().filter(|(k, _)| !rm.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            for (k, rv) in rm {
                path.push(PathElement::Field(k.clone()));
                if let Some(v) = merge_at(schema, schema.field(id, k), lm.get(k), Some(rv), path)? {
                    out.insert(k.clone(), v);
                }
                path.pop();
            }
            Ok(Some(Value::Object(out)))
        }
        Shape::List(items, kind) => {
            let (Value::Array(ll), Value::Array(rl)) = (l, r) else { return Ok(Some(r.clone())) };
            if ll.is_empty() && rl.is_empty() {
                return Ok(Some(r.clone()));
            }
            merge_list(schema, items, kind, ll, rl, path).map(Some)
        }
    }
}

/// Checks a configuration's lists where nothing live merges with them.
fn check_config(schema: &TypeSchema, id: TypeId, v: &Value, path: &mut Path) -> Result<(), TypedError> {
    match shape(schema, id, v) {
        Shape::Leaf => Ok(()),
        Shape::Granular(id) => {
            let Value::Object(m) = v else { return Ok(()) };
            for (k, child) in m {
                path.push(PathElement::Field(k.clone()));
                check_config(schema, schema.field(id, k), child, path)?;
                path.pop();
            }
            Ok(())
        }
        Shape::List(items, kind) => {
            let Value::Array(list) = v else { return Ok(()) };
            let mut seen = std::collections::HashSet::new();
            for (i, item) in list.iter().enumerate() {
                let pe = element_of(kind, item, path, i)?;
                if !seen.insert(pe.clone()) {
                    return Err(error(path, format!("duplicate entries for key {pe}")));
                }
                path.push(pe);
                check_config(schema, items, item, path)?;
                path.pop();
            }
            Ok(())
        }
    }
}

/// Merges two keyed lists in kube's order: walk both; elements of both merge in the
/// configuration's order, live-only elements stay where they were relative to them.
fn merge_list<'v>(
    schema: &TypeSchema,
    items: TypeId,
    kind: &ListKind,
    lhs: &'v [Value],
    rhs: &[Value],
    path: &mut Path,
) -> Result<Value, TypedError> {
    // The elements' path elements are made once; the maps below borrow them.
    let mut rpes = Vec::with_capacity(rhs.len());
    let mut key_error = None;
    for (i, item) in rhs.iter().enumerate() {
        match element_of(kind, item, path, i) {
            Ok(pe) => rpes.push(pe),
            Err(e) => {
                key_error = Some(e);
                break;
            }
        }
    }
    // A duplicate before an element without keys is the error reported, as in document order.
    let mut robserved: HashMap<&PathElement, &Value> = HashMap::with_capacity(rpes.len());
    for (pe, item) in rpes.iter().zip(rhs) {
        if robserved.insert(pe, item).is_some() {
            return Err(error(path, format!("duplicate entries for key {pe}")));
        }
    }
    if let Some(e) = key_error {
        return Err(e);
    }
    let lpes =
        lhs.iter().enumerate().map(|(i, item)| element_of(kind, item, path, i)).collect::<Result<Vec<_>, _>>()?;
    // The index of each live element; `None` for a duplicated one, which merges as absent
    // (kube keeps no value for it).
    let mut lobserved: HashMap<&PathElement, Option<usize>> = HashMap::with_capacity(lhs.len());
    for (i, pe) in lpes.iter().enumerate() {
        lobserved.entry(pe).and_modify(|v| *v = None).or_insert(Some(i));
    }
    let mut litems: Vec<Option<&Value>> = lhs.iter().map(Some).collect();
    let mut shared: std::collections::VecDeque<&PathElement> =
        rpes.iter().filter(|pe| lobserved.contains_key(*pe)).collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: std::collections::HashSet<&PathElement> = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(litems.len().max(rhs.len()));
    let (mut li, mut ri) = (0, 0);
    let mut item =
        |pe: &PathElement, l: Option<&Value>, r: Option<&Value>, path: &mut Path| -> Result<(), TypedError> {
            path.push(pe.clone());
            let v = merge_at(schema, items, l, r, path)?;
            path.pop();
            if let Some(v) = v {
                out.push(v);
            }
            Ok(())
        };
    let take_live = |litems: &mut Vec<Option<&'v Value>>, pe: &PathElement| -> Option<&'v Value> {
        lobserved.get(pe).copied().flatten().and_then(|i| litems[i].take())
    };
    while li < lpes.len() || ri < rpes.len() {
        if li < lpes.len() && ri < rpes.len() {
            let pe = &lpes[li];
            if *pe == rpes[ri] {
                merged_rhs.insert(pe);
                let l = take_live(&mut litems, pe);
                item(pe, l, robserved.get(pe).copied(), path)?;
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if robserved.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            let pe = &lpes[li];
            if !robserved.contains_key(pe) {
                let l = litems[li].take();
                item(pe, l, None, path)?;
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rpes.len() {
            let pe = &rpes[ri];
            merged_rhs.insert(pe);
            let l = take_live(&mut litems, pe);
            item(pe, l, robserved.get(pe).copied(), path)?;
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(Value::Array(out))
}

/// Returns `value` without the paths in `set` (kube's `RemoveItems`). A map or list emptied by
/// the removal goes too; atomic values are never entered.
pub fn remove_items(schema: &TypeSchema, value: &Value, set: &Set) -> Value {
    remove_at(schema, schema.root(), value, set).unwrap_or(Value::Object(Map::new()))
}

fn remove_at(schema: &TypeSchema, id: TypeId, v: &Value, set: &Set) -> Option<Value> {
    match (shape(schema, id, v), v) {
        (Shape::Granular(id), Value::Object(m)) => {
            let mut out = Map::new();
            for (k, child) in m {
                let pe = PathElement::Field(k.clone());
                if set.members.contains(&pe) {
                    continue;
                }
                match set.children.get(&pe) {
                    Some(sub) => {
                        if let Some(kept) = remove_at(schema, schema.field(id, k), child, sub) {
                            out.insert(k.clone(), kept);
                        }
                    }
                    None => {
                        out.insert(k.clone(), child.clone());
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (Shape::List(items, kind), Value::Array(list)) => {
            let mut out = Vec::with_capacity(list.len());
            for (i, item) in list.iter().enumerate() {
                let Ok(pe) = element_of(kind, item, &[], i) else {
                    out.push(item.clone());
                    continue;
                };
                if set.members.contains(&pe) {
                    continue;
                }
                match set.children.get(&pe) {
                    Some(sub) => {
                        if let Some(kept) = remove_at(schema, items, item, sub) {
                            out.push(kept);
                        }
                    }
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        _ => Some(v.clone()),
    }
}

/// Adds to `set` every declared struct field it has children under (kube's
/// `EnsureNamedFieldsAreMembers`), so that removing the set also removes emptied structs.
pub fn with_named_fields(schema: &TypeSchema, set: &Set) -> Set {
    named_at(schema, schema.root(), set)
}

fn named_at(schema: &TypeSchema, id: TypeId, set: &Set) -> Set {
    let mut out = Set { members: set.members.clone(), children: Default::default() };
    for (pe, child) in &set.children {
        let child_id = match pe {
            PathElement::Field(name) => {
                if schema.is_named_field(id, name) {
                    out.members.insert(pe.clone());
                }
                schema.field(id, name)
            }
            PathElement::Key(_) => match schema.node(id) {
                Node::List { items, .. } => *items,
                _ => DEDUCED,
            },
            _ => DEDUCED,
        };
        out.children.insert(pe.clone(), named_at(schema, child_id, child));
    }
    out
}
