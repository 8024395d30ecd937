//! [`AppState`]: what the route handlers share.

use std::sync::Arc;

use crate::registry::Store;

/// What handlers share.
#[derive(Debug)]
pub struct AppState {
    /// The registry.
    pub store: Store,
    /// The version `/version` reports.
    pub version: crate::served::Version,
    /// `host:port` advertised in `/api`'s `serverAddressByClientCIDRs`.
    pub advertise_address: String,
    /// The metric registry `/metrics` renders.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The per-resource watch caches.
    pub watch_cache: crate::watch_cache::WatchCaches,
    /// What the servers behind this one serve, listed in this one's discovery and OpenAPI
    /// index; `None` when nothing behind it serves APIs.
    pub delegated: Option<Arc<dyn crate::delegation::DelegatedApis>>,
}
