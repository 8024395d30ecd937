//! `Accept` header parsing: which representation a client will take.
//!
//! Responses are JSON. A client that accepts JSON (`application/json`, `application/*`,
//! `*/*`, or no `Accept` at all, as kube-rs sends) gets it; Table and other `as=` forms are
//! not produced yet, so a client that accepts *only* those gets 406, as kube requires. Client-go
//! always lists plain JSON as a fallback, which is what kubectl then prints from.

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
    ranges.is_empty()
        || ranges.iter().any(|r| {
            matches!(r.media.as_str(), "application/json" | "application/*" | "*/*") && r.param("as").is_none()
        })
}

/// The media types listed in a 406 answer.
pub const SUPPORTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

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
}
