//! Access reviews: the create-only, never-stored resources that ask the authorizer a question.
//!
//! * `authorization.k8s.io/v1`: `selfsubjectaccessreviews` (`kubectl auth can-i`),
//!   `selfsubjectrulesreviews` (`kubectl auth can-i --list`), `subjectaccessreviews` and
//!   namespaced `localsubjectaccessreviews` (about another user; RBAC lets only privileged
//!   users create them);
//! * `authentication.k8s.io/v1`: `selfsubjectreviews` (`kubectl auth whoami`) and
//!   `tokenreviews` (is this bearer token good, and whose is it: every token method the server
//!   has, for the audiences asked for; RBAC lets only privileged callers such as extension
//!   servers bound to `system:auth-delegator` create them).
//!
//! Bodies are JSON or kubectl's protobuf. Answers are `201 Created` with the review and its
//! `status`, as kube-apiserver gives. [`VIRTUAL_RESOURCES`] lists them for discovery;
//! [`ReviewServer`] answers them in the delegation chain, in front of the built-in kinds.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::rbac::policy::PolicyRule;
use crate::rbac::RbacAuthorizer;

use ballast_apimachinery::protobuf::{self, Message};
use ballast_apimachinery::schema::{generated, GO_ZEROS};
use ballast_apiserver::authn::service_account::intersect;
use ballast_apiserver::authn::{Authenticator, UserInfo};
use ballast_apiserver::body::{self, Request, Response};
use ballast_apiserver::delegation::Server;
use ballast_apiserver::error::{ApiError, FieldError};
use ballast_apiserver::filters::body_limit::BodyLimitBytes;
use ballast_apiserver::filters::ResponseFuture;
use ballast_apiserver::request_info::RequestInfo;
use ballast_apiserver::served::VirtualResource;

const fn review(
    group: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> VirtualResource {
    VirtualResource { group, version: "v1", resource, singular, kind, namespaced, verbs: &["create"] }
}

/// The review resources, for discovery to list next to the built-in kinds.
pub static VIRTUAL_RESOURCES: [VirtualResource; 6] = [
    review(
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
    ),
    review(
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
    ),
    review(
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
    ),
    review("authorization.k8s.io", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", false),
    review("authentication.k8s.io", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false),
    review("authentication.k8s.io", "tokenreviews", "tokenreview", "TokenReview", false),
];

/// Returns the review resource a request names, if any.
pub fn served(info: &RequestInfo) -> Option<&'static VirtualResource> {
    if !info.is_resource_request || !info.subresource.is_empty() || !info.name.is_empty() {
        return None;
    }
    VIRTUAL_RESOURCES.iter().find(|v| {
        v.group == info.api_group
            && v.version == info.api_version
            && v.resource == info.resource
            && v.namespaced != info.namespace.is_empty()
    })
}

/// Reads a request body (JSON or protobuf) as an object of `resource`'s kind.
///
/// # Errors
///
/// `RequestEntityTooLarge` past the body limit, `BadRequest` for bodies that do not decode.
pub(crate) async fn read_object(req: Request, resource: &VirtualResource, schema: &Message) -> Result<Value, ApiError> {
    let (parts, body) = req.into_parts();
    let limit = parts.extensions.get::<BodyLimitBytes>().map(|l| l.0).unwrap_or_default();
    let bytes: Bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.0.is::<http_body_util::LengthLimitError>() => {
            return Err(ApiError::RequestEntityTooLarge { limit })
        }
        Err(e) => return Err(ApiError::BadRequest(format!("error reading request body: {e}"))),
    };
    let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mut object = if bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else if content_type.starts_with("application/vnd.kubernetes.protobuf") {
        protobuf::decode_object(&bytes, schema, GO_ZEROS).map_err(|e| ApiError::BadRequest(e.to_string()))?
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}")))?
    };
    if !object.is_object() {
        return Err(ApiError::BadRequest("the body is not an object".into()));
    }
    object["apiVersion"] = format!("{}/{}", resource.group, resource.version).into();
    object["kind"] = resource.kind.into();
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    Ok(object)
}

