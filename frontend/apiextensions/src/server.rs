//! [`ApiextensionsServer`]: the server of the delegation chain that answers custom resources
//! (REST through the generic server's routes on a store of [`CrdKinds`]), the discovery of
//! their groups (`/apis/<group>[/<version>]`) and their OpenAPI v3 documents; and [`Apis`],
//! what the built-in API lists of them in `/apis` and the `/openapi/v3` index.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use http::{HeaderValue, StatusCode};
use serde_json::Value;

use ballast_apiserver::body::{self, Request, Response};
use ballast_apiserver::delegation::{DelegatedApis, Server};
use ballast_apiserver::error::ApiError;
use ballast_apiserver::filters::ResponseFuture;
use ballast_apiserver::registry::served_kinds::Document;
use ballast_apiserver::registry::ServedKinds;
use ballast_apiserver::request_info::RequestInfo;
use ballast_apiserver::routes::discovery::{aggregated_group, group_document, legacy_group, resource_list};
use ballast_apiserver::routes::negotiation::{accept, accepts_json, SUPPORTED};
use ballast_apiserver::routes::{openapi, resource, AppState};

use crate::registry::{CrdKinds, Registry, Snapshot};

/// The apiextensions server.
#[derive(Debug, Clone)]
pub struct ApiextensionsServer {
    state: Arc<AppState>,
    registry: Arc<Registry>,
}

impl ApiextensionsServer {
    /// A server of the resources in `registry`, with `state` (whose store serves a
    /// [`CrdKinds`] of the same registry).
    pub fn new(state: Arc<AppState>, registry: Arc<Registry>) -> Self {
        ApiextensionsServer { state, registry }
    }
}

/// Splits `/apis/<group>[/<version>]` or `/openapi/v3/apis/<group>/<version>`.
fn group_path(path: &str) -> Option<(bool, &str, Option<&str>)> {
    let path = path.trim_end_matches('/');
    if let Some(rest) = path.strip_prefix("/openapi/v3/apis/") {
        let (g, v) = rest.split_once('/')?;
        return Some((true, g, Some(v)));
    }
    let rest = path.strip_prefix("/apis/")?;
    match rest.split_once('/') {
        Some((g, v)) if !v.contains('/') => Some((false, g, Some(v))),
        Some(_) => None,
        None => Some((false, rest, None)),
    }
}

impl Server for ApiextensionsServer {
    fn serves(&self, req: &Request) -> bool {
        let snap = self.registry.snapshot();
        if let Some(info) = req.extensions().get::<RequestInfo>().filter(|i| i.is_resource_request) {
            return snap
                .kinds
                .iter()
                .any(|k| k.group == info.api_group && k.version == info.api_version && k.resource == info.resource);
        }
        // A version of a served group that no definition serves goes on to the end of the
        // chain, as kube's version discovery hands it on.
        match group_path(req.uri().path()) {
            Some((true, group, _)) => snap.groups.iter().any(|g| g.name == group),
            Some((false, group, version)) => {
                snap.groups.iter().any(|g| g.name == group && version.is_none_or(|v| g.versions.contains(&v)))
            }
            None => false,
        }
    }

    fn serve(&self, req: Request) -> ResponseFuture {
        let this = self.clone();
        Box::pin(async move { Ok(this.answer(req).await.unwrap_or_else(ApiError::into_response)) })
    }
}

