//! Request body limit: a declared `Content-Length` over the limit is refused at once with 413;
//! a chunked body is wrapped so reading past the limit fails, which handlers turn into the same
//! 413 (kube limits bodies to 3 MiB by default, `MaxRequestBodyBytes`).

use http_body_util::{BodyExt, Limited};

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::body::{BodyError, Request, Response};
use crate::error::ApiError;

/// The default limit: 3 MiB, kube-apiserver's.
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The body-limit filter.
#[derive(Debug, Clone)]
pub struct BodyLimitLayer {
    limit: usize,
}

impl BodyLimitLayer {
    /// Builds the filter.
    pub fn new(limit: usize) -> Self {
        BodyLimitLayer { limit }
    }
}

filter_layer!(BodyLimitLayer);

/// The body-limit service.
pub type BodyLimit<S> = Filtered<BodyLimitLayer, S>;

/// Marks a request whose body is limited, so handlers can report the limit.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimitBytes(pub usize);

impl Filter for BodyLimitLayer {
    async fn filter<S: Inner>(self, req: Request, next: S) -> Response {
        let declared = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > self.limit) {
            return ApiError::RequestEntityTooLarge { limit: self.limit }.into_response();
        }
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(BodyLimitBytes(self.limit));
        let body = Limited::new(body, self.limit).map_err(BodyError).boxed_unsync();
        call_next(next, http::Request::from_parts(parts, body)).await
    }
}
