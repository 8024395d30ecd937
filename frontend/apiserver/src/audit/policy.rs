//! The audit policy (`audit.k8s.io/v1` `Policy`, YAML or JSON) and its evaluation: the first
//! rule that matches a request decides its level and omitted stages; no match means `None`.
//! Matching follows kube's policy checker (`ruleMatches`): users, user groups and verbs narrow a
//! rule; `namespaces`/`resources` make it match only resource requests, `nonResourceURLs` only
//! non-resource ones (a trailing `*` is a prefix match).

use serde::Deserialize;

use crate::authn::UserInfo;
use crate::request_info::RequestInfo;

/// How much of a request an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    /// No event.
    None,
    /// User, verb, resource, timestamps, status: no bodies.
    Metadata,
    /// Metadata plus the request body.
    Request,
    /// Request plus the response body.
    RequestResponse,
}

impl Level {
    /// Returns the level's name as events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// A stage of a request at which an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// When a long-running response's headers are sent.
    ResponseStarted,
    /// When the response is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

impl Stage {
    /// Returns the stage's name as events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

/// A `GroupResources` entry of a rule.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GroupResources {
    /// API group ("" = core).
    pub group: String,
    /// Resources (`res`, `res/sub`, `*/sub`, `res/*`, `*`); empty = all in the group.
    pub resources: Vec<String>,
    /// Object names; empty = all.
    pub resource_names: Vec<String>,
}

/// One `PolicyRule`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// The level for matching requests.
    pub level: Level,
    /// User names; empty = all.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups; empty = all.
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs; empty = all.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources.
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces ("" = cluster-scoped).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource paths.
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages not to write for matching requests (added to the policy's).
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
}

/// The policy.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Must be `audit.k8s.io/v1` when set.
    #[serde(default)]
    pub api_version: String,
    /// Must be `Policy` when set.
    #[serde(default)]
    pub kind: String,
    /// Rules, first match wins.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// Stages omitted for every request.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
}

/// A policy that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Not YAML/JSON of the Policy shape.
    #[error("parsing the audit policy")]
    Parse(#[from] serde_yaml_ng::Error),
    /// Wrong apiVersion or kind.
    #[error("the audit policy must be apiVersion audit.k8s.io/v1, kind Policy (got {api_version} {kind})")]
    Kind {
        /// The apiVersion found.
        api_version: String,
        /// The kind found.
        kind: String,
    },
}

/// What the policy decides for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The level.
    pub level: Level,
    /// Stages not to write.
    pub omit_stages: Vec<Stage>,
}

impl Decision {
    /// Returns whether events for `stage` are written.
    pub fn writes(&self, stage: Stage) -> bool {
        self.level != Level::None && !self.omit_stages.contains(&stage)
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == value)
}

impl PolicyRule {
    fn matches(&self, user: &UserInfo, info: &RequestInfo) -> bool {
        if !self.users.is_empty() && !has(&self.users, &user.name) {
            return false;
        }
        if !self.user_groups.is_empty() && !user.groups.iter().any(|g| has(&self.user_groups, g)) {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, &info.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(info);
        }
        if !self.non_resource_urls.is_empty() {
            return !info.is_resource_request
                && self.non_resource_urls.iter().any(|u| {
                    *u == info.path || u.strip_suffix('*').is_some_and(|prefix| info.path.starts_with(prefix))
                });
        }
        true
    }

    fn matches_resource(&self, info: &RequestInfo) -> bool {
        if !info.is_resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !has(&self.namespaces, &info.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let (resource, sub) = (info.resource.as_str(), info.subresource.as_str());
        let combined = if sub.is_empty() { resource.to_string() } else { format!("{resource}/{sub}") };
        self.resources.iter().filter(|gr| gr.group == info.api_group).any(|gr| {
            if gr.resources.is_empty() {
                return true;
            }
            if !gr.resource_names.is_empty() && !has(&gr.resource_names, &info.name) {
                return false;
            }
            gr.resources.iter().any(|r| {
                *r == combined
                    || r == "*"
                    || (!sub.is_empty() && r.strip_prefix("*/") == Some(sub))
                    || r.strip_suffix("/*") == Some(resource)
            })
        })
    }
}

impl Policy {
    /// Parses a policy file's text (YAML or JSON).
    ///
    /// # Errors
    ///
    /// Returns `Parse` for malformed text or unknown levels and stages, `Kind` for another
    /// object.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let policy: Policy = serde_yaml_ng::from_str(text)?;
        let version_ok = policy.api_version.is_empty() || policy.api_version == "audit.k8s.io/v1";
        let kind_ok = policy.kind.is_empty() || policy.kind == "Policy";
        if !version_ok || !kind_ok {
            return Err(PolicyError::Kind { api_version: policy.api_version, kind: policy.kind });
        }
        Ok(policy)
    }

    /// Decides the level of one request.
    pub fn evaluate(&self, user: &UserInfo, info: &RequestInfo) -> Decision {
        match self.rules.iter().find(|r| r.matches(user, info)) {
            Some(rule) => {
                let mut omit_stages = self.omit_stages.clone();
                omit_stages.extend(rule.omit_stages.iter().copied().filter(|s| !self.omit_stages.contains(s)));
                Decision { level: rule.level, omit_stages }
            }
            None => Decision { level: Level::None, omit_stages: Vec::new() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_info::parse;
    use http::Method;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/version"]
  - level: None
    users: ["system:kube-proxy"]
  - level: RequestResponse
    resources:
      - group: ""
        resources: ["secrets"]
  - level: Request
    verbs: ["create", "update"]
    namespaces: ["team"]
    resources:
      - group: ""
        resources: ["configmaps", "pods/*"]
    omitStages: ["ResponseStarted"]
  - level: Metadata
"#;

    #[test]
    fn first_matching_rule_decides() {
        let p = Policy::parse(POLICY).expect("policy");
        let user = UserInfo::new("alice", "", vec!["dev".into()]);
        let at = |m: &Method, path: &str| p.evaluate(&user, &parse(m, path, None));
        assert_eq!(at(&Method::GET, "/healthz/etcd").level, Level::None);
        assert_eq!(at(&Method::GET, "/api/v1/namespaces/a/secrets").level, Level::RequestResponse);
        let d = at(&Method::POST, "/api/v1/namespaces/team/configmaps");
        assert_eq!(d.level, Level::Request);
        assert_eq!(d.omit_stages, vec![Stage::RequestReceived, Stage::ResponseStarted]);
        assert!(!d.writes(Stage::RequestReceived) && d.writes(Stage::ResponseComplete));
        assert_eq!(at(&Method::POST, "/api/v1/namespaces/team/pods/p/exec").level, Level::Request);
        assert_eq!(at(&Method::POST, "/api/v1/namespaces/other/configmaps").level, Level::Metadata);
        assert_eq!(at(&Method::GET, "/api/v1/namespaces/team/configmaps").level, Level::Metadata);
        let proxy = UserInfo::new("system:kube-proxy", "", vec![]);
        assert_eq!(p.evaluate(&proxy, &parse(&Method::GET, "/api/v1/pods", None)).level, Level::None);
    }

    #[test]
    fn rejects_other_kinds_and_levels() {
        assert!(Policy::parse("apiVersion: v1\nkind: ConfigMap\n").is_err());
        assert!(Policy::parse("rules:\n  - level: Everything\n").is_err());
        let empty = Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\n").expect("empty policy");
        assert_eq!(empty.evaluate(&UserInfo::anonymous(), &parse(&Method::GET, "/api", None)).level, Level::None);
    }
}