fn invalid(resource: &VirtualResource, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid { group: resource.group.into(), kind: resource.kind.into(), name: String::new(), causes }
}

/// Turns `spec.resourceAttributes` / `spec.nonResourceAttributes` into the attributes the
/// authorizer decides on.
fn attributes(resource: &VirtualResource, spec: &Value) -> Result<RequestInfo, ApiError> {
    let s = |v: &Value, key: &str| v[key].as_str().unwrap_or("").to_string();
    match (
        spec.get("resourceAttributes").filter(|v| v.is_object()),
        spec.get("nonResourceAttributes").filter(|v| v.is_object()),
    ) {
        (Some(_), Some(non)) => Err(invalid(
            resource,
            vec![FieldError::invalid(
                "spec.nonResourceAttributes",
                non.clone(),
                "cannot be specified in combination with resourceAttributes",
            )],
        )),
        (None, None) => Err(invalid(
            resource,
            vec![FieldError::required(
                "spec.resourceAttributes",
                "one of resourceAttributes or nonResourceAttributes must be specified",
            )],
        )),
        (Some(r), None) => Ok(RequestInfo {
            is_resource_request: true,
            verb: s(r, "verb"),
            api_group: s(r, "group"),
            api_version: s(r, "version"),
            namespace: s(r, "namespace"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            name: s(r, "name"),
            ..RequestInfo::default()
        }),
        (None, Some(n)) => Ok(RequestInfo { path: s(n, "path"), verb: s(n, "verb"), ..RequestInfo::default() }),
    }
}

async fn decide(authorizer: &RbacAuthorizer, user: &UserInfo, attrs: &RequestInfo) -> Result<Value, ApiError> {
    let decision = authorizer.authorize(user, attrs).await?;
    let mut status = json!({"allowed": decision.allowed()});
    if !decision.reason().is_empty() {
        status["reason"] = decision.reason().into();
    }
    Ok(status)
}

fn rules_status(rules: &[PolicyRule]) -> Value {
    let non_empty = |key: &str, list: &[String], into: &mut Value| {
        if !list.is_empty() {
            into[key] = json!(list);
        }
    };
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for r in rules {
        if !r.resources.is_empty() || !r.api_groups.is_empty() {
            let mut v = json!({"verbs": r.verbs});
            non_empty("apiGroups", &r.api_groups, &mut v);
            non_empty("resources", &r.resources, &mut v);
            non_empty("resourceNames", &r.resource_names, &mut v);
            resource_rules.push(v);
        }
        if !r.non_resource_urls.is_empty() {
            non_resource_rules.push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
    }
    json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false})
}

fn created(object: &Value) -> Response {
    body::json(StatusCode::CREATED, object)
}

