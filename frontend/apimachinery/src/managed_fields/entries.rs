//! `metadata.managedFields` as data: [`Managers`], one [`Entry`] per manager identity
//! (manager name, operation, apiVersion for updates, subresource), decoded from and encoded to
//! the `ManagedFieldsEntry` list kube writes.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::fieldpath::{from_fields_v1, to_fields_v1_value, Set};

/// `operation` of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write.
    Update,
}

impl Operation {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who owns a set: kube's manager identity. Apply entries are one per manager and subresource
/// whatever their apiVersion; update entries are one per apiVersion too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerId {
    /// `manager`.
    pub manager: String,
    /// `operation`.
    pub operation: Operation,
    /// `apiVersion`; empty for apply identities.
    pub api_version: String,
    /// `subresource`.
    pub subresource: String,
}

impl ManagerId {
    /// The identity of `manager` writing through `subresource` ("" for the object) at
    /// `api_version`. An empty manager is "unknown", as kube names it.
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> ManagerId {
        ManagerId {
            manager: if manager.is_empty() { "unknown".into() } else { manager.into() },
            operation,
            api_version: if operation == Operation::Apply { String::new() } else { api_version.into() },
            subresource: subresource.into(),
        }
    }

    /// kube's identifier text (the entry's JSON without time and fields), which orders
    /// managers where kube breaks ties by it.
    pub fn identifier(&self) -> String {
        let mut out = String::from("{\"manager\":");
        crate::fieldpath::element::write_go_string(&mut out, &self.manager);
        out.push_str(",\"operation\":\"");
        out.push_str(self.operation.as_str());
        out.push('"');
        if !self.api_version.is_empty() {
            out.push_str(",\"apiVersion\":");
            crate::fieldpath::element::write_go_string(&mut out, &self.api_version);
        }
        if !self.subresource.is_empty() {
            out.push_str(",\"subresource\":");
            crate::fieldpath::element::write_go_string(&mut out, &self.subresource);
        }
        out.push('}');
        out
    }

    /// How conflict messages name the manager: `"kubectl"`, `"m" with subresource "status"`,
    /// `"kube-controller-manager" using apps/v1`.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {:?}", self.subresource);
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// One manager's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Who.
    pub id: ManagerId,
    /// The apiVersion the set is expressed in.
    pub api_version: String,
    /// When the manager last changed something (`metav1.Time` text), if known.
    pub time: Option<String>,
    /// The fields owned.
    pub set: Set,
}

/// Every manager of an object, by identifier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managers {
    /// Identifier text to entry.
    pub entries: BTreeMap<String, Entry>,
}

impl Managers {
    /// Whether no manager owns anything.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `id`.
    pub fn get(&self, id: &ManagerId) -> Option<&Entry> {
        self.entries.get(&id.identifier())
    }

    /// Decodes a `managedFields` list.
    ///
    /// # Errors
    ///
    /// kube's messages for an entry with a bad operation, no apiVersion, a missing or unknown
    /// fieldsType, or fields that do not decode.
    pub fn decode(list: &Value) -> Result<Managers, String> {
        let mut out = Managers::default();
        let Value::Array(items) = list else {
            return if list.is_null() { Ok(out) } else { Err("managedFields is not a list".into()) };
        };
        for (i, item) in items.iter().enumerate() {
            let Value::Object(e) = item else { return Err(format!("managed fields entry {i} is not an object")) };
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
            let operation = match s("operation") {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            if s("apiVersion").is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match s("fieldsType") {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => return Err(format!("invalid fieldsType {other:?} in managed fields entry {i}")),
            }
            let set = match e.get("fieldsV1") {
                None | Some(Value::Null) => Set::new(),
                Some(v) => from_fields_v1(v).map_err(|err| format!("error decoding versioned set: {err}"))?,
            };
            let id = ManagerId {
                manager: s("manager").into(),
                operation,
                api_version: if operation == Operation::Apply { String::new() } else { s("apiVersion").into() },
                subresource: s("subresource").into(),
            };
            let time = e.get("time").and_then(Value::as_str).map(String::from);
            out.entries.insert(id.identifier(), Entry { id, api_version: s("apiVersion").into(), time, set });
        }
        Ok(out)
    }

    /// Encodes the list kube stores, sorted as kube sorts it (operation, time, manager,
    /// apiVersion, subresource); `None` when there is no manager (the field is then absent).
    pub fn encode(&self) -> Option<Value> {
        if self.entries.is_empty() {
            return None;
        }
        let mut entries: Vec<&Entry> = self.entries.values().collect();
        entries.sort_by(|p, q| {
            let secs = |e: &Entry| e.time.as_deref().and_then(crate::clock::parse_rfc3339).unwrap_or(0);
            p.id.operation
                .cmp(&q.id.operation)
                .then_with(|| secs(p).cmp(&secs(q)))
                .then_with(|| p.id.manager.cmp(&q.id.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.id.subresource.cmp(&q.id.subresource))
        });
        let list = entries
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), e.id.manager.clone().into());
                m.insert("operation".into(), e.id.operation.as_str().into());
                m.insert("apiVersion".into(), e.api_version.clone().into());
                if let Some(t) = &e.time {
                    m.insert("time".into(), t.clone().into());
                }
                m.insert("fieldsType".into(), "FieldsV1".into());
                m.insert("fieldsV1".into(), to_fields_v1_value(&e.set));
                if !e.id.subresource.is_empty() {
                    m.insert("subresource".into(), e.id.subresource.clone().into());
                }
                Value::Object(m)
            })
            .collect();
        Some(Value::Array(list))
    }
}

/// Whether a request's `managedFields` asks for a reset: an empty list, or one empty entry.
pub fn is_reset(list: Option<&Value>) -> bool {
    match list {
        Some(Value::Array(items)) => match items.as_slice() {
            [] => true,
            [Value::Object(only)] => only.is_empty(),
            _ => false,
        },
        _ => false,
    }
}
