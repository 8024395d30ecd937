//! The REST operations of one group version, derived from the built-in kinds table and discovery's
//! subresource list (so OpenAPI and discovery never disagree), in a form both documents render.
//!
//! The review resources `routes::access_review` serves (create only) are listed too.
//!
//! Operation ids follow kube-apiserver's scheme: `<verb><Group><Version>[Namespaced]<Kind>
//! [<Subresource>]`, e.g. `createCoreV1NamespacedConfigMap`, `listAppsV1DeploymentForAllNamespaces`,
//! `deleteCoreV1CollectionNamespacedPod`, `watchCoreV1NamespacedPodList`,
//! `readAppsV1NamespacedDeploymentScale`. Each operation carries `x-kubernetes-action` and
//! `x-kubernetes-group-version-kind`; kubectl's query-parameter verifier looks for a `patch`
//! operation with the kind's GVK and a `fieldValidation` (or `dryRun`) query parameter.

use crate::kinds;
use crate::reviews::VIRTUAL_RESOURCES;
use ballast_apiserver::registry::ResourceKind;
use ballast_apiserver::served::{self as discovery, VirtualResource};

use super::schemas::{self, Definitions};

/// A query parameter an operation accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryParam {
    /// The name.
    pub name: &'static str,
    /// The JSON type (`string`, `boolean`, `integer`).
    pub ty: &'static str,
    /// What it does.
    pub description: &'static str,
}

const fn q(name: &'static str, ty: &'static str, description: &'static str) -> QueryParam {
    QueryParam { name, ty, description }
}

const ALLOW_WATCH_BOOKMARKS: QueryParam =
    q("allowWatchBookmarks", "boolean", "Asks for BOOKMARK events on a watch; the server may send them or not.");
const CONTINUE: QueryParam = q("continue", "string", "The continue token of the previous page of a chunked list.");
const DRY_RUN: QueryParam =
    q("dryRun", "string", "When \"All\", the request is processed fully but nothing is persisted.");
const FIELD_MANAGER: QueryParam = q("fieldManager", "string", "The name of the actor making the change.");
const FIELD_SELECTOR: QueryParam = q("fieldSelector", "string", "Restricts the objects by their fields.");
const FIELD_VALIDATION: QueryParam = q(
    "fieldValidation",
    "string",
    "What to do with unknown or duplicate fields in the body: \"Ignore\", \"Warn\" (the default) or \"Strict\".",
);
const FORCE: QueryParam = q("force", "boolean", "Server-side apply: take ownership of conflicting fields.");
const GRACE_PERIOD_SECONDS: QueryParam =
    q("gracePeriodSeconds", "integer", "Seconds before the object is deleted; zero deletes at once.");
const IGNORE_STORE_READ_ERROR: QueryParam = q(
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "boolean",
    "Deletes an object that cannot be read from storage (unsafe).",
);
const LABEL_SELECTOR: QueryParam = q("labelSelector", "string", "Restricts the objects by their labels.");
const LIMIT: QueryParam = q("limit", "integer", "The most objects one page of a list may hold.");
const ORPHAN_DEPENDENTS: QueryParam =
    q("orphanDependents", "boolean", "Deprecated: use propagationPolicy. Whether dependents are orphaned.");
const PROPAGATION_POLICY: QueryParam = q(
    "propagationPolicy",
    "string",
    "How dependents are garbage collected: \"Orphan\", \"Background\" or \"Foreground\".",
);
const RESOURCE_VERSION: QueryParam = q("resourceVersion", "string", "Which resource version a read is served at.");
const RESOURCE_VERSION_MATCH: QueryParam =
    q("resourceVersionMatch", "string", "How resourceVersion applies to a list: \"Exact\" or \"NotOlderThan\".");
const SEND_INITIAL_EVENTS: QueryParam =
    q("sendInitialEvents", "boolean", "Starts a watch with the current objects as ADDED events, then a bookmark.");
const TIMEOUT_SECONDS: QueryParam = q("timeoutSeconds", "integer", "Ends a list or watch call after this long.");
const WATCH: QueryParam = q("watch", "boolean", "Watches for changes instead of listing.");
/// `pretty`, accepted by every path.
pub const PRETTY: QueryParam = q("pretty", "string", "If 'true', the output is pretty printed.");