impl ApiextensionsServer {
    async fn answer(&self, req: Request) -> Result<Response, ApiError> {
        let snap = self.registry.snapshot();
        if let Some(info) = req.extensions().get::<RequestInfo>().filter(|i| i.is_resource_request).cloned() {
            let served = snap.served.iter().find(|s| {
                s.kind.group == info.api_group && s.kind.version == info.api_version && s.kind.resource == info.resource
            });
            if served.is_some_and(|s| s.terminating) && info.verb == "create" {
                return Ok(refused_while_terminating(&info));
            }
            let warning = served.and_then(|s| s.warning.clone());
            let mut resp = self.registry.pinned(snap.clone(), resource::handle(&self.state, info, req)).await?;
            if let Some(w) = warning {
                let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
                if let Ok(v) = HeaderValue::from_str(&text) {
                    resp.headers_mut().append(http::header::WARNING, v);
                }
            }
            return Ok(resp);
        }
        if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
            return Err(ApiError::MethodNotSupported {
                group: String::new(),
                resource: String::new(),
                verb: req.method().to_string().to_lowercase(),
            });
        }
        let (is_openapi, group, version) = group_path(req.uri().path()).ok_or(ApiError::NoRoute)?;
        let g = snap.groups.iter().find(|g| g.name == group).ok_or(ApiError::NoRoute)?;
        if is_openapi {
            let key = format!("apis/{group}/{}", version.unwrap_or(""));
            let doc = crate::openapi::documents(&snap).remove(&key).ok_or(ApiError::NoRoute)?;
            return openapi::group_version(&key, &doc, req.uri().query(), req.headers());
        }
        if !accepts_json(&accept(req.headers())) {
            return Err(ApiError::NotAcceptable(SUPPORTED.into()));
        }
        let kinds = CrdKinds(self.registry.clone());
        match version {
            None => Ok(body::json(StatusCode::OK, &group_document(g))),
            Some(v) if g.versions.contains(&v) => Ok(body::json(StatusCode::OK, &resource_list(&kinds, group, v))),
            Some(_) => Err(ApiError::NoRoute),
        }
    }
}

/// kube's answer to a create while the definition is being deleted: 405 `MethodNotAllowed`
/// with its own message.
fn refused_while_terminating(info: &RequestInfo) -> Response {
    let err = ApiError::MethodNotSupported {
        group: info.api_group.clone(),
        resource: info.resource.clone(),
        verb: info.verb.clone(),
    };
    let mut status = err.status();
    status["message"] = format!("{} not allowed while custom resource definition is terminating", info.verb).into();
    body::json(StatusCode::METHOD_NOT_ALLOWED, &status)
}

/// The custom resource groups, for the built-in API's documents.
#[derive(Debug)]
pub struct Apis {
    registry: Arc<Registry>,
    /// The last merged v2 document, with the snapshot and base document hash it was built
    /// from: rebuilt only when a definition or the base changes. The snapshot is only compared
    /// by address (not kept: it holds its rows' compiled parts).
    v2: Mutex<Option<MergedV2>>,
}

#[derive(Debug)]
struct MergedV2 {
    snapshot: Weak<Snapshot>,
    base_hash: String,
    document: (Document, bytes::Bytes),
}

impl Apis {
    /// The groups of `registry`.
    pub fn new(registry: Arc<Registry>) -> Apis {
        Apis { registry, v2: Mutex::new(None) }
    }
}

impl DelegatedApis for Apis {
    fn serves_group(&self, group: &str) -> bool {
        self.registry.snapshot().groups.iter().any(|g| g.name == group)
    }

    fn legacy_groups(&self) -> Vec<Value> {
        self.registry.snapshot().groups.iter().map(legacy_group).collect()
    }

    fn aggregated_groups(&self) -> Vec<Value> {
        let kinds = CrdKinds(self.registry.clone());
        let snap: Arc<Snapshot> = self.registry.snapshot();
        snap.groups.iter().map(|g| aggregated_group(&kinds, g)).collect()
    }

    fn openapi_v3_paths(&self) -> Vec<(String, String)> {
        let snap = self.registry.snapshot();
        crate::openapi::documents(&snap).into_iter().map(|(k, d): (String, Document)| (k, d.hash)).collect()
    }

    fn namespaced_kinds(&self) -> Option<Arc<dyn ServedKinds>> {
        Some(Arc::new(CrdKinds(self.registry.clone())))
    }

    fn openapi_v2(&self, base: &Document) -> Option<(Document, bytes::Bytes)> {
        let snap = self.registry.snapshot();
        if snap.served.is_empty() {
            return None;
        }
        let mut cached = self.v2.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = cached
            .as_ref()
            .filter(|c| std::ptr::eq(c.snapshot.as_ptr(), Arc::as_ptr(&snap)) && c.base_hash == base.hash)
        {
            return Some(c.document.clone());
        }
        let base_doc: Value = serde_json::from_slice(&base.json).ok()?;
        let document = crate::openapi::v2_document(&base_doc, &snap);
        *cached = Some(MergedV2 {
            snapshot: Arc::downgrade(&snap),
            base_hash: base.hash.clone(),
            document: document.clone(),
        });
        Some(document)
    }
}
