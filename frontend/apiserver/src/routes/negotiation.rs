//! `Accept` header parsing: which representation a client will take.
//!
//! Served forms, chosen in the client's order of preference:
//! * JSON (`application/json`, `application/*`, `*/*`, or no `Accept` at all, as kube-rs sends);
//! * YAML (`application/yaml`), for single objects and lists (not for watch streams, as kube);
//! * `Table` (`application/json;as=Table;g=meta.k8s.io;v=v1|v1beta1`), what `kubectl get` asks
//!   for, with plain JSON listed after it as a fallback;
//! * `PartialObjectMetadata` / `PartialObjectMetadataList` (`as=...;g=meta.k8s.io;v=v1`), what
//!   metadata informers ask for.
//!
//! A client that accepts none of these (protobuf only, say) gets 406, as kube requires.

use http::HeaderMap;

/// One media range of an `Accept` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRange {
    /// `type/subtype`, lower-case.
    pub media: String,
    /// Parameters (`g`, `v`, `as`, ...), keys lower-case.
    pub params: Vec<(String, String)>,
}

impl MediaRange {
    /// Returns parameter `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Parses an `Accept` header into media ranges, in the client's order (q-values are ignored:
/// client-go lists its preferences in order).
pub fn accept(headers: &HeaderMap) -> Vec<MediaRange> {
    let Some(value) = headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()) else { return Vec::new() };
    value
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let media = pieces.next()?.trim().to_ascii_lowercase();
            if media.is_empty() {
                return None;
            }
            let params = pieces
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k.trim().to_ascii_lowercase(), v.trim().trim_matches('"').to_string()))
                })
                .collect();
            Some(MediaRange { media, params })
        })
        .collect()
}

/// Returns whether a plain JSON answer is acceptable.
pub fn accepts_json(ranges: &[MediaRange]) -> bool {
    ranges.is_empty() || ranges.iter().any(|r| is_json(r) && r.param("as").is_none())
}

fn is_json(r: &MediaRange) -> bool {
    matches!(r.media.as_str(), "application/json" | "application/*" | "*/*")
}

/// The representation a response is encoded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The object or list as JSON.
    Json,
    /// The object or list as YAML.
    Yaml,
    /// A `meta.k8s.io` Table of this API version.
    Table(&'static str),
    /// `PartialObjectMetadata` (or its list) of this API version.
    Metadata(&'static str),
}

/// Picks the first representation in the client's list that can be served; `watch` streams
/// have no YAML form.
///
/// # Errors
///
/// Returns `NotAcceptable` when none can.
pub fn negotiate(headers: &HeaderMap, watch: bool) -> Result<Output, crate::error::ApiError> {
    let ranges = accept(headers);
    if ranges.is_empty() {
        return Ok(Output::Json);
    }
    for r in &ranges {
        let meta_version = || match (r.param("g"), r.param("v")) {
            (Some("meta.k8s.io"), Some("v1")) => Some("meta.k8s.io/v1"),
            (Some("meta.k8s.io"), Some("v1beta1")) => Some("meta.k8s.io/v1beta1"),
            _ => None,
        };
        match (r.media.as_str(), r.param("as")) {
            (_, None) if is_json(r) => return Ok(Output::Json),
            ("application/yaml", None) if !watch => return Ok(Output::Yaml),
            ("application/json", Some("Table")) => {
                if let Some(v) = meta_version() {
                    return Ok(Output::Table(v));
                }
            }
            ("application/json", Some("PartialObjectMetadata" | "PartialObjectMetadataList")) => {
                if let Some(v) = meta_version().filter(|v| *v == "meta.k8s.io/v1") {
                    return Ok(Output::Metadata(v));
                }
            }
            _ => {}
        }
    }
    Err(crate::error::ApiError::NotAcceptable(if watch { SUPPORTED_WATCH } else { SUPPORTED }.into()))
}

/// The media types listed in a 406 answer: the ones answers are served in (protobuf answers
/// are not built, so a client asking only for protobuf is told what it can have).
pub const SUPPORTED: &str = "application/json, application/yaml";

/// The media types a watch is served in (406 for a watch).
pub const SUPPORTED_WATCH: &str = "application/json";

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, accept.parse().expect("header"));
        h
    }

    #[test]
    fn json_acceptability() {
        assert!(accepts_json(&accept(&HeaderMap::new())));
        assert!(accepts_json(&accept(&headers("application/vnd.kubernetes.protobuf,application/json"))));
        assert!(accepts_json(&accept(&headers(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ))));
        assert!(!accepts_json(&accept(&headers("application/json;as=Table;v=v1;g=meta.k8s.io"))));
        assert!(!accepts_json(&accept(&headers("application/vnd.kubernetes.protobuf"))));
        assert!(accepts_json(&accept(&headers("application/json, */*"))));
    }

    #[test]
    fn negotiation_follows_the_clients_order() {
        let pick = |a: &str, watch| negotiate(&headers(a), watch).ok();
        assert_eq!(negotiate(&HeaderMap::new(), false).ok(), Some(Output::Json));
        let kubectl =
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(pick(kubectl, false), Some(Output::Table("meta.k8s.io/v1")));
        assert_eq!(pick(kubectl, true), Some(Output::Table("meta.k8s.io/v1")));
        assert_eq!(
            pick("application/json;as=Table;v=v1beta1;g=meta.k8s.io", false),
            Some(Output::Table("meta.k8s.io/v1beta1"))
        );
        assert_eq!(pick("application/json;as=Table;v=v2;g=meta.k8s.io", false), None);
        assert_eq!(pick("application/json;as=Table;v=v2;g=meta.k8s.io, application/json", false), Some(Output::Json));
        assert_eq!(pick("application/yaml", false), Some(Output::Yaml));
        assert_eq!(pick("application/yaml", true), None);
        assert_eq!(pick("application/yaml, application/json", true), Some(Output::Json));
        assert_eq!(
            pick("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", false),
            Some(Output::Metadata("meta.k8s.io/v1"))
        );
        assert_eq!(pick("application/vnd.kubernetes.protobuf", false), None);
        assert_eq!(pick("application/vnd.kubernetes.protobuf, */*", false), Some(Output::Json));
    }
}
