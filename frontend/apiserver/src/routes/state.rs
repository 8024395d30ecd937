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
    /// The storage engine in this process, checked by the health endpoints (`None` for a
    /// frontend of a remote store).
    pub engine_probe: Option<EngineProbe>,
}

/// Why the storage engine in this process stopped (`shard N stopped: cause`), or `None` while
/// it runs.
#[derive(Clone)]
pub struct EngineProbe(pub Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl std::fmt::Debug for EngineProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EngineProbe")
    }
}
