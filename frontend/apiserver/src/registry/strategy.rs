//! `Strategy`: the per-kind rules of create and update (kube's `RESTCreateStrategy` and
//! `RESTUpdateStrategy`), as a trait with default methods. The generic steps (metadata, names,
//! preconditions) live in `object` and `store`; a strategy only adds what its kind needs.

use serde_json::{Map, Value};

use crate::error::FieldError;

/// A decoded object: the top-level JSON map.
pub type Object = Map<String, Value>;

/// Per-kind hooks. All methods have defaults that accept everything unchanged.
pub trait Strategy: Send + Sync + std::fmt::Debug {
    /// Normalises a new object before validation (defaults, server-owned fields).
    fn prepare_for_create(&self, _obj: &mut Object) {}

    /// Validates a new object; empty means valid.
    fn validate(&self, _obj: &Object) -> Vec<FieldError> {
        Vec::new()
    }

    /// Normalises an update, given the stored object (e.g. keeps fields only a subresource may
    /// change).
    fn prepare_for_update(&self, _new: &mut Object, _old: &Object) {}

    /// Validates an update; by default as a create.
    fn validate_update(&self, new: &Object, _old: &Object) -> Vec<FieldError> {
        self.validate(new)
    }

    /// Returns whether create replaces `status` with an empty one (kube's strategies do for
    /// kinds with a status subresource; nodes keep what the kubelet registers).
    fn reset_status_on_create(&self) -> bool {
        true
    }

    /// Returns the grace period a DELETE of `obj` waits for (kube's `CheckGracefulDelete`),
    /// given the requested one; `None` or 0 deletes at once.
    fn graceful_delete(&self, _obj: &Object, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Returns whether the kind this strategy belongs to is no longer served (a custom
    /// resource version whose definition changed or went): its row is kept only for requests
    /// already under way, and a watch cache of it ends so its watchers start again on the
    /// kind served now. Built-in kinds are never retired.
    fn retired(&self) -> bool {
        false
    }
}

/// How a kind's objects are bound to a node by a `Binding` (kube's `BindingREST`, for pods):
/// the rule behind a kind's `/binding` subresource.
pub trait Binder: Send + Sync + std::fmt::Debug {
    /// Returns `obj` bound to `node`, or the message of the 409 Conflict that refuses it (an
    /// object already bound, or being deleted).
    ///
    /// # Errors
    ///
    /// The refusal's message.
    fn bind(&self, obj: &Object, node: &str) -> Result<Object, String>;
}

/// The strategy of kinds with no rules beyond the generic metadata ones.
#[derive(Debug)]
pub struct DefaultStrategy;

impl Strategy for DefaultStrategy {}

/// Returns the value at `path` (object keys), if present.
pub fn get_path<'a>(obj: &'a Object, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut cur = obj.get(*first)?;
    for key in rest {
        cur = cur.as_object()?.get(*key)?;
    }
    Some(cur)
}

/// Returns the object map at `path`, creating empty maps on the way (replacing non-maps).
pub fn path_mut<'a>(obj: &'a mut Object, path: &[&str]) -> &'a mut Object {
    path.iter().fold(obj, |cur, key| map_field_mut(cur, key))
}

/// Sets `path` to `value` unless a non-null value is there already (kube's defaulting of
/// nil pointers and empty strings).
pub fn default_at(obj: &mut Object, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let parent = path_mut(obj, parents);
    let absent = match parent.get(*last) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    };
    if absent {
        parent.insert((*last).to_string(), value);
    }
}

/// Returns the array at `obj[key]` mutably, if it is one.
pub fn array_mut<'a>(obj: &'a mut Object, key: &str) -> Option<&'a mut Vec<Value>> {
    obj.get_mut(key).and_then(Value::as_array_mut)
}

/// Returns `obj[key]` as an object map, if it is one.
pub fn map_field<'a>(obj: &'a Object, key: &str) -> Option<&'a Object> {
    obj.get(key).and_then(Value::as_object)
}

/// Returns `obj[key]` as an object map, inserting an empty one if absent or not a map.
pub fn map_field_mut<'a>(obj: &'a mut Object, key: &str) -> &'a mut Object {
    let slot = obj.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(map) => map,
        _ => unreachable!("invariant: slot was just made an object"),
    }
}
