//! Impersonation (kube's `WithImpersonation`): `Impersonate-User`, `Impersonate-Group`,
//! `Impersonate-Uid` and `Impersonate-Extra-<key>` make the request run as another user. Each
//! is authorized for the real user as verb `impersonate` on `users`, `serviceaccounts` (for
//! `system:serviceaccount:<ns>:<name>`), `groups` (core group), or `uids` and
//! `userextras/<key>` (`authentication.k8s.io`), named by the value; a denial is 403 with kube's
//! message. The impersonated user gets `system:authenticated` (or `system:unauthenticated` for
//! `system:anonymous`) as kube adds it. The headers are removed once used.
//!
//! After audit (the event records both users) and before flow control and authorization (which
//! see the impersonated user).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{call_next, filter_layer, Filter, Filtered, Inner};
use crate::audit::AuditEvent;
use crate::authn::{UserInfo, ANONYMOUS_USER, AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP};
use crate::authz::{forbidden_reason, Authorizer, Decision};
use crate::body::{Request, Response};
use crate::error::ApiError;
use crate::request_info::{percent_decode, RequestInfo};

/// `Impersonate-User`.
pub const USER_HEADER: &str = "impersonate-user";
/// `Impersonate-Uid`.
pub const UID_HEADER: &str = "impersonate-uid";
/// `Impersonate-Group` (repeatable).
pub const GROUP_HEADER: &str = "impersonate-group";
/// `Impersonate-Extra-<key>` (repeatable).
pub const EXTRA_PREFIX: &str = "impersonate-extra-";

/// The impersonation filter.
#[derive(Debug, Clone)]
pub struct ImpersonationLayer {
    authorizer: Arc<dyn Authorizer>,
}

impl ImpersonationLayer {
    /// Builds the filter.
    pub fn new(authorizer: Arc<dyn Authorizer>) -> Self {
        ImpersonationLayer { authorizer }
    }
}

filter_layer!(ImpersonationLayer);

/// The impersonation service.
pub type Impersonation<S> = Filtered<ImpersonationLayer, S>;

/// What the headers ask for.
#[derive(Debug, Default)]
struct Requested {
    user: Option<String>,
    uid: Option<String>,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

fn requested(headers: &http::HeaderMap) -> Requested {
    let value = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let mut r = Requested {
        user: headers.get(USER_HEADER).map(value),
        uid: headers.get(UID_HEADER).map(value),
        groups: headers.get_all(GROUP_HEADER).iter().map(value).collect(),
        extra: BTreeMap::new(),
    };
    for (name, v) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            // Header names arrive lower-cased; keys may be percent-encoded (kube unescapes).
            r.extra.entry(percent_decode(key)).or_default().push(value(v));
        }
    }
    r
}

/// The attributes of one impersonation check.
fn attributes(group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: "impersonate".into(),
        api_group: group.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..RequestInfo::default()
    }
}

/// Returns the checks to run and the resulting user.
fn plan(r: Requested) -> Result<(Vec<RequestInfo>, UserInfo), ApiError> {
    let Some(name) = r.user else {
        let mut what = Vec::new();
        if !r.groups.is_empty() {
            what.push(format!("groups {:?}", r.groups));
        }
        if let Some(uid) = &r.uid {
            what.push(format!("uid {uid:?}"));
        }
        if !r.extra.is_empty() {
            what.push(format!("extra {:?}", r.extra.keys().collect::<Vec<_>>()));
        }
        return Err(ApiError::BadRequest(format!("requested {} without impersonating a user", what.join(", "))));
    };
    let mut checks = Vec::new();
    let mut groups = r.groups.clone();
    match name.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':')) {
        Some((ns, sa)) if !ns.is_empty() && !sa.is_empty() => {
            checks.push(attributes("", "serviceaccounts", "", ns, sa));
            if r.groups.is_empty() {
                groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}")];
            }
        }
        _ => checks.push(attributes("", "users", "", "", &name)),
    }
    for g in &r.groups {
        checks.push(attributes("", "groups", "", "", g));
    }
    for (key, values) in &r.extra {
        for v in values {
            checks.push(attributes("authentication.k8s.io", "userextras", key, "", v));
        }
    }
    if let Some(uid) = &r.uid {
        checks.push(attributes("authentication.k8s.io", "uids", "", "", uid));
    }
    if name == ANONYMOUS_USER {
        if !groups.iter().any(|g| g == UNAUTHENTICATED_GROUP) {
            groups.push(UNAUTHENTICATED_GROUP.into());
        }
    } else if !groups.iter().any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP) {
        groups.push(AUTHENTICATED_GROUP.into());
    }
    let mut user = UserInfo::new(name, r.uid.unwrap_or_default(), groups);
    user.extra = r.extra;
    Ok((checks, user))
}

