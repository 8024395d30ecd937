//! Auditing: `audit.k8s.io/v1` `Event`s for requests, chosen by the audit policy and written as
//! JSON lines (kube-apiserver's `--audit-log-path` and `--audit-policy-file`).
//!
//! * [`policy`]: the Policy file and its first-match evaluation.
//! * [`sink`]: the bounded queue and the writer task (full queue → event dropped and counted).
//! * [`Auditor`] and [`AuditEvent`]: the per-request event that the audit filter creates and
//!   the filters after it annotate (impersonation sets `impersonatedUser`, authorization adds
//!   the `authorization.k8s.io/decision` and `reason` annotations).
//!
//! Bodies: at `Request` level the request body is recorded when it is JSON (protobuf bodies are
//! not decoded into the event); at `RequestResponse` the JSON response of a non-long-running
//! request too. Failure responses set `responseStatus` from their Status at every level, as
//! kube does.

pub mod policy;
pub mod sink;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use crate::authn::UserInfo;
use crate::metrics::Metrics;
use crate::request_info::RequestInfo;
use policy::{Decision, Policy, Stage};
use sink::Sink;

/// Audit start-up failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The policy file is unreadable.
    #[error("reading the audit policy {path}")]
    ReadPolicy {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The policy file is malformed.
    #[error("audit policy {path}")]
    Policy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: policy::PolicyError,
    },
    /// The log file cannot be opened.
    #[error("opening the audit log {path}")]
    OpenLog {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The policy and the sink.
#[derive(Debug)]
pub struct Auditor {
    policy: Policy,
    sink: Sink,
}

impl Auditor {
    /// Starts auditing when a log path is set; without a policy file nothing is logged (as in
    /// kube, where the default policy is empty).
    ///
    /// # Errors
    ///
    /// Returns the first failing step.
    pub async fn start(
        log_path: Option<&PathBuf>,
        policy_file: Option<&PathBuf>,
        capacity: usize,
        metrics: Arc<Metrics>,
    ) -> Result<Option<Arc<Auditor>>, AuditError> {
        let Some(log_path) = log_path else { return Ok(None) };
        let policy = match policy_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| AuditError::ReadPolicy { path: path.clone(), source })?;
                Policy::parse(&text).map_err(|source| AuditError::Policy { path: path.clone(), source })?
            }
            None => Policy::default(),
        };
        let sink = Sink::start(log_path, capacity, metrics)
            .await
            .map_err(|source| AuditError::OpenLog { path: log_path.clone(), source })?;
        Ok(Some(Arc::new(Auditor { policy, sink })))
    }

    /// Decides the level of a request.
    pub fn evaluate(&self, user: &UserInfo, info: &RequestInfo) -> Decision {
        self.policy.evaluate(user, info)
    }

    fn write(&self, event: &Value) {
        self.sink.send(serde_json::to_vec(event).unwrap_or_default());
    }
}

/// The request's audit ID and receive time, set by the outermost filter.
#[derive(Debug, Clone)]
pub struct AuditId {
    /// The ID (from the client's `Audit-ID` header, or a new UUID).
    pub id: String,
    /// `requestReceivedTimestamp` (MicroTime text).
    pub received: String,
}

/// The remote address of the connection, when the server knows it.
#[derive(Debug, Clone, Copy)]
pub struct RemoteAddr(pub SocketAddr);

/// The `user` / `impersonatedUser` object of an event.
pub fn user_json(user: &UserInfo) -> Value {
    if user.name.is_empty() {
        // The unknown user of a refused request: kube writes an empty object.
        return json!({});
    }
    let mut v = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        v["uid"] = user.uid.clone().into();
    }
    if !user.extra.is_empty() {
        v["extra"] = json!(user.extra);
    }
    v
}

#[derive(Debug)]
struct EventState {
    event: Map<String, Value>,
    annotations: BTreeMap<String, String>,
}

/// One request's event, shared by the filters that fill it (a request extension).
#[derive(Debug, Clone)]
pub struct AuditEvent {
    auditor: Arc<Auditor>,
    decision: Decision,
    state: Arc<Mutex<EventState>>,
}