const LIST_PARAMS: &[QueryParam] = &[
    ALLOW_WATCH_BOOKMARKS,
    CONTINUE,
    FIELD_SELECTOR,
    LABEL_SELECTOR,
    LIMIT,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
    WATCH,
];
const WRITE_PARAMS: &[QueryParam] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION];
const PATCH_PARAMS: &[QueryParam] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE];
const DELETE_PARAMS: &[QueryParam] =
    &[DRY_RUN, GRACE_PERIOD_SECONDS, IGNORE_STORE_READ_ERROR, ORPHAN_DEPENDENTS, PROPAGATION_POLICY];
const DELETE_COLLECTION_PARAMS: &[QueryParam] = &[
    CONTINUE,
    DRY_RUN,
    FIELD_SELECTOR,
    GRACE_PERIOD_SECONDS,
    IGNORE_STORE_READ_ERROR,
    LABEL_SELECTOR,
    LIMIT,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
];

/// What a request body holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// An object of this definition (required).
    Object(String),
    /// A patch in one of the four patch media types.
    Patch,
    /// Optional `DeleteOptions`.
    DeleteOptions,
}

/// What a successful response holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streaming {
    /// A single document.
    No,
    /// A list, which may also be a watch stream (`watch=true`).
    ListOrWatch,
    /// A watch stream of `WatchEvent`s.
    Watch,
}

/// One operation on one path.
#[derive(Debug, Clone)]
pub struct Operation {
    /// Lower-case HTTP method (`get`, `post`, `put`, `patch`, `delete`).
    pub method: &'static str,
    /// `operationId`.
    pub id: String,
    /// `description`.
    pub description: String,
    /// `x-kubernetes-action`.
    pub action: &'static str,
    /// `x-kubernetes-group-version-kind`: group, version, kind.
    pub gvk: (&'static str, &'static str, &'static str),
    /// Query parameters besides `pretty`.
    pub params: &'static [QueryParam],
    /// The request body, if any.
    pub body: Option<Body>,
    /// Success codes and the definition each answers with.
    pub responses: Vec<(u16, String)>,
    /// What kind of answer it is.
    pub streaming: Streaming,
    /// The tag (`core_v1`, `apps_v1`, `rbacAuthorization_v1`).
    pub tag: String,
}

impl Operation {
    /// The `description` of a success response with `code`, as upstream words it.
    pub fn response_description(code: u16) -> &'static str {
        match code {
            201 => "Created",
            202 => "Accepted",
            _ => "OK",
        }
    }

    /// Adds `x-kubernetes-action` and `x-kubernetes-group-version-kind` to the rendered
    /// operation, when it has an action (both documents carry them in the same form).
    pub fn insert_extensions(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        if self.action.is_empty() {
            return;
        }
        let (group, version, kind) = self.gvk;
        out.insert("x-kubernetes-action".into(), self.action.into());
        out.insert(
            "x-kubernetes-group-version-kind".into(),
            serde_json::json!({"group": group, "kind": kind, "version": version}),
        );
    }
}

/// One path with its operations.
#[derive(Debug, Clone)]
pub struct PathItem {
    /// The path, with `{namespace}` and `{name}` placeholders.
    pub path: String,
    /// Path parameters: name and description.
    pub path_params: Vec<(&'static str, String)>,
    /// The operations.
    pub operations: Vec<Operation>,
}

/// Returns the operation-id spelling of a group: `Core`, `Apps`, `RbacAuthorization`,
/// `FlowcontrolApiserver` (the `.k8s.io` suffix dropped, each dotted part capitalised).
pub fn group_id(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    trimmed.split('.').map(capitalise).collect()
}

/// Returns the tag of a group version: `core_v1`, `apps_v1`, `rbacAuthorization_v1`.
fn tag(group: &str, version: &str) -> String {
    let id = group_id(group);
    let mut chars = id.chars();
    let head = chars.next().map(|c| c.to_ascii_lowercase().to_string()).unwrap_or_default();
    format!("{head}{}_{version}", chars.as_str())
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// Returns the URL prefix of a group version: `/api/v1` or `/apis/<group>/<version>`.
pub fn base_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// Returns the key of a group version in the v3 index: `api/v1`, `apis/apps/v1`.
pub fn index_key(group: &str, version: &str) -> String {
    base_path(group, version).trim_start_matches('/').to_string()
}

struct Names<'a> {
    k: &'a ResourceKind,
    prefix: String,
    scoped: &'static str,
}

impl Names<'_> {
    fn id(&self, verb: &str, suffix: &str) -> String {
        format!("{verb}{}{}{}{suffix}", self.prefix, self.scoped, self.k.kind)
    }
}

