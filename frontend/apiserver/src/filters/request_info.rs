//! Request info: parses method, path and query into a `RequestInfo` request extension, which
//! authorization, flow control and routing read. Runs before authentication, as in kube.

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::body::{Request, Response};
use crate::request_info;

/// The request-info filter.
#[derive(Debug, Clone, Default)]
pub struct RequestInfoLayer;

filter_layer!(RequestInfoLayer);

/// The request-info service.
pub type RequestInfoService<S> = Filtered<RequestInfoLayer, S>;

impl Filter for RequestInfoLayer {
    async fn filter<S: Inner>(self, mut req: Request, next: S) -> Response {
        let info = request_info::parse(req.method(), req.uri().path(), req.uri().query());
        req.extensions_mut().insert(info);
        call_next(next, req).await
    }
}
