//! [`Definition`]: what a stored CustomResourceDefinition says, read from its JSON once, with
//! kube's defaults applied (singular from the kind, `<Kind>List`). Everything else in this
//! crate works on it rather than on raw JSON.

use serde_json::Value;

/// The names of a custom resource (`spec.names` / `status.acceptedNames`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Names {
    /// Plural resource name (the URL segment).
    pub plural: String,
    /// Singular name; defaults to the lower-cased kind.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// List kind; defaults to `<kind>List`.
    pub list_kind: String,
    /// Short names.
    pub short_names: Vec<String>,
    /// Categories (`all`, ...).
    pub categories: Vec<String>,
}

impl Names {
    /// Reads names from `spec.names` or `status.acceptedNames`, with kube's defaults.
    pub fn from_json(v: &Value) -> Names {
        let strs = |key: &str| -> Vec<String> {
            v[key].as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect()
        };
        let kind = v["kind"].as_str().unwrap_or("").to_string();
        let singular = match v["singular"].as_str() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => kind.to_lowercase(),
        };
        let list_kind = match v["listKind"].as_str() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ if kind.is_empty() => String::new(),
            _ => format!("{kind}List"),
        };
        Names {
            plural: v["plural"].as_str().unwrap_or("").to_string(),
            singular,
            kind,
            list_kind,
            short_names: strs("shortNames"),
            categories: strs("categories"),
        }
    }

    /// Returns the names as JSON (`status.acceptedNames`).
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::json!({
            "plural": self.plural, "singular": self.singular, "kind": self.kind, "listKind": self.list_kind,
        });
        if !self.short_names.is_empty() {
            v["shortNames"] = self.short_names.clone().into();
        }
        if !self.categories.is_empty() {
            v["categories"] = self.categories.clone().into();
        }
        v
    }
}

/// One printer column (`additionalPrinterColumns[i]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// OpenAPI type: `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 = always shown, more = `-o wide`.
    pub priority: i64,
    /// The JSONPath of the cell, relative to the object.
    pub json_path: String,
}

/// The `/scale` subresource of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    /// `.spec.replicas`.
    pub spec_replicas_path: String,
    /// `.status.replicas`.
    pub status_replicas_path: String,
    /// `.status.selector`, optional.
    pub label_selector_path: Option<String>,
}

/// One version of a definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    /// Version name (`v1`).
    pub name: String,
    /// Whether it is served.
    pub served: bool,
    /// Whether objects are stored in it.
    pub storage: bool,
    /// Whether it is deprecated.
    pub deprecated: bool,
    /// The deprecation warning, if set.
    pub deprecation_warning: Option<String>,
    /// `schema.openAPIV3Schema` as written (with its `x-kubernetes-*` extensions).
    pub schema: Option<Value>,
    /// Whether `/status` is served.
    pub status: bool,
    /// The `/scale` subresource, if served.
    pub scale: Option<Scale>,
    /// Printer columns.
    pub columns: Vec<PrinterColumn>,
    /// `selectableFields[*].jsonPath`.
    pub selectable_fields: Vec<String>,
}

/// Where a conversion webhook is (`spec.conversion.webhook.clientConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WebhookClientConfig {
    /// `url` (`https://host[:port][/path]`), when the webhook is named by URL.
    pub url: Option<String>,
    /// `service`, when the webhook is a Service.
    pub service: Option<ServiceReference>,
    /// `caBundle`, decoded (PEM); empty when not set or not base64.
    pub ca_bundle: Vec<u8>,
}

/// A Service a webhook is reached through.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceReference {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The URL path (`/convert`), empty for `/`.
    pub path: String,
    /// The port (kube's default: 443).
    pub port: u16,
}

/// `spec.conversion` when its strategy is `Webhook`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WebhookConversion {
    /// Where the webhook is.
    pub client: WebhookClientConfig,
    /// `conversionReviewVersions`, in the definition's order of preference.
    pub review_versions: Vec<String>,
}

