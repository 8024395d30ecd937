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