/// Serves a POST to one of [`VIRTUAL_RESOURCES`].
///
/// # Errors
///
/// `MethodNotSupported` for other verbs, `BadRequest`/`Invalid` for bad bodies, storage errors
/// from the authorizer.
pub async fn handle(
    authorizer: &RbacAuthorizer,
    authenticator: &Authenticator,
    resource: &'static VirtualResource,
    info: RequestInfo,
    req: Request,
) -> Result<Response, ApiError> {
    if info.verb != "create" {
        return Err(ApiError::MethodNotSupported {
            group: resource.group.into(),
            resource: resource.resource.into(),
            verb: info.verb,
        });
    }
    let user = req.extensions().get::<UserInfo>().cloned().ok_or(ApiError::Unauthorized)?;
    match resource.resource {
        "selfsubjectaccessreviews" => {
            let mut review =
                read_object(req, resource, &generated::API_AUTHORIZATION_V1_SELFSUBJECTACCESSREVIEW).await?;
            let attrs = attributes(resource, &review["spec"])?;
            review["status"] = decide(authorizer, &user, &attrs).await?;
            Ok(created(&review))
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let mut review = read_object(req, resource, &generated::API_AUTHORIZATION_V1_SUBJECTACCESSREVIEW).await?;
            let spec = &review["spec"].clone();
            let subject = spec["user"].as_str().unwrap_or("").to_string();
            let groups: Vec<String> =
                spec["groups"].as_array().into_iter().flatten().filter_map(|g| g.as_str().map(String::from)).collect();
            if subject.is_empty() && groups.is_empty() {
                return Err(invalid(
                    resource,
                    vec![FieldError::invalid("spec.user", "", "at least one of user or group must be specified")],
                ));
            }
            let mut attrs = attributes(resource, spec)?;
            if resource.namespaced {
                if attrs.namespace.is_empty() {
                    attrs.namespace = info.namespace.clone();
                }
                if !attrs.is_resource_request || attrs.namespace != info.namespace {
                    return Err(ApiError::BadRequest(format!(
                        "spec.resourceAttributes.namespace must match namespace: {}",
                        info.namespace
                    )));
                }
                review["metadata"]["namespace"] = info.namespace.clone().into();
            }
            let mut subject = UserInfo::new(subject, spec["uid"].as_str().unwrap_or(""), groups);
            if let Some(extra) = spec["extra"].as_object() {
                for (k, v) in extra {
                    let values = v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from));
                    subject.extra.insert(k.clone(), values.collect());
                }
            }
            review["status"] = decide(authorizer, &subject, &attrs).await?;
            Ok(created(&review))
        }
        "selfsubjectrulesreviews" => {
            let mut review =
                read_object(req, resource, &generated::API_AUTHORIZATION_V1_SELFSUBJECTRULESREVIEW).await?;
            let namespace = review["spec"]["namespace"].as_str().unwrap_or("").to_string();
            if namespace.is_empty() {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            review["status"] = match authorizer.rules_for(&user, &namespace).await {
                Ok(rules) => rules_status(&rules),
                // As kube: the rules found so far (none here) and why the list is incomplete.
                Err(e) => json!({
                    "resourceRules": [], "nonResourceRules": [], "incomplete": true,
                    "evaluationError": e.to_string(),
                }),
            };
            Ok(created(&review))
        }
        "tokenreviews" => {
            let mut review = read_object(req, resource, &generated::API_AUTHENTICATION_V1_TOKENREVIEW).await?;
            review["status"] = token_review(authenticator, &review["spec"]).await?;
            Ok(created(&review))
        }
        _ => {
            let mut review = read_object(req, resource, &generated::API_AUTHENTICATION_V1_SELFSUBJECTREVIEW).await?;
            review["status"] = json!({"userInfo": ballast_apiserver::audit::user_json(&user)});
            Ok(created(&review))
        }
    }
}

/// A TokenReview's status: the token run through the server's token methods, as kube's.
async fn token_review(authenticator: &Authenticator, spec: &Value) -> Result<Value, ApiError> {
    let token = spec["token"].as_str().unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::BadRequest("token is required for TokenReview in authentication".into()));
    }
    let mut audiences: Vec<String> =
        spec["audiences"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    if audiences.is_empty() {
        audiences = authenticator.api_audiences().to_vec();
    }
    let answer = authenticator.authenticate_token(token, &audiences).await;
    let mut status = json!({"user": {}});
    if let Some(user) = &answer.user {
        // A method that accepted the token for none of the audiences asked for is a server
        // fault, as kube treats it.
        if !audiences.is_empty() && intersect(&audiences, &answer.audiences).is_empty() {
            return Err(ApiError::Internal("error validating audiences".into()));
        }
        status["authenticated"] = true.into();
        status["user"] = ballast_apiserver::audit::user_json(user);
        if !answer.audiences.is_empty() {
            status["audiences"] = json!(answer.audiences);
        }
    }
    if let Some(error) = answer.error {
        status["error"] = error.into();
    }
    Ok(status)
}