/// Returns the paths of one group version, in the registry's order.
pub fn paths(group: &'static str, version: &'static str, defs: &Definitions) -> Vec<PathItem> {
    let base = base_path(group, version);
    let tag = tag(group, version);
    let mut out = vec![PathItem {
        path: format!("{base}/"),
        path_params: Vec::new(),
        operations: vec![Operation {
            method: "get",
            id: format!("get{}{}APIResources", group_id(group), capitalise(version)),
            description: "get available resources".into(),
            action: "",
            gvk: ("", "", ""),
            params: &[],
            body: None,
            responses: vec![(200, "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList".into())],
            streaming: Streaming::No,
            tag: tag.clone(),
        }],
    }];
    for k in kinds::of(group, version) {
        resource_paths(k, &base, &tag, defs, &mut out);
    }
    for v in VIRTUAL_RESOURCES.iter().filter(|v| v.group == group && v.version == version) {
        review_path(v, &base, &tag, defs, &mut out);
    }
    out
}

/// The create-only review resources: one POST, answered `201` with the review and its status.
fn review_path(v: &VirtualResource, base: &str, tag: &str, defs: &Definitions, out: &mut Vec<PathItem>) {
    let Some(object) = defs.kind_schema(v.group, v.version, v.kind).map(str::to_string) else { return };
    let scoped = if v.namespaced { "Namespaced" } else { "" };
    let ns_segment = if v.namespaced { "/namespaces/{namespace}" } else { "" };
    out.push(PathItem {
        path: format!("{base}{ns_segment}/{}", v.resource),
        path_params: if v.namespaced {
            vec![("namespace", "object name and auth scope, such as for teams and projects".into())]
        } else {
            Vec::new()
        },
        operations: vec![Operation {
            method: "post",
            id: format!("create{}{}{scoped}{}", group_id(v.group), capitalise(v.version), v.kind),
            description: format!("create a {}", v.kind),
            action: "post",
            gvk: (v.group, v.version, v.kind),
            params: WRITE_PARAMS,
            body: Some(Body::Object(object.clone())),
            responses: vec![(200, object.clone()), (201, object.clone()), (202, object)],
            streaming: Streaming::No,
            tag: tag.to_string(),
        }],
    });
}