fn strip_headers(headers: &mut http::HeaderMap) {
    let names: Vec<http::HeaderName> = headers
        .keys()
        .filter(|n| {
            let n = n.as_str();
            n == USER_HEADER || n == UID_HEADER || n == GROUP_HEADER || n.starts_with(EXTRA_PREFIX)
        })
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

impl Filter for ImpersonationLayer {
    async fn filter<S: Inner>(self, mut req: Request, next: S) -> Response {
        let wanted = requested(req.headers());
        if wanted.user.is_none() && wanted.uid.is_none() && wanted.groups.is_empty() && wanted.extra.is_empty() {
            return call_next(next, req).await;
        }
        let Some(requestor) = req.extensions().get::<UserInfo>().cloned() else {
            return ApiError::Internal("no user on the request".into()).into_response();
        };
        let (checks, impersonated) = match plan(wanted) {
            Ok(planned) => planned,
            Err(e) => return e.into_response(),
        };
        for check in &checks {
            match self.authorizer.authorize(&requestor, check).await {
                Ok(Decision::Allow(_)) => {}
                Ok(Decision::Deny) => {
                    // The Status names the resource without the subresource (as kube's
                    // GroupResource does); the reason names both.
                    return ApiError::Forbidden {
                        group: check.api_group.clone(),
                        resource: check.resource.clone(),
                        name: check.name.clone(),
                        reason: forbidden_reason(&requestor, check),
                    }
                    .into_response();
                }
                Err(e) => return ApiError::Storage(e).into_response(),
            }
        }
        if let Some(event) = req.extensions().get::<AuditEvent>() {
            event.set_impersonated_user(&impersonated);
        }
        strip_headers(req.headers_mut());
        req.extensions_mut().insert(impersonated);
        call_next(next, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::HeaderName::from_bytes(k.as_bytes()).expect("name"), v.parse().expect("value"));
        }
        h
    }

    #[test]
    fn plans_checks_and_groups_like_kube() {
        let h = headers(&[
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Extra-Scopes%2Fa", "s1"),
            ("Impersonate-Uid", "42"),
        ]);
        let (checks, user) = plan(requested(&h)).expect("plan");
        let described: Vec<String> =
            checks.iter().map(|c| format!("{}|{}|{}|{}", c.api_group, c.resource, c.subresource, c.name)).collect();
        assert_eq!(
            described,
            [
                "|users||bob",
                "|groups||dev",
                "authentication.k8s.io|userextras|scopes/a|s1",
                "authentication.k8s.io|uids||42"
            ]
        );
        assert_eq!(user.groups, ["dev", AUTHENTICATED_GROUP]);
        assert_eq!(user.extra["scopes/a"], ["s1"]);
        assert_eq!(user.uid, "42");

        let (checks, user) =
            plan(requested(&headers(&[("Impersonate-User", "system:serviceaccount:ns:bot")]))).expect("plan");
        assert_eq!((checks[0].resource.as_str(), checks[0].namespace.as_str()), ("serviceaccounts", "ns"));
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:ns", AUTHENTICATED_GROUP]);

        let (_, anon) = plan(requested(&headers(&[("Impersonate-User", ANONYMOUS_USER)]))).expect("plan");
        assert_eq!(anon.groups, [UNAUTHENTICATED_GROUP]);

        assert!(plan(requested(&headers(&[("Impersonate-Group", "dev")]))).is_err());
    }
}
