//! Authentication: turns the connection's client certificate or the bearer token into a
//! `UserInfo` request extension, or answers 401. The `Authorization` header is removed once
//! used, so handlers never see credentials (as kube does).

use std::sync::Arc;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::authn::{Authenticator, PeerCertificates};
use crate::body::{Request, Response};

/// The authentication filter.
#[derive(Debug, Clone)]
pub struct AuthenticationLayer {
    authenticator: Arc<Authenticator>,
}

impl AuthenticationLayer {
    /// Builds the filter.
    pub fn new(authenticator: Arc<Authenticator>) -> Self {
        AuthenticationLayer { authenticator }
    }
}

filter_layer!(AuthenticationLayer);

/// The authentication service.
pub type Authentication<S> = Filtered<AuthenticationLayer, S>;

impl Filter for AuthenticationLayer {
    async fn filter<S: Inner>(self, mut req: Request, next: S) -> Response {
        let peer = req.extensions().get::<PeerCertificates>().cloned().unwrap_or_default();
        match self.authenticator.authenticate(&peer, req.headers()) {
            Ok(user) => {
                req.headers_mut().remove(http::header::AUTHORIZATION);
                req.extensions_mut().insert(user);
                call_next(next, req).await
            }
            Err(e) => e.into_response(),
        }
    }
}
