//! `ApiError` and the one mapping from errors to the wire: every refusal anywhere in the frontend
//! (filters, handlers, storage) becomes a `metav1.Status` here, with kube-apiserver's code,
//! reason, message and details, because clients branch on them (client-go matches `reason`
//! first, then `code`; kubectl prints `Error from server (<reason>): <message>`).
//!
//! Messages follow kube-apiserver's wire text (`k8s.io/apimachinery/pkg/api/errors`), which is
//! part of the API contract; nothing else in the crate formats a Status.

use http::{HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use crate::body::{self, Response};
use crate::storage::StorageError;

/// The text kube-apiserver uses for optimistic-concurrency failures (`OptimisticLockErrorMsg`).
pub const OPTIMISTIC_LOCK_MESSAGE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// One field's validation failure, as in `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The JSON path of the field, e.g. `metadata.name` or `data[a b]`.
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
}

/// The kinds of field errors the frontend reports (`field.ErrorType`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldErrorKind {
    /// The value is malformed; `detail` says why.
    Invalid {
        /// The offending value, as JSON (strings are quoted on the wire).
        value: Value,
        /// Why it is invalid.
        detail: String,
    },
    /// A required field is empty.
    Required {
        /// Extra explanation, may be empty.
        detail: String,
    },
    /// The field may not be set or changed.
    Forbidden {
        /// Why not.
        detail: String,
    },
    /// The value repeats one given elsewhere.
    Duplicate {
        /// The repeated value.
        value: Value,
    },
    /// The value is longer than allowed (kube's `field.TooLong`; the value is not repeated).
    TooLong {
        /// The most bytes allowed.
        max: usize,
    },
    /// The value is not one of an enumeration.
    NotSupported {
        /// The offending value.
        value: Value,
        /// The allowed values, quoted as kube quotes them.
        supported: Vec<String>,
    },
    /// `Invalid value` whose value kube prints as Go source rather than as JSON (a struct such
    /// as `apiextensions.ValidationRule{Rule:"...", ...}`).
    InvalidPrinted {
        /// The value as kube prints it.
        value: String,
        /// Why it is invalid.
        detail: String,
    },
    /// The value has the wrong type (`Invalid value` with kube's `FieldValueTypeInvalid`).
    TypeInvalid {
        /// The offending value (kube shows the value's type name).
        value: Value,
        /// Why it is invalid.
        detail: String,
    },
    /// A string is longer than a schema's `maxLength` (the message kube's schema validation
    /// gives, which differs from [`FieldErrorKind::TooLong`]'s).
    TooLongString {
        /// The longest allowed, in bytes.
        max: i64,
    },
    /// A list or map has too many entries.
    TooMany {
        /// How many it has.
        actual: i64,
        /// The most allowed.
        max: i64,
    },
}

impl FieldError {
    /// Returns an `Invalid value` error.
    pub fn invalid(field: impl Into<String>, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        FieldError { field: field.into(), kind: FieldErrorKind::Invalid { value: value.into(), detail: detail.into() } }
    }

