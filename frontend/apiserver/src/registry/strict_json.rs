//! JSON parsing that notices duplicate object keys, which kube's strict decoding reports
//! (`duplicate field "spec.replicas"`) and `serde_json::Value` silently collapses. The last
//! value wins, as Go's decoder keeps it.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `body` as JSON and returns the value with the dotted paths of every duplicated key
/// (`metadata.name`, `spec.containers[0].image`).
///
/// # Errors
///
/// Returns serde_json's error for malformed JSON (including nesting deeper than its limit).
pub fn parse(body: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    let mut found = Found::default();
    let value = read(body, &mut found)?;
    Ok((value, found.duplicates))
}

/// Returns the path of every object key in `body` in document order (a key seen twice, twice),
/// so strict-decoding messages can be listed in the order kube reports them. Only called when
/// there is something to report, since it parses the body again.
pub fn key_order(body: &[u8]) -> Vec<String> {
    let mut found = Found { order: Some(Vec::new()), ..Found::default() };
    match read(body, &mut found) {
        Ok(_) => found.order.unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

fn read(body: &[u8], found: &mut Found) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Node { path: String::new(), found }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// What a parse collects.
#[derive(Default)]
struct Found {
    duplicates: Vec<String>,
    /// Every key path in document order, when asked for.
    order: Option<Vec<String>>,
}

/// One value being read, with its path from the root.
struct Node<'a> {
    path: String,
    found: &'a mut Found,
}

impl Node<'_> {
    fn child(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, items.len());
            match seq.next_element_seed(Node { path, found: &mut *self.found })? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = self.child(&key);
            if let Some(order) = &mut self.found.order {
                order.push(path.clone());
            }
            let value = map.next_value_seed(Node { path: path.clone(), found: &mut *self.found })?;
            if out.insert(key, value).is_some() {
                self.found.duplicates.push(path);
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_duplicates_at_any_depth_and_keeps_the_last_value() {
        let body = br#"{"kind":"A","spec":{"replicas":1,"replicas":2,"list":[{"x":1,"x":2}]},"kind":"B"}"#;
        let (value, duplicates) = parse(body).expect("json");
        assert_eq!(duplicates, vec!["spec.replicas", "spec.list[0].x", "kind"]);
        assert_eq!(value["spec"]["replicas"], 2);
        assert_eq!(value["kind"], "B");
        assert_eq!(value, serde_json::from_slice::<Value>(body).expect("json"));
    }

    #[test]
    fn key_order_is_document_order() {
        let order = key_order(br#"{"spec":{"b":1,"a":[{"z":1}]},"kind":"A","spec":{}}"#);
        assert_eq!(order, vec!["spec", "spec.b", "spec.a", "spec.a[0].z", "kind", "spec"]);
    }

    #[test]
    fn plain_documents_round_trip() {
        let body = br#"{"a":[1,-2,3.5,true,null,"s"],"b":{"c":{}}}"#;
        let (value, duplicates) = parse(body).expect("json");
        assert!(duplicates.is_empty());
        assert_eq!(value, serde_json::from_slice::<Value>(body).expect("json"));
        assert!(parse(b"{\"a\":1} trailing").is_err());
        assert!(parse(b"{\"a\":").is_err());
    }
}
