//! `RequestInfo`: what a URL asks for, parsed the way kube-apiserver's `RequestInfoFactory`
//! does, so authorization and routing see the same verb, group, version, resource,
//! subresource, namespace and name kube-apiserver would.
//!
//! ```text
//! /api/v1/namespaces/ns/configmaps/x        get|update|patch|delete  ns=ns resource=configmaps name=x
//! /api/v1/namespaces/ns/configmaps          list|watch|create|deletecollection
//! /api/v1/namespaces/x                      resource=namespaces name=x namespace=x (kube quirk)
//! /api/v1/watch/namespaces/ns/configmaps    watch (deprecated prefix)
//! /apis/apps/v1/namespaces/ns/deployments/d/scale   subresource=scale
//! /healthz, /api, /apis/apps                non-resource; verb = lower-case method
//! ```

/// The parsed request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path names an API resource (else it is a non-resource URL like `/healthz`).
    pub is_resource_request: bool,
    /// The URL path.
    pub path: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, ...) or, for non-resource
    /// requests, the lower-case HTTP method.
    pub verb: String,
    /// `api` or `apis`.
    pub api_prefix: String,
    /// API group, "" for core.
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace, "" when cluster-scoped or across all namespaces.
    pub namespace: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource, e.g. `status`.
    pub subresource: String,
    /// Object name, may come from a `metadata.name=` field selector on list and watch.
    pub name: String,
    /// The path segments from the resource on.
    pub parts: Vec<String>,
}

impl RequestInfo {
    /// Returns whether the verb writes.
    pub fn is_mutating(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection" | "post" | "put")
    }

    /// Returns whether the request holds its connection open indefinitely (exempt from the
    /// in-flight limit, as kube's `LongRunningRequestCheck` makes watches and proxies).
    pub fn is_long_running(&self) -> bool {
        self.verb == "watch"
            || self.verb == "proxy"
            || matches!(self.subresource.as_str(), "exec" | "attach" | "portforward" | "proxy" | "log")
    }
}

/// Decodes `%xx` escapes and `+` in a query component.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string into decoded pairs, tolerating the empty components kube-rs sends
/// (`?&limit=500`).
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

/// Returns the first value of query parameter `key`.
pub fn query_param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Returns the name an exact `metadata.name=` (or `==`) requirement in a field selector pins.
fn name_from_field_selector(selector: &str) -> Option<String> {
    selector.split(',').find_map(|req| {
        let (field, value) = req.split_once("==").or_else(|| req.split_once('='))?;
        if field.ends_with('!') {
            return None;
        }
        (field.trim() == "metadata.name").then(|| value.trim().to_string())
    })
}

/// Returns whether `name` may be a path segment (kube's `IsValidPathSegmentName`).
fn valid_path_segment(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// Parses a request's method, path and query.
pub fn parse(method: &http::Method, path: &str, query: Option<&str>) -> RequestInfo {
    let mut info =
        RequestInfo { path: path.to_string(), verb: method.as_str().to_ascii_lowercase(), ..Default::default() };
    let mut parts: Vec<&str> = path.trim_matches('/').split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() < 3 || !(parts[0] == "api" || parts[0] == "apis") {
        return info;
    }
    info.api_prefix = parts[0].to_string();
    parts.remove(0);
    if info.api_prefix == "apis" {
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts.remove(0).to_string();
    }
    info.is_resource_request = true;
    info.api_version = parts.remove(0).to_string();

    if parts.first().is_some_and(|p| *p == "watch" || *p == "proxy") {
        if parts.len() < 2 {
            info.is_resource_request = false;
            return info;
        }
        info.verb = parts.remove(0).to_string();
    } else {
        info.verb = match *method {
            http::Method::POST => "create",
            http::Method::GET | http::Method::HEAD => "get",
            http::Method::PUT => "update",
            http::Method::PATCH => "patch",
            http::Method::DELETE => "delete",
            _ => "",
        }
        .to_string();
    }

    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        // `/namespaces/x/status` and `/namespaces/x/finalize` are subresources of the
        // namespace itself; anything else after the namespace is a namespaced resource.
        if parts.len() > 2 && parts[2] != "status" && parts[2] != "finalize" {
            parts.drain(..2);
        }
    }
    info.parts = parts.iter().map(|p| p.to_string()).collect();
    if parts.len() >= 3 && info.verb != "proxy" {
        info.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_string();
    }
    if let Some(resource) = parts.first() {
        info.resource = resource.to_string();
    }

    let pairs = query_pairs(query);
    if info.name.is_empty() && info.verb == "get" {
        let watch = query_param(&pairs, "watch").is_some_and(|w| w == "true" || w == "1");
        info.verb = if watch { "watch" } else { "list" }.to_string();
        if let Some(name) = query_param(&pairs, "fieldSelector").and_then(name_from_field_selector) {
            if valid_path_segment(&name) {
                info.name = name;
            }
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_string();
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn parses_like_kube_request_info_factory() {
        let i = parse(&Method::GET, "/api/v1/namespaces/ns/configmaps/x", None);
        assert_eq!(
            (i.verb.as_str(), i.namespace.as_str(), i.resource.as_str(), i.name.as_str()),
            ("get", "ns", "configmaps", "x")
        );
        let i = parse(&Method::GET, "/api/v1/namespaces/ns/configmaps", Some("watch=true&resourceVersion=5"));
        assert_eq!(i.verb, "watch");
        let i = parse(&Method::GET, "/api/v1/configmaps", Some("fieldSelector=metadata.name%3Dx"));
        assert_eq!((i.verb.as_str(), i.name.as_str(), i.namespace.as_str()), ("list", "x", ""));
        let i = parse(&Method::DELETE, "/api/v1/namespaces/ns/secrets", None);
        assert_eq!(i.verb, "deletecollection");
        let i = parse(&Method::GET, "/api/v1/namespaces/foo", None);
        assert_eq!((i.resource.as_str(), i.name.as_str(), i.namespace.as_str()), ("namespaces", "foo", "foo"));
        let i = parse(&Method::PUT, "/api/v1/namespaces/foo/finalize", None);
        assert_eq!(
            (i.resource.as_str(), i.subresource.as_str(), i.verb.as_str()),
            ("namespaces", "finalize", "update")
        );
        let i = parse(&Method::GET, "/api/v1/watch/namespaces/ns/configmaps", None);
        assert_eq!((i.verb.as_str(), i.resource.as_str()), ("watch", "configmaps"));
        let i = parse(&Method::PATCH, "/apis/apps/v1/namespaces/ns/deployments/d/scale", None);
        assert_eq!((i.api_group.as_str(), i.verb.as_str(), i.subresource.as_str()), ("apps", "patch", "scale"));
        let i = parse(&Method::POST, "/api/v1/namespaces", None);
        assert_eq!((i.verb.as_str(), i.resource.as_str(), i.namespace.as_str()), ("create", "namespaces", ""));
    }

    #[test]
    fn short_paths_are_non_resource() {
        for p in ["/healthz", "/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version"] {
            let i = parse(&Method::GET, p, None);
            assert!(!i.is_resource_request, "{p}");
            assert_eq!(i.verb, "get");
        }
    }

    #[test]
    fn tolerates_empty_query_components() {
        assert_eq!(query_pairs(Some("&limit=500&")), vec![("limit".to_string(), "500".to_string())]);
        assert_eq!(percent_decode("app%3Dweb%2Cx+y"), "app=web,x y");
    }
}
