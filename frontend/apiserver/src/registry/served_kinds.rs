//! [`ServedKinds`]: the kinds a server serves, handed to the generic server when it is built
//! (kube's `APIGroupInfo` and OpenAPI definitions). The generic store, the REST routes,
//! discovery and OpenAPI ask it; nothing in the generic server names a kind itself. The
//! built-in API implements it with its table of 59 kinds.
//!
//! For example, `GET /apis/apps/v1/namespaces/default/deployments` is served because
//! `find("apps", "v1", "deployments")` returns a row; `-o wide` prints the columns of
//! `printer(row)`; a create with `fieldValidation=Strict` is refused when
//! `prune_unknown_fields(row, body)` returns a path.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;
use serde_json::{Map, Value};
use sha2::{Digest, Sha512};

use ballast_apimachinery::typed::TypeSchema;

use super::kind::ResourceKind;
use super::table::Printer;
use crate::served::VirtualResource;

/// One serialized document and its hash.
#[derive(Debug, Clone)]
pub struct Document {
    /// The JSON bytes.
    pub json: Bytes,
    /// Upper-case hex SHA-512 of `json`, as kube-openapi computes its ETag and `?hash=`.
    pub hash: String,
}

impl Document {
    /// Wraps `json`, computing its hash.
    pub fn new(json: Vec<u8>) -> Document {
        let hash = hex_upper(&Sha512::digest(&json));
        Document { json: Bytes::from(json), hash }
    }
}

/// Upper-case hex, as kube-openapi spells hashes.
pub fn hex_upper(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02X}");
        s
    })
}

/// Every document, built once.
#[derive(Debug)]
pub struct Documents {
    /// The v3 index (`/openapi/v3`).
    pub v3_index: Document,
    /// The v3 documents by index key (`api/v1`, `apis/apps/v1`).
    pub v3: BTreeMap<String, Document>,
    /// The v2 document (`/openapi/v2`) as JSON.
    pub v2: Document,
    /// The v2 document in gnostic's protobuf form; its ETag is the JSON's hash.
    pub v2_protobuf: Bytes,
}

/// One API group as discovery lists it.
#[derive(Debug)]
pub struct ApiGroup {
    /// The group name ("" for core).
    pub name: &'static str,
    /// Served versions, preferred first.
    pub versions: &'static [&'static str],
}

/// The kinds one server serves, and what describes them.
pub trait ServedKinds: Send + Sync + std::fmt::Debug {
    /// The served groups, in discovery order; the first version of each is the preferred one.
    fn groups(&self) -> &'static [ApiGroup];

    /// Every served kind, in table order.
    fn kinds(&self) -> &[&'static ResourceKind];

    /// The namespaces kind: the store checks namespaces before creating in them, and their
    /// deletion empties them (kube's namespace lifecycle).
    fn namespaces(&self) -> &'static ResourceKind;

    /// The Table columns and cells of `kind` (kube's table convertor).
    fn printer(&self, kind: &ResourceKind) -> &'static Printer;

    /// Removes the fields below the top level of `obj` that `kind`'s schema does not know and
    /// returns their paths, sorted (`spec.foo`, `spec.containers[0].bar`).
    fn prune_unknown_fields(&self, kind: &ResourceKind, obj: &mut Map<String, Value>) -> Vec<String>;

    /// Returns the decoder's complaint about the first value of `obj` whose JSON type its Go
    /// type cannot take (`json: cannot unmarshal object into Go struct field ...`), or None.
    /// Kinds without a schema are not checked.
    fn type_mismatch(&self, _kind: &ResourceKind, _obj: &Map<String, Value>) -> Option<String> {
        None
    }

    /// The resources answered without storage by the same server (the built-in API's access
    /// reviews), for discovery to list next to the kinds.
    fn virtual_resources(&self) -> &'static [VirtualResource];

    /// The OpenAPI documents, built on first use (CPU work: async callers try
    /// [`ServedKinds::openapi_if_built`] first and build on a blocking thread).
    fn openapi(&self) -> &'static Documents;

    /// The OpenAPI documents if they have been built.
    fn openapi_if_built(&self) -> Option<&'static Documents>;

    /// Whether managedFields entries recorded through another version of `kind` are compared
    /// and pruned in their own version (kube's version converter), converted through the
    /// rows of the kind's storage; otherwise every entry is compared in the request's version.
    fn converts_managed_fields(&self, _kind: &ResourceKind) -> bool {
        true
    }

    /// The server-side-apply schema of `kind`: by default from its generated tables (deduced
    /// without them); a server serving custom resources answers from their OpenAPI v3
    /// schemas (`TypeSchema::from_openapi_v3`).
    fn apply_schema(&self, kind: &ResourceKind) -> Arc<TypeSchema> {
        generated_apply_schema(kind)
    }

    /// Returns the kind served at `group/version/resource`.
    fn find(&self, group: &str, version: &str, resource: &str) -> Option<&'static ResourceKind> {
        self.kinds().iter().copied().find(|k| k.group == group && k.version == version && k.resource == resource)
    }

    /// Returns the kinds of one group version, in table order.
    fn of<'a>(&'a self, group: &'a str, version: &'a str) -> Box<dyn Iterator<Item = &'static ResourceKind> + 'a> {
        Box::new(self.kinds().iter().copied().filter(move |k| k.group == group && k.version == version))
    }
}

/// Each kind's types, built once per schema table (kinds without a table are deduced).
static SCHEMAS: LazyLock<Mutex<HashMap<usize, Arc<TypeSchema>>>> = LazyLock::new(Default::default);

/// The server-side-apply schema of `kind` from its generated tables (what
/// [`ServedKinds::apply_schema`] answers unless a server says otherwise).
pub fn generated_apply_schema(kind: &ResourceKind) -> Arc<TypeSchema> {
    let Some(message) = kind.object_schema() else { return Arc::new(TypeSchema::deduced()) };
    let key = message as *const _ as usize;
    let mut cache = SCHEMAS.lock().unwrap_or_else(|p| p.into_inner());
    cache.entry(key).or_insert_with(|| Arc::new(TypeSchema::from_message(message))).clone()
}