fn resource_paths(k: &'static ResourceKind, base: &str, tag: &str, defs: &Definitions, out: &mut Vec<PathItem>) {
    let Some(object) = defs.kind_schema(k.group, k.version, k.kind).map(str::to_string) else { return };
    let list = defs.list_schema(k.group, k.version, k.kind).unwrap_or_default();
    let names = Names {
        k,
        prefix: format!("{}{}", group_id(k.group), capitalise(k.version)),
        scoped: if k.namespaced { "Namespaced" } else { "" },
    };
    let gvk = (k.group, k.version, k.kind);
    let op = |method, id: String, description: String, action, params, body, responses: Vec<(u16, String)>| Operation {
        method,
        id,
        description,
        action,
        gvk,
        params,
        body,
        responses,
        streaming: Streaming::No,
        tag: tag.to_string(),
    };
    let ns_segment = if k.namespaced { "/namespaces/{namespace}" } else { "" };
    let collection = format!("{base}{ns_segment}/{}", k.resource);
    let item = format!("{collection}/{{name}}");
    let ns_param = || -> Vec<(&'static str, String)> {
        if k.namespaced {
            vec![("namespace", "object name and auth scope, such as for teams and projects".into())]
        } else {
            Vec::new()
        }
    };
    let item_params = || {
        let mut p = vec![("name", format!("name of the {}", k.kind))];
        p.extend(ns_param());
        p
    };
    let status = schemas::STATUS.to_string();
    let v = k.verbs;

    let mut ops = Vec::new();
    if v.allows("list") {
        let mut list_op = op(
            "get",
            names.id("list", ""),
            format!("list or watch objects of kind {}", k.kind),
            "list",
            LIST_PARAMS,
            None,
            vec![(200, list.clone())],
        );
        list_op.streaming = Streaming::ListOrWatch;
        ops.push(list_op);
    }
    if v.allows("create") {
        ops.push(op(
            "post",
            names.id("create", ""),
            format!("create a {}", k.kind),
            "post",
            WRITE_PARAMS,
            Some(Body::Object(object.clone())),
            vec![(200, object.clone()), (201, object.clone()), (202, object.clone())],
        ));
    }
    if v.allows("deletecollection") {
        ops.push(Operation {
            id: format!("delete{}Collection{}{}", names.prefix, names.scoped, k.kind),
            ..op(
                "delete",
                String::new(),
                format!("delete collection of {}", k.kind),
                "deletecollection",
                DELETE_COLLECTION_PARAMS,
                Some(Body::DeleteOptions),
                vec![(200, status.clone())],
            )
        });
    }
    if !ops.is_empty() {
        out.push(PathItem { path: collection.clone(), path_params: ns_param(), operations: std::mem::take(&mut ops) });
    }

    let deleted = if k.return_deleted_object { object.clone() } else { status.clone() };
    if v.allows("get") {
        ops.push(op(
            "get",
            names.id("read", ""),
            format!("read the specified {}", k.kind),
            "get",
            &[],
            None,
            vec![(200, object.clone())],
        ));
    }
    if v.allows("update") {
        ops.push(op(
            "put",
            names.id("replace", ""),
            format!("replace the specified {}", k.kind),
            "put",
            WRITE_PARAMS,
            Some(Body::Object(object.clone())),
            vec![(200, object.clone()), (201, object.clone())],
        ));
    }
    if v.allows("patch") {
        ops.push(op(
            "patch",
            names.id("patch", ""),
            format!("partially update the specified {}", k.kind),
            "patch",
            PATCH_PARAMS,
            Some(Body::Patch),
            vec![(200, object.clone()), (201, object.clone())],
        ));
    }
    if v.allows("delete") {
        ops.push(op(
            "delete",
            names.id("delete", ""),
            format!("delete a {}", k.kind),
            "delete",
            DELETE_PARAMS,
            Some(Body::DeleteOptions),
            vec![(200, deleted.clone()), (202, deleted)],
        ));
    }
    if !ops.is_empty() {
        out.push(PathItem { path: item.clone(), path_params: item_params(), operations: std::mem::take(&mut ops) });
    }

    for sub in discovery::subresources(k) {
        let suffix = capitalise(sub.name);
        let sub_object = defs.kind_schema(sub.group, sub.version, sub.kind).map(str::to_string);
        let Some(sub_object) = sub_object else { continue };
        let sub_gvk = (sub.group, sub.version, sub.kind);
        let mut sub_ops = Vec::new();
        for verb in sub.verbs {
            let (method, verb_id, action, params, body, responses, what) = match *verb {
                "get" => ("get", "read", "get", &[][..], None, vec![(200, sub_object.clone())], "read"),
                "update" => (
                    "put",
                    "replace",
                    "put",
                    WRITE_PARAMS,
                    Some(Body::Object(sub_object.clone())),
                    vec![(200, sub_object.clone()), (201, sub_object.clone())],
                    "replace",
                ),
                "patch" => (
                    "patch",
                    "patch",
                    "patch",
                    PATCH_PARAMS,
                    Some(Body::Patch),
                    vec![(200, sub_object.clone()), (201, sub_object.clone())],
                    "partially update",
                ),
                "create" => (
                    "post",
                    "create",
                    "post",
                    WRITE_PARAMS,
                    Some(Body::Object(sub_object.clone())),
                    vec![(200, sub_object.clone()), (201, sub_object.clone()), (202, sub_object.clone())],
                    "create",
                ),
                _ => continue,
            };
            sub_ops.push(Operation {
                gvk: sub_gvk,
                ..op(
                    method,
                    names.id(verb_id, &suffix),
                    format!("{what} {} of the specified {}", sub.name, k.kind),
                    action,
                    params,
                    body,
                    responses,
                )
            });
        }
        out.push(PathItem {
            path: format!("{item}/{}", sub.name),
            path_params: {
                let mut p = vec![("name", format!("name of the {}", sub.kind))];
                p.extend(ns_param());
                p
            },
            operations: sub_ops,
        });
    }

    if v.allows("watch") {
        let watch_op = |id: String, description: String, action| Operation {
            streaming: Streaming::Watch,
            ..op("get", id, description, action, LIST_PARAMS, None, vec![(200, schemas::WATCH_EVENT.to_string())])
        };
        out.push(PathItem {
            path: format!("{base}/watch{ns_segment}/{}", k.resource),
            path_params: ns_param(),
            operations: vec![watch_op(
                names.id("watch", "List"),
                format!("watch individual changes to a list of {}", k.kind),
                "watchlist",
            )],
        });
        out.push(PathItem {
            path: format!("{base}/watch{ns_segment}/{}/{{name}}", k.resource),
            path_params: item_params(),
            operations: vec![watch_op(
                names.id("watch", ""),
                format!("watch changes to an object of kind {}", k.kind),
                "watch",
            )],
        });
        if k.namespaced {
            out.push(PathItem {
                path: format!("{base}/watch/{}", k.resource),
                path_params: Vec::new(),
                operations: vec![watch_op(
                    format!("watch{}{}ListForAllNamespaces", names.prefix, k.kind),
                    format!("watch individual changes to a list of {}", k.kind),
                    "watchlist",
                )],
            });
        }
    }
    if k.namespaced && v.allows("list") {
        let mut all = op(
            "get",
            format!("list{}{}ForAllNamespaces", names.prefix, k.kind),
            format!("list or watch objects of kind {}", k.kind),
            "list",
            LIST_PARAMS,
            None,
            vec![(200, list)],
        );
        all.streaming = Streaming::ListOrWatch;
        out.push(PathItem { path: format!("{base}/{}", k.resource), path_params: Vec::new(), operations: vec![all] });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::schemas::{definitions, group_versions};

    #[test]
    fn ids_follow_upstream() {
        assert_eq!(group_id(""), "Core");
        assert_eq!(group_id("rbac.authorization.k8s.io"), "RbacAuthorization");
        assert_eq!(group_id("flowcontrol.apiserver.k8s.io"), "FlowcontrolApiserver");
        assert_eq!(group_id("apps"), "Apps");
        assert_eq!(tag("rbac.authorization.k8s.io", "v1"), "rbacAuthorization_v1");
        assert_eq!(index_key("", "v1"), "api/v1");
        assert_eq!(index_key("apps", "v1"), "apis/apps/v1");
    }

    fn ids(group: &'static str, version: &'static str) -> Vec<String> {
        paths(group, version, definitions()).into_iter().flat_map(|p| p.operations).map(|o| o.id).collect()
    }

    #[test]
    fn core_and_apps_operations_are_named_like_upstream() {
        let core = ids("", "v1");
        for id in [
            "createCoreV1NamespacedConfigMap",
            "listCoreV1NamespacedConfigMap",
            "listCoreV1ConfigMapForAllNamespaces",
            "deleteCoreV1CollectionNamespacedConfigMap",
            "readCoreV1NamespacedPodStatus",
            "createCoreV1NamespacedPodBinding",
            "replaceCoreV1NamespaceFinalize",
            "watchCoreV1NamespacedPodList",
            "watchCoreV1PodListForAllNamespaces",
            "watchCoreV1Namespace",
            "patchCoreV1Node",
            "getCoreV1APIResources",
        ] {
            assert!(core.contains(&id.to_string()), "{id}");
        }
        let apps = ids("apps", "v1");
        assert!(apps.contains(&"readAppsV1NamespacedDeploymentScale".to_string()));
        assert!(apps.contains(&"patchAppsV1NamespacedDeployment".to_string()));
        let unique: std::collections::HashSet<_> = core.iter().collect();
        assert_eq!(unique.len(), core.len(), "operation ids are unique");
    }

    #[test]
    fn reviews_are_create_only() {
        let ids = ids("authorization.k8s.io", "v1");
        assert!(ids.contains(&"createAuthorizationV1SelfSubjectAccessReview".to_string()), "{ids:?}");
        assert!(ids.contains(&"createAuthorizationV1NamespacedLocalSubjectAccessReview".to_string()), "{ids:?}");
        assert!(ids.iter().all(|id| id.starts_with("create") || id.starts_with("get")), "{ids:?}");
        assert!(group_versions().contains(&("authentication.k8s.io", "v1")));
    }

    #[test]
    fn patch_of_every_patchable_kind_has_field_validation() {
        for (g, v) in group_versions() {
            for p in paths(g, v, definitions()) {
                for o in p.operations.iter().filter(|o| o.method == "patch") {
                    assert!(o.params.iter().any(|q| q.name == "fieldValidation"), "{}", o.id);
                    assert!(o.params.iter().any(|q| q.name == "dryRun"), "{}", o.id);
                }
            }
        }
    }
}
