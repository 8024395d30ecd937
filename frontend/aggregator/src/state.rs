//! [`Shared`]: what the aggregator's server and controllers share: its settings, the
//! front-proxy identity, the followed APIServices (as [`Routes`]), Services and EndpointSlices,
//! and the discovery documents fetched from extension servers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::watch;

use ballast_apiserver::registry::served_kinds::Document;

use crate::apiservice::ApiService;
use crate::backend::{tls_config, BackendError, ClientIdentity, Target};
use crate::config::AggregatorConfig;
use crate::informer::{Objects, Snapshots};
use crate::pool::{BackendKey, Pool};
use crate::resolve::{resolve, Unresolved};

/// The APIServices by group and version.
#[derive(Debug, Default)]
pub struct Routes {
    /// Every APIService, keyed by (group, version).
    pub by_group_version: BTreeMap<(String, String), ApiService>,
}

impl Routes {
    /// Reads the followed APIService objects.
    pub fn from_objects(objects: &Objects) -> Routes {
        let by_group_version =
            objects.values().map(ApiService::from_json).map(|a| ((a.group.clone(), a.version.clone()), a)).collect();
        Routes { by_group_version }
    }

    /// The APIService of `group`/`version`.
    pub fn get(&self, group: &str, version: &str) -> Option<&ApiService> {
        self.by_group_version.get(&(group.to_string(), version.to_string()))
    }

    /// The APIServices served elsewhere.
    pub fn remote(&self) -> impl Iterator<Item = &ApiService> {
        self.by_group_version.values().filter(|a| !a.is_local())
    }
}

/// What an extension server last said its group version serves (its `APIResourceList`).
#[derive(Debug, Clone)]
pub struct RemoteDocument {
    /// The `APIResourceList`, from the last check that got one.
    pub resources: Option<Value>,
    /// Whether the last check got it (else the document is stale or missing).
    pub fresh: bool,
}

/// The aggregator's shared state.
#[derive(Debug)]
pub struct Shared {
    /// Settings.
    pub config: AggregatorConfig,
    /// The front-proxy client certificate.
    pub identity: ClientIdentity,
    /// Keep-alive connections to the extension servers.
    pub pool: Arc<Pool>,
    /// The APIServices, as routes; `None` until first listed.
    pub routes: watch::Receiver<Option<Arc<Routes>>>,
    /// The raw APIService objects (for status writes).
    pub apiservices: Snapshots,
    /// Every Service.
    pub services: Snapshots,
    /// Every EndpointSlice, followed only with aggregator routing.
    pub endpoint_slices: Option<Snapshots>,
    /// Discovery documents of remote APIServices, by APIService name.
    documents: Mutex<HashMap<String, RemoteDocument>>,
    /// OpenAPI v3 documents of remote APIServices, by APIService name.
    openapi: Mutex<HashMap<String, Document>>,
    /// OpenAPI v2 documents of remote APIServices, by APIService name.
    openapi_v2: Mutex<HashMap<String, Document>>,
    /// The last merged `/openapi/v2`, reused while its inputs are the same.
    merged_v2: Mutex<Option<MergedV2>>,
}

/// A merged `/openapi/v2` document and what it was made of.
#[derive(Debug, Clone)]
pub struct MergedV2 {
    /// The hashes of the delegate's document and of the remote ones, in merge order.
    pub key: Vec<String>,
    /// The merged document.
    pub json: Document,
    /// Its protobuf form.
    pub protobuf: bytes::Bytes,
}

/// Why a request cannot be sent to an APIService's server.
#[derive(Debug)]
pub enum TargetError {
    /// The Service is unusable.
    Unresolved(Unresolved),
    /// The TLS client could not be built.
    Backend(BackendError),
    /// Services are not listed yet.
    NotReady,
}

impl Shared {
    /// The state, with the routes derived from `apiservices` on the current runtime.
    pub fn new(
        config: AggregatorConfig,
        identity: ClientIdentity,
        apiservices: Snapshots,
        services: Snapshots,
        endpoint_slices: Option<Snapshots>,
    ) -> Shared {
        let (tx, routes) = watch::channel(None);
        let mut source = apiservices.clone();
        tokio::spawn(async move {
            loop {
                let current = source.borrow_and_update().clone();
                if let Some(objects) = current {
                    tx.send_replace(Some(Arc::new(Routes::from_objects(&objects))));
                }
                if source.changed().await.is_err() || tx.is_closed() {
                    return;
                }
            }
        });
        Shared {
            pool: Pool::new(config.pool_idle_per_backend, config.pool_idle_timeout),
            config,
            identity,
            routes,
            apiservices,
            services,
            endpoint_slices,
            documents: Mutex::default(),
            openapi: Mutex::default(),
            openapi_v2: Mutex::default(),
            merged_v2: Mutex::default(),
        }
    }