/// The access reviews as a server of the delegation chain, in front of the built-in kinds'
/// router: answers the review collections.
#[derive(Debug, Clone)]
pub struct ReviewServer {
    authorizer: Arc<RbacAuthorizer>,
    authenticator: Arc<Authenticator>,
}

impl ReviewServer {
    /// Answers access reviews with `authorizer`, token reviews with `authenticator`.
    pub fn new(authorizer: Arc<RbacAuthorizer>, authenticator: Arc<Authenticator>) -> Self {
        ReviewServer { authorizer, authenticator }
    }
}

impl Server for ReviewServer {
    fn serves(&self, req: &Request) -> bool {
        req.extensions().get::<RequestInfo>().and_then(served).is_some()
    }

    fn serve(&self, req: Request) -> ResponseFuture {
        let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
        let (authorizer, authenticator) = (self.authorizer.clone(), self.authenticator.clone());
        Box::pin(async move {
            let Some(review) = served(&info) else { return Ok(ApiError::NoRoute.into_response()) };
            let answer = handle(&authorizer, &authenticator, review, info, req).await;
            Ok(answer.unwrap_or_else(ApiError::into_response))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_apiserver::routes::discovery::{
        virtual_aggregated_groups, virtual_groups, virtual_legacy_groups, virtual_resource_list,
    };
    use http::Method;

    #[test]
    fn serves_only_the_review_collections() {
        let at = |m: &Method, p: &str| served(&ballast_apiserver::request_info::parse(m, p, None)).map(|v| v.resource);
        assert_eq!(
            at(&Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
            Some("selfsubjectaccessreviews")
        );
        assert_eq!(
            at(&Method::POST, "/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews"),
            Some("localsubjectaccessreviews")
        );
        assert_eq!(at(&Method::POST, "/apis/authorization.k8s.io/v1/namespaces/a/selfsubjectaccessreviews"), None);
        assert_eq!(at(&Method::POST, "/apis/authentication.k8s.io/v1/selfsubjectreviews"), Some("selfsubjectreviews"));
        assert_eq!(at(&Method::GET, "/api/v1/namespaces/a/configmaps"), None);
    }

    #[test]
    fn discovery_documents_list_create_only_reviews() {
        assert_eq!(virtual_groups(&VIRTUAL_RESOURCES), ["authorization.k8s.io", "authentication.k8s.io"]);
        let list = virtual_resource_list(&VIRTUAL_RESOURCES, "authorization.k8s.io", "v1").expect("list");
        assert_eq!(list["resources"].as_array().map(Vec::len), Some(4));
        assert_eq!(list["resources"][1]["name"], "selfsubjectaccessreviews");
        assert_eq!(list["resources"][1]["verbs"], json!(["create"]));
        assert!(virtual_resource_list(&VIRTUAL_RESOURCES, "authorization.k8s.io", "v1beta1").is_none());
        let agg = virtual_aggregated_groups(&VIRTUAL_RESOURCES);
        assert_eq!(agg[1]["metadata"]["name"], "authentication.k8s.io");
        assert_eq!(agg[1]["versions"][0]["resources"][0]["responseKind"]["kind"], "SelfSubjectReview");
        assert_eq!(
            virtual_legacy_groups(&VIRTUAL_RESOURCES)[0]["preferredVersion"]["groupVersion"],
            "authorization.k8s.io/v1"
        );
    }

    #[test]
    fn attributes_need_exactly_one_kind() {
        let r = &VIRTUAL_RESOURCES[1];
        let a = attributes(r, &json!({"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "d"}}))
            .expect("resource attributes");
        assert!(a.is_resource_request && a.verb == "create" && a.namespace == "d");
        let n = attributes(r, &json!({"nonResourceAttributes": {"verb": "get", "path": "/metrics"}})).expect("non");
        assert!(!n.is_resource_request && n.path == "/metrics");
        assert!(attributes(r, &json!({})).is_err());
        assert!(attributes(r, &json!({"resourceAttributes": {}, "nonResourceAttributes": {}})).is_err());
    }
}