impl AuditEvent {
    /// Starts an event with the metadata every level records.
    pub fn new(
        auditor: Arc<Auditor>,
        decision: Decision,
        id: &AuditId,
        user: &UserInfo,
        info: &RequestInfo,
        req: &crate::body::Request,
    ) -> AuditEvent {
        let mut event = Map::new();
        event.insert("kind".into(), "Event".into());
        event.insert("apiVersion".into(), "audit.k8s.io/v1".into());
        event.insert("level".into(), decision.level.as_str().into());
        event.insert("auditID".into(), id.id.clone().into());
        event.insert("requestURI".into(), req.uri().path_and_query().map_or("/", |p| p.as_str()).into());
        event.insert("verb".into(), info.verb.clone().into());
        event.insert("user".into(), user_json(user));
        event.insert("sourceIPs".into(), source_ips(req).into());
        if let Some(agent) = req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()) {
            event.insert("userAgent".into(), agent.into());
        }
        if info.is_resource_request {
            let mut object_ref = Map::new();
            for (key, value) in [
                ("resource", &info.resource),
                ("namespace", &info.namespace),
                ("name", &info.name),
                ("apiGroup", &info.api_group),
                ("apiVersion", &info.api_version),
                ("subresource", &info.subresource),
            ] {
                if !value.is_empty() {
                    object_ref.insert(key.into(), value.clone().into());
                }
            }
            event.insert("objectRef".into(), object_ref.into());
        }
        event.insert("requestReceivedTimestamp".into(), id.received.clone().into());
        AuditEvent {
            auditor,
            decision,
            state: Arc::new(Mutex::new(EventState { event, annotations: BTreeMap::new() })),
        }
    }

    /// Returns the policy decision for this request.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    fn with<R>(&self, f: impl FnOnce(&mut EventState) -> R) -> Option<R> {
        self.state.lock().ok().map(|mut s| f(&mut s))
    }

    /// Adds an annotation (kept across stages).
    pub fn annotate(&self, key: &str, value: &str) {
        self.with(|s| s.annotations.insert(key.to_string(), value.to_string()));
    }

    /// Records the impersonated user.
    pub fn set_impersonated_user(&self, user: &UserInfo) {
        self.with(|s| s.event.insert("impersonatedUser".into(), user_json(user)));
    }

    /// Sets a top-level field (`requestObject`, `responseObject`, `responseStatus`).
    pub fn set(&self, key: &str, value: Value) {
        self.with(|s| s.event.insert(key.to_string(), value));
    }

    /// Writes the event for `stage`, if the policy keeps that stage.
    pub fn emit(&self, stage: Stage) {
        if !self.decision.writes(stage) {
            return;
        }
        let Some(event) = self.with(|s| {
            let mut event = s.event.clone();
            event.insert("stage".into(), stage.as_str().into());
            event.insert("stageTimestamp".into(), crate::clock::now_micro_rfc3339().into());
            if !s.annotations.is_empty() {
                event.insert("annotations".into(), json!(s.annotations));
            }
            Value::Object(event)
        }) else {
            return;
        };
        self.auditor.write(&event);
    }
}

/// kube's `SourceIPs`: the `X-Forwarded-For` chain, then `X-Real-Ip`, then the connection's
/// address, without repeats.
fn source_ips(req: &crate::body::Request) -> Vec<String> {
    let mut ips: Vec<String> = Vec::new();
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(forwarded) = header("x-forwarded-for") {
        ips.extend(
            forwarded.split(',').map(|s| s.trim().to_string()).filter(|s| s.parse::<std::net::IpAddr>().is_ok()),
        );
    }
    if let Some(real) = header("x-real-ip").filter(|s| s.trim().parse::<std::net::IpAddr>().is_ok()) {
        ips.push(real.trim().to_string());
    }
    if let Some(RemoteAddr(addr)) = req.extensions().get::<RemoteAddr>() {
        ips.push(addr.ip().to_string());
    }
    let mut seen = std::collections::BTreeSet::new();
    ips.retain(|ip| seen.insert(ip.clone()));
    ips
}