/// A CustomResourceDefinition, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// `metadata.name` (`<plural>.<group>`).
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.names`.
    pub names: Names,
    /// Whether `spec.scope` is `Namespaced`.
    pub namespaced: bool,
    /// `spec.versions`, in order.
    pub versions: Vec<Version>,
    /// `status.acceptedNames`, if the server accepted names yet.
    pub accepted: Option<Names>,
    /// Whether the definition is being deleted.
    pub terminating: bool,
    /// The conversion webhook, when `spec.conversion.strategy` is `Webhook` (`None`
    /// otherwise: versions differ in `apiVersion` only).
    pub webhook: Option<WebhookConversion>,
    /// The object as stored.
    pub object: Value,
}

fn version(v: &Value) -> Version {
    let subresources = &v["subresources"];
    let scale = subresources.get("scale").filter(|s| s.is_object()).map(|s| Scale {
        spec_replicas_path: s["specReplicasPath"].as_str().unwrap_or("").to_string(),
        status_replicas_path: s["statusReplicasPath"].as_str().unwrap_or("").to_string(),
        label_selector_path: s["labelSelectorPath"].as_str().filter(|p| !p.is_empty()).map(String::from),
    });
    let columns = v["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| PrinterColumn {
            name: c["name"].as_str().unwrap_or("").to_string(),
            type_: c["type"].as_str().unwrap_or("").to_string(),
            format: c["format"].as_str().unwrap_or("").to_string(),
            description: c["description"].as_str().unwrap_or("").to_string(),
            priority: c["priority"].as_i64().unwrap_or(0),
            json_path: c["jsonPath"].as_str().unwrap_or("").to_string(),
        })
        .collect();
    Version {
        name: v["name"].as_str().unwrap_or("").to_string(),
        served: v["served"].as_bool().unwrap_or(false),
        storage: v["storage"].as_bool().unwrap_or(false),
        deprecated: v["deprecated"].as_bool().unwrap_or(false),
        deprecation_warning: v["deprecationWarning"].as_str().map(String::from),
        schema: v["schema"].get("openAPIV3Schema").filter(|s| s.is_object()).cloned(),
        status: subresources.get("status").is_some_and(Value::is_object),
        scale,
        columns,
        selectable_fields: v["selectableFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["jsonPath"].as_str())
            .map(String::from)
            .collect(),
    }
}

/// Reads `spec.conversion` when its strategy is `Webhook`.
fn webhook_conversion(conversion: &Value) -> Option<WebhookConversion> {
    use base64::Engine as _;
    if conversion["strategy"] != "Webhook" {
        return None;
    }
    let webhook = &conversion["webhook"];
    let config = &webhook["clientConfig"];
    let service = config.get("service").filter(|s| s.is_object()).map(|s| ServiceReference {
        namespace: s["namespace"].as_str().unwrap_or("").to_string(),
        name: s["name"].as_str().unwrap_or("").to_string(),
        path: s["path"].as_str().unwrap_or("").to_string(),
        port: s["port"].as_u64().and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
    });
    let ca_bundle = config["caBundle"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default();
    Some(WebhookConversion {
        client: WebhookClientConfig { url: config["url"].as_str().map(String::from), service, ca_bundle },
        review_versions: webhook["conversionReviewVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
    })
}

impl Definition {
    /// Reads a stored (or submitted) CustomResourceDefinition.
    pub fn from_json(obj: &Value) -> Definition {
        let spec = &obj["spec"];
        let accepted =
            obj["status"].get("acceptedNames").filter(|n| n["plural"].as_str().is_some_and(|p| !p.is_empty()));
        Definition {
            name: obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
            uid: obj["metadata"]["uid"].as_str().unwrap_or("").to_string(),
            group: spec["group"].as_str().unwrap_or("").to_string(),
            names: Names::from_json(&spec["names"]),
            namespaced: spec["scope"] == "Namespaced",
            versions: spec["versions"].as_array().into_iter().flatten().map(version).collect(),
            accepted: accepted.map(Names::from_json),
            terminating: obj["metadata"]["deletionTimestamp"].as_str().is_some_and(|t| !t.is_empty()),
            webhook: webhook_conversion(&spec["conversion"]),
            object: obj.clone(),
        }
    }

    /// The storage version's name.
    pub fn storage_version(&self) -> Option<&str> {
        self.versions.iter().find(|v| v.storage).map(|v| v.name.as_str())
    }

    /// Returns the condition of `type_` from the status, if any.
    pub fn condition(&self, type_: &str) -> Option<&Value> {
        self.object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
    }

    /// Whether the condition `type_` is `True`.
    pub fn condition_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c["status"] == "True")
    }
}