    /// The current routes (empty until the APIServices are listed).
    pub fn routes(&self) -> Arc<Routes> {
        self.routes.borrow().clone().unwrap_or_default()
    }

    /// Where `api`'s server is reached now.
    ///
    /// # Errors
    ///
    /// Why it cannot be.
    pub fn target(&self, api: &ApiService) -> Result<Target, TargetError> {
        let Some(service) = &api.service else { return Err(TargetError::NotReady) };
        let services = self.services.borrow().clone().ok_or(TargetError::NotReady)?;
        let slices = match &self.endpoint_slices {
            Some(s) => Some(s.borrow().clone().ok_or(TargetError::NotReady)?),
            None => None,
        };
        let (host, port) = resolve(service, &services, slices.as_ref()).map_err(TargetError::Unresolved)?;
        let tls = tls_config(api, &self.identity).map_err(TargetError::Backend)?;
        let server_name = service.server_name();
        let key = BackendKey {
            host: host.clone(),
            port,
            server_name: server_name.clone(),
            ca_bundle: api.ca_bundle.clone(),
            insecure: api.insecure_skip_tls_verify,
        };
        Ok(Target { host, port, server_name, tls, key })
    }

    /// The discovery document last fetched for APIService `name`.
    pub fn document(&self, name: &str) -> Option<RemoteDocument> {
        self.documents.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// Records a check's outcome: the new document, or `None` when the check failed (the old
    /// one is kept, marked stale).
    pub fn record_document(&self, name: &str, resources: Option<Value>) {
        let mut docs = self.documents.lock().unwrap_or_else(PoisonError::into_inner);
        match resources {
            Some(r) => {
                docs.insert(name.to_string(), RemoteDocument { resources: Some(r), fresh: true });
            }
            None => {
                docs.entry(name.to_string()).or_insert(RemoteDocument { resources: None, fresh: false }).fresh = false;
            }
        }
    }

    /// The OpenAPI v3 document last fetched for APIService `name`.
    pub fn openapi(&self, name: &str) -> Option<Document> {
        self.openapi.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// Keeps `doc` as APIService `name`'s OpenAPI v3 document.
    pub fn record_openapi(&self, name: &str, doc: Document) {
        self.openapi.lock().unwrap_or_else(PoisonError::into_inner).insert(name.to_string(), doc);
    }

    /// The OpenAPI v2 document last fetched for APIService `name`.
    pub fn openapi_v2(&self, name: &str) -> Option<Document> {
        self.openapi_v2.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// Keeps `doc` as APIService `name`'s OpenAPI v2 document.
    pub fn record_openapi_v2(&self, name: &str, doc: Document) {
        self.openapi_v2.lock().unwrap_or_else(PoisonError::into_inner).insert(name.to_string(), doc);
    }

    /// The last merged `/openapi/v2`.
    pub fn merged_v2(&self) -> Option<MergedV2> {
        self.merged_v2.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Keeps `merged` as the last merged `/openapi/v2`.
    pub fn record_merged_v2(&self, merged: MergedV2) {
        *self.merged_v2.lock().unwrap_or_else(PoisonError::into_inner) = Some(merged);
    }

    /// Forgets the documents of APIServices that are gone or local.
    pub fn retain_documents(&self, routes: &Routes) {
        let keep: std::collections::HashSet<&str> = routes.remote().map(|a| a.name.as_str()).collect();
        self.documents.lock().unwrap_or_else(PoisonError::into_inner).retain(|k, _| keep.contains(k.as_str()));
        self.openapi.lock().unwrap_or_else(PoisonError::into_inner).retain(|k, _| keep.contains(k.as_str()));
        self.openapi_v2.lock().unwrap_or_else(PoisonError::into_inner).retain(|k, _| keep.contains(k.as_str()));
    }
}