    /// Returns a `Required value` error.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { field: field.into(), kind: FieldErrorKind::Required { detail: detail.into() } }
    }

    /// Returns a `Forbidden` error.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { field: field.into(), kind: FieldErrorKind::Forbidden { detail: detail.into() } }
    }

    /// Returns a `Duplicate value` error.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        FieldError { field: field.into(), kind: FieldErrorKind::Duplicate { value: value.into() } }
    }

    /// Returns a `Too long` error: at most `max` bytes are allowed.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        FieldError { field: field.into(), kind: FieldErrorKind::TooLong { max } }
    }

    /// Returns an `Unsupported value` error.
    pub fn not_supported(field: impl Into<String>, value: impl Into<Value>, supported: &[&str]) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::NotSupported {
                value: value.into(),
                supported: supported.iter().map(|s| format!("{s:?}")).collect(),
            },
        }
    }

    /// Returns the cause `reason` of this error (`FieldValueInvalid`, ...).
    fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Invalid { .. } | FieldErrorKind::InvalidPrinted { .. } => "FieldValueInvalid",
            FieldErrorKind::Required { .. } => "FieldValueRequired",
            FieldErrorKind::Forbidden { .. } => "FieldValueForbidden",
            FieldErrorKind::Duplicate { .. } => "FieldValueDuplicate",
            FieldErrorKind::NotSupported { .. } => "FieldValueNotSupported",
            FieldErrorKind::TooLong { .. } | FieldErrorKind::TooLongString { .. } => "FieldValueTooLong",
            FieldErrorKind::TypeInvalid { .. } => "FieldValueTypeInvalid",
            FieldErrorKind::TooMany { .. } => "FieldValueTooMany",
        }
    }

    /// Returns the message without the field path, e.g. `Invalid value: "x": reason`.
    fn body(&self) -> String {
        let with_detail = |head: String, detail: &str| {
            if detail.is_empty() {
                head
            } else {
                format!("{head}: {detail}")
            }
        };
        match &self.kind {
            FieldErrorKind::Invalid { value, detail } => with_detail(format!("Invalid value: {value}"), detail),
            FieldErrorKind::Required { detail } => with_detail("Required value".into(), detail),
            FieldErrorKind::Forbidden { detail } => with_detail("Forbidden".into(), detail),
            FieldErrorKind::Duplicate { value } => format!("Duplicate value: {value}"),
            FieldErrorKind::TooLong { max } => {
                format!("Too long: must have at most {max} {}", if *max == 1 { "byte" } else { "bytes" })
            }
            FieldErrorKind::NotSupported { value, supported } => {
                format!("Unsupported value: {value}: supported values: {}", supported.join(", "))
            }
            FieldErrorKind::TypeInvalid { value, detail } => with_detail(format!("Invalid value: {value}"), detail),
            FieldErrorKind::InvalidPrinted { value, detail } => with_detail(format!("Invalid value: {value}"), detail),
            FieldErrorKind::TooLongString { max } => format!("Too long: may not be more than {max} bytes"),
            FieldErrorKind::TooMany { actual, max } => format!("Too many: {actual}: must have at most {max} items"),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Everything a request can fail with. Each variant maps to one Status reason and code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 404 `NotFound`: the named object does not exist.
    #[error("{} \"{name}\" not found", qualified(group, resource))]
    NotFound {
        /// API group of the resource ("" for core).
        group: String,
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 404 `NotFound` for a URL that names nothing the server serves.
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// 409 `AlreadyExists`.
    #[error("{} \"{name}\" already exists", qualified(group, resource))]
    AlreadyExists {
        /// API group.
        group: String,
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 409 `Conflict`: a precondition (resourceVersion or uid) did not hold.
    #[error("Operation cannot be fulfilled on {} \"{name}\": {reason}", qualified(group, resource))]
    Conflict {
        /// API group.
        group: String,
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
        /// Which precondition failed; usually [`OPTIMISTIC_LOCK_MESSAGE`].
        reason: String,
    },
    /// 409 `Conflict` from server-side apply: fields other managers own would change. One
    /// `FieldManagerConflict` cause per field.
    #[error("{message}")]
    ApplyConflict {
        /// kube's message (`Apply failed with 1 conflict: conflict with "kubectl": .data.a`).
        message: String,
        /// (cause message, field) pairs, e.g. (`conflict with "kubectl"`, `.data.a`).
        causes: Vec<(String, String)>,
    },
    /// 422 `Invalid`: validation failed.
    #[error("{} \"{name}\" is invalid: {}", qualified_kind(kind, group), aggregate(causes))]
    Invalid {
        /// API group.
        group: String,
        /// The Kind (not the resource: kube reports `ConfigMap "x" is invalid`, qualified by a
        /// non-core group: `Deployment.apps "x" is invalid`).
        kind: String,
        /// Object name.
        name: String,
        /// The field errors, at least one.
        causes: Vec<FieldError>,
    },
    /// 400 `BadRequest`: malformed body, selector or parameter.
    #[error("{0}")]
    BadRequest(String),
    /// 401 `Unauthorized`: credentials were presented and rejected, or anonymous auth is off.
    #[error("Unauthorized")]
    Unauthorized,
    /// 403 `Forbidden`.
    #[error("{}", forbidden_message(group, resource, name, reason))]
    Forbidden {
        /// API group of the request.
        group: String,
        /// Resource of the request ("" for non-resource paths).
        resource: String,
        /// Object name of the request, may be empty.
        name: String,
        /// Why, e.g. `User "u" cannot list resource ...`.
        reason: String,
    },
    /// 405 `MethodNotAllowed`: the resource does not support the verb.
    #[error("{verb} is not supported on resources of kind \"{}\"", qualified(group, resource))]
    MethodNotSupported {
        /// API group.
        group: String,
        /// Plural resource name.
        resource: String,
        /// The verb asked for.
        verb: String,
    },
    /// 406 `NotAcceptable`.
    #[error("only the following media types are accepted: {0}")]
    NotAcceptable(String),
    /// 410 `Expired`: a continue token or resourceVersion is older than the store's history.
    #[error("{0}")]
    Expired(String),
    /// 413 `RequestEntityTooLarge`.
    #[error("Request entity too large: limit is {limit}")]
    RequestEntityTooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// 413 `RequestEntityTooLarge` for a JSON patch with more operations than kube allows.
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyPatchOperations {
        /// The bound.
        max: usize,
        /// Operations in the patch.
        got: usize,
    },
    /// 422 `Invalid` for a patch that does not apply to the object (a failed JSON patch `test`,
    /// a path that is not there): kube's generic "rejected" answer with the patch library's
    /// complaint as the cause.
    #[error("the server rejected our request due to an error in our request")]
    PatchFailed(String),
    /// 415 `UnsupportedMediaType`.
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// 429 `TooManyRequests`, with `Retry-After`.
    #[error("Too many requests, please try again later.")]
    TooManyRequests {
        /// Seconds the client should wait.
        retry_after_seconds: u32,
    },
    /// 504 `Timeout`: the request did not finish within `--request-timeout`.
    #[error("Timeout: request did not complete within the allotted timeout")]
    Timeout,
    /// 504 `Timeout`: a read at a resourceVersion the store has not reached within the wait.
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: i64,
        /// The store's revision.
        current: i64,
    },
    /// 500 `InternalError`.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 500 without a reason: a failure kube reports with its own text only (a conversion
    /// webhook's), which clients print as `Error from server: <text>`.
    #[error("{0}")]
    Failed(String),
    /// A storage failure without a more specific meaning at the call site (500, or 410 when
    /// the asked-for revision was compacted).
    #[error(transparent)]
    Storage(#[from] StorageError),
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// Returns `Kind.group` (kube's `GroupKind.String()`), or `Kind` for the core group.
fn qualified_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

fn aggregate(causes: &[FieldError]) -> String {
    match causes {
        [one] => one.to_string(),
        many => format!("[{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

fn forbidden_message(group: &str, resource: &str, name: &str, reason: &str) -> String {
    if resource.is_empty() {
        format!("forbidden: {reason}")
    } else if name.is_empty() {
        format!("{} is forbidden: {reason}", qualified(group, resource))
    } else {
        format!("{} \"{name}\" is forbidden: {reason}", qualified(group, resource))
    }
}

impl ApiError {
    /// Returns the HTTP status code and the Status `reason`.
    pub fn code_and_reason(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::NotFound { .. } | ApiError::NoRoute => (StatusCode::NOT_FOUND, "NotFound"),
            ApiError::AlreadyExists { .. } => (StatusCode::CONFLICT, "AlreadyExists"),
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => (StatusCode::CONFLICT, "Conflict"),
            ApiError::Invalid { .. } | ApiError::PatchFailed(_) => (StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "Unauthorized"),
            ApiError::Forbidden { .. } => (StatusCode::FORBIDDEN, "Forbidden"),
            ApiError::MethodNotSupported { .. } => (StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
            ApiError::NotAcceptable(_) => (StatusCode::NOT_ACCEPTABLE, "NotAcceptable"),
            ApiError::Expired(_) => (StatusCode::GONE, "Expired"),
            ApiError::RequestEntityTooLarge { .. } | ApiError::TooManyPatchOperations { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge")
            }
            ApiError::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType"),
            ApiError::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "TooManyRequests"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
            ApiError::Failed(_) => (StatusCode::INTERNAL_SERVER_ERROR, ""),
            ApiError::Timeout | ApiError::TooLargeResourceVersion { .. } => (StatusCode::GATEWAY_TIMEOUT, "Timeout"),
            ApiError::Storage(StorageError::Compacted { .. }) => (StatusCode::GONE, "Expired"),
            ApiError::Storage(StorageError::RequestTooLarge) => {
                (StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge")
            }
            ApiError::Storage(_) => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        }
    }

    fn details(&self) -> Option<Value> {
        let named = |group: &str, kind: &str, name: &str| {
            let mut d = Map::new();
            if !name.is_empty() {
                d.insert("name".into(), name.into());
            }
            if !group.is_empty() {
                d.insert("group".into(), group.into());
            }
            if !kind.is_empty() {
                d.insert("kind".into(), kind.into());
            }
            d
        };
        match self {
            ApiError::NotFound { group, resource, name }
            | ApiError::AlreadyExists { group, resource, name }
            | ApiError::Conflict { group, resource, name, .. }
            | ApiError::Forbidden { group, resource, name, .. } => Some(Value::Object(named(group, resource, name))),
            ApiError::MethodNotSupported { group, resource, .. } => Some(Value::Object(named(group, resource, ""))),
            ApiError::Invalid { group, kind, name, causes } => {
                let mut d = named(group, kind, name);
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason(), "message": c.body(), "field": c.field}))
                    .collect();
                d.insert("causes".into(), causes.into());
                Some(Value::Object(d))
            }
            ApiError::ApplyConflict { causes, .. } => {
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|(message, field)| json!({"reason": "FieldManagerConflict", "message": message, "field": field}))
                    .collect();
                Some(json!({"causes": causes}))
            }
            ApiError::TooManyRequests { retry_after_seconds } => {
                Some(json!({"retryAfterSeconds": retry_after_seconds}))
            }
            ApiError::Internal(message) => Some(json!({"causes": [{"message": message}]})),
            ApiError::PatchFailed(message) => {
                Some(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": message}]}))
            }
            ApiError::NoRoute | ApiError::Timeout => Some(json!({})),
            // The client may retry in a second, by when the store has likely caught up.
            ApiError::TooLargeResourceVersion { .. } => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
            _ => None,
        }
    }

    /// Returns the `metav1.Status` object for this error.
    pub fn status(&self) -> Value {
        let (code, reason) = self.code_and_reason();
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": reason,
            "code": code.as_u16(),
        });
        if let Some(details) = self.details() {
            status["details"] = details;
        }
        // kube omits an empty reason (StatusReasonUnknown).
        if reason.is_empty() {
            if let Some(m) = status.as_object_mut() {
                m.remove("reason");
            }
        }
        status
    }

    /// Turns the error into its HTTP response (Status body, `Retry-After` for 429).
    pub fn into_response(self) -> Response {
        let (code, _) = self.code_and_reason();
        let mut resp = body::json(code, &self.status());
        if let ApiError::TooManyRequests { retry_after_seconds } = self {
            resp.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(retry_after_seconds));
        }
        resp
    }
}

impl From<crate::patch::PatchError> for ApiError {
    fn from(e: crate::patch::PatchError) -> ApiError {
        use crate::patch::{json_patch, PatchError};
        match e {
            PatchError::Malformed(m) => ApiError::BadRequest(m),
            PatchError::TooManyOperations(got) => {
                ApiError::TooManyPatchOperations { max: json_patch::MAX_OPERATIONS, got }
            }
            PatchError::Failed(m) => ApiError::PatchFailed(m),
            // `PatchError` is non-exhaustive: a failure it may learn to name is still a 422.
            other => ApiError::PatchFailed(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_kube_apiserver() {
        let e = ApiError::NotFound { group: String::new(), resource: "configmaps".into(), name: "x".into() };
        assert_eq!(e.to_string(), r#"configmaps "x" not found"#);
        assert_eq!(e.status()["details"], json!({"name": "x", "kind": "configmaps"}));
        let e = ApiError::Conflict {
            group: String::new(),
            resource: "configmaps".into(),
            name: "x".into(),
            reason: OPTIMISTIC_LOCK_MESSAGE.into(),
        };
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your \
             changes to the latest version and try again"
        );
        let e = ApiError::Forbidden {
            group: String::new(),
            resource: "configmaps".into(),
            name: String::new(),
            reason: r#"User "u" cannot list resource "configmaps" in API group "" in the namespace "ns""#.into(),
        };
        assert_eq!(
            e.to_string(),
            r#"configmaps is forbidden: User "u" cannot list resource "configmaps" in API group "" in the namespace "ns""#
        );
        let e = ApiError::Invalid {
            group: String::new(),
            kind: "ConfigMap".into(),
            name: "Bad".into(),
            causes: vec![FieldError::invalid("metadata.name", "Bad", "must be lower case")],
        };
        assert_eq!(
            e.to_string(),
            r#"ConfigMap "Bad" is invalid: metadata.name: Invalid value: "Bad": must be lower case"#
        );
        assert_eq!(e.status()["details"]["causes"][0]["reason"], "FieldValueInvalid");
        assert_eq!(e.status()["code"], 422);
    }

    #[test]
    fn too_many_requests_sets_retry_after() {
        let resp = ApiError::TooManyRequests { retry_after_seconds: 1 }.into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[http::header::RETRY_AFTER], "1");
    }
}
