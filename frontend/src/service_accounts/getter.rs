//! [`StoreGetter`]: the token authenticator's reads of ServiceAccounts, Pods and Secrets, from
//! the built-in API's store.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::builtin::BuiltinKinds;
use ballast_apiserver::authn::service_account::{BoundKind, LiveObject, ObjectGetter};
use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::{ResourceKind, ServedKinds, Store};

/// The core kind a token names.
pub(crate) fn kind(resource: &str) -> Result<&'static ResourceKind, ApiError> {
    BuiltinKinds.find("", "v1", resource).ok_or_else(|| ApiError::Internal(format!("no {resource} kind")))
}

/// Reads the objects tokens name from the built-in API's store.
#[derive(Debug, Clone)]
pub struct StoreGetter {
    store: Store,
}

impl StoreGetter {
    /// A getter on `store`.
    pub fn new(store: Store) -> Self {
        StoreGetter { store }
    }
}

impl ObjectGetter for StoreGetter {
    fn get<'a>(
        &'a self,
        bound: BoundKind,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<LiveObject>, ApiError>> {
        Box::pin(async move {
            let resource = match bound {
                BoundKind::ServiceAccount => "serviceaccounts",
                BoundKind::Pod => "pods",
                BoundKind::Secret => "secrets",
            };
            match self.store.get(kind(resource)?, namespace, name).await {
                Ok(obj) => Ok(Some(live(&obj))),
                Err(ApiError::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
}

/// The uid and deletion time of an object.
fn live(obj: &serde_json::Map<String, Value>) -> LiveObject {
    let meta = &obj.get("metadata").cloned().unwrap_or_default();
    LiveObject {
        uid: meta["uid"].as_str().unwrap_or_default().to_string(),
        deletion_timestamp: meta["deletionTimestamp"].as_str().and_then(ballast_apimachinery::clock::parse_rfc3339),
    }
}
