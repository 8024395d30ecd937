//! `/openapi/v2`, `/openapi/v3` and `/openapi/v3/<api/v1 | apis/group/version>`, answered from
//! the documents [`crate::registry::ServedKinds::openapi`] builds once, with kube-openapi's
//! caching rules:
//!
//! * every answer carries a quoted `Etag` (the upper-case hex SHA-512 of the JSON document) and
//!   honours `If-None-Match` with 304;
//! * a v3 group-version request with `?hash=` equal to the current hash is immutable:
//!   `Cache-Control: public, immutable`, `Expires` a year ahead, `Vary: Accept`; a stale hash is
//!   a 301 to the current URL (kubectl caches documents by URL and follows it); no hash, no
//!   caching headers beyond the ETag;
//! * v2 is JSON or gnostic protobuf by `Accept` (kubectl 1.32 asks only for
//!   `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`). The protobuf answer is
//!   labelled with the spelling without `@`, as upstream does: Go's `mime` parser, which client-go
//!   runs on the response `Content-Type`, rejects the `@`. v3 is JSON only, so a client that will
//!   take nothing but v3 protobuf gets 406.

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, StatusCode};

use super::negotiation::{accept, MediaRange};
use crate::body::{self, Response};
use crate::clock;
use crate::delegation::DelegatedApis;
use crate::error::ApiError;
use crate::registry::served_kinds::{Document, Documents};
use crate::registry::ServedKinds;

/// The v2 protobuf media type kubectl asks for (kube-openapi calls this spelling deprecated).
pub const V2_PROTOBUF_REQUESTED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The v2 protobuf media type answers carry, and the other spelling clients may ask for.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// How long an immutable (hashed) document may be cached: kube-openapi's one year.
const IMMUTABLE_SECONDS: i64 = 365 * 86_400;

fn accepts_any_json(ranges: &[MediaRange]) -> bool {
    ranges.is_empty() || ranges.iter().any(|r| matches!(r.media.as_str(), "application/json" | "application/*" | "*/*"))
}

fn not_acceptable() -> ApiError {
    ApiError::NotAcceptable("application/json".into())
}

/// Serves the OpenAPI paths.
///
/// # Errors
///
/// Returns `NoRoute` for a group version that is not served and `NotAcceptable` when no
/// offered form fits `Accept`.
pub async fn handle(
    kinds: &Arc<dyn ServedKinds>,
    delegated: Option<Arc<dyn DelegatedApis>>,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    // The first request builds the documents; that is CPU work, kept off the async workers.
    let docs = match kinds.openapi_if_built() {
        Some(docs) => docs,
        None => {
            let kinds = kinds.clone();
            tokio::task::spawn_blocking(move || kinds.openapi())
                .await
                .map_err(|e| ApiError::Internal(format!("building the OpenAPI documents: {e}")))?
        }
    };
    if path == "/openapi/v3" {
        if let Some(delegated) = &delegated {
            let index = with_delegated_paths(&docs.v3_index, delegated.openapi_v3_paths());
            return Ok(answer(headers, index.json, "application/json", &index.hash));
        }
    }
    if path == "/openapi/v2" {
        if let Some(delegated) = delegated {
            // Merging into the large v2 document is CPU work: off the async workers.
            let base = docs.v2.clone();
            let merged = tokio::task::spawn_blocking(move || delegated.openapi_v2(&base))
                .await
                .map_err(|e| ApiError::Internal(format!("building the OpenAPI v2 document: {e}")))?;
            if let Some((json, protobuf)) = merged {
                return v2(&json, &protobuf, headers);
            }
        }
    }
    serve(docs, path, query, headers)
}

/// The `/openapi/v3` index with the documents of the servers behind this one added.
fn with_delegated_paths(index: &Document, paths: Vec<(String, String)>) -> Document {
    if paths.is_empty() {
        return index.clone();
    }
    let mut doc: serde_json::Value = serde_json::from_slice(&index.json).unwrap_or_default();
    if let Some(map) = doc.get_mut("paths").and_then(serde_json::Value::as_object_mut) {
        for (key, hash) in paths {
            let url = format!("/openapi/v3/{key}?hash={hash}");
            // A version both serve (a definition naming a built-in group version) is the
            // built-in API's: it answers every path of its groups.
            map.entry(key).or_insert_with(|| serde_json::json!({ "serverRelativeURL": url }));
        }
    }
    Document::new(serde_json::to_vec(&doc).unwrap_or_default())
}

/// Answers an OpenAPI path from `docs`.
fn serve(docs: &Documents, path: &str, query: Option<&str>, headers: &HeaderMap) -> Result<Response, ApiError> {
    match path {
        "/openapi/v2" => v2(&docs.v2, &docs.v2_protobuf, headers),
        "/openapi/v3" => Ok(answer(headers, docs.v3_index.json.clone(), "application/json", &docs.v3_index.hash)),
        _ => {
            let key = path.strip_prefix("/openapi/v3/").ok_or(ApiError::NoRoute)?;
            let doc = docs.v3.get(key).ok_or(ApiError::NoRoute)?;
            if !accepts_any_json(&accept(headers)) {
                return Err(not_acceptable());
            }
            group_version(key, doc, query, headers)
        }
    }
}

/// Answers `/openapi/v2` in the form `Accept` asks for: JSON or gnostic protobuf (also for
/// servers in front that merge their own into it).
///
/// # Errors
///
/// `NotAcceptable` when `Accept` takes neither form.
pub fn v2(json: &Document, protobuf: &Bytes, headers: &HeaderMap) -> Result<Response, ApiError> {
    let ranges = accept(headers);
    let wants_protobuf = ranges.iter().position(|r| r.media == V2_PROTOBUF || r.media == V2_PROTOBUF_REQUESTED);
    let wants_json =
        ranges.iter().position(|r| matches!(r.media.as_str(), "application/json" | "application/*" | "*/*"));
    let as_protobuf = match (wants_protobuf, wants_json) {
        _ if ranges.is_empty() => false,
        (Some(p), Some(j)) => p < j,
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => return Err(not_acceptable()),
    };
    if as_protobuf {
        Ok(answer(headers, protobuf.clone(), V2_PROTOBUF, &json.hash))
    } else {
        Ok(answer(headers, json.json.clone(), "application/json", &json.hash))
    }
}

/// Answers one `/openapi/v3/<key>` document, honouring `?hash=` (a redirect to the current
/// hash, or an immutable answer) and `If-None-Match`.
pub fn group_version(
    key: &str,
    doc: &Document,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let hash = query.into_iter().flat_map(|q| q.split('&')).find_map(|kv| kv.strip_prefix("hash="));
    let mut resp = match hash {
        Some(h) if !h.is_empty() && h != doc.hash => {
            let location = format!("/openapi/v3/{key}?hash={}", doc.hash);
            let mut resp = http::Response::new(body::full(Bytes::from(format!(
                "<a href=\"{location}\">Moved Permanently</a>.\n\n"
            ))));
            *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
            if let Ok(v) = HeaderValue::from_str(&location) {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            return Ok(resp);
        }
        Some(h) if !h.is_empty() => {
            let mut resp = answer(headers, doc.json.clone(), "application/json", &doc.hash);
            let h = resp.headers_mut();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            if let Ok(v) = HeaderValue::from_str(&http_date(clock::unix_now() + IMMUTABLE_SECONDS)) {
                h.insert(header::EXPIRES, v);
            }
            resp
        }
        _ => answer(headers, doc.json.clone(), "application/json", &doc.hash),
    };
    resp.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    Ok(resp)
}

/// Answers `bytes` with its ETag, or 304 when the client already holds it.
fn answer(headers: &HeaderMap, bytes: Bytes, content_type: &'static str, hash: &str) -> Response {
    let etag = format!("\"{hash}\"");
    let matched = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if matched {
        let mut resp = http::Response::new(body::full(Bytes::new()));
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        resp
    } else {
        let mut resp = http::Response::new(body::full(bytes));
        resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        resp
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

/// Formats seconds since the epoch as an HTTP date (`Tue, 15 Nov 1994 08:12:31 GMT`).
fn http_date(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    // RFC 3339 text is `YYYY-MM-DDTHH:MM:SSZ`; rearranged rather than recomputed.
    let text = clock::format_rfc3339(secs);
    let year = &text[0..4];
    let month = text[5..7].parse::<usize>().map_or("Jan", |m| MONTHS[(m + 11) % 12]);
    let day = &text[8..10];
    let time = &text[11..19];
    let weekday = DAYS[secs.div_euclid(86_400).rem_euclid(7) as usize];
    format!("{weekday}, {day} {month} {year} {time} GMT")
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;

    #[test]
    fn http_dates_are_rfc1123() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(784_887_151), "Tue, 15 Nov 1994 08:12:31 GMT");
    }

    fn get(path: &str, query: Option<&str>, accept: Option<&str>) -> Result<Response, ApiError> {
        let mut headers = HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(header::ACCEPT, HeaderValue::from_str(a).expect("header"));
        }
        serve(docs(), path, query, &headers)
    }

    /// Two small documents: `/openapi/v3/apis/apps/v1` and the v2 one.
    fn docs() -> &'static Documents {
        static DOCS: std::sync::LazyLock<Documents> = std::sync::LazyLock::new(|| {
            let apps = Document::new(br#"{"openapi":"3.0.0","paths":{}}"#.to_vec());
            let v3_index = Document::new(br#"{"paths":{"apis/apps/v1":{}}}"#.to_vec());
            Documents {
                v3_index,
                v3: BTreeMap::from([("apis/apps/v1".to_string(), apps)]),
                v2: Document::new(br#"{"swagger":"2.0"}"#.to_vec()),
                v2_protobuf: Bytes::from_static(b"\n\x032.0"),
            }
        });
        &DOCS
    }

    #[test]
    fn stale_hash_redirects_and_current_hash_is_immutable() {
        let hash = &docs().v3["apis/apps/v1"].hash;
        let resp = get("/openapi/v3/apis/apps/v1", Some("hash=0123&timeout=32s"), None).expect("answer");
        assert_eq!(resp.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(resp.headers()[header::LOCATION], format!("/openapi/v3/apis/apps/v1?hash={hash}"));
        let query = format!("hash={hash}&timeout=32s");
        let resp = get("/openapi/v3/apis/apps/v1", Some(&query), Some("application/json")).expect("answer");
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CACHE_CONTROL], "public, immutable");
        assert_eq!(resp.headers()[header::ETAG], format!("\"{hash}\""));
        assert!(resp.headers().contains_key(header::EXPIRES));
        let resp = get("/openapi/v3/apis/apps/v1", None, None).expect("answer");
        assert!(!resp.headers().contains_key(header::CACHE_CONTROL));
    }

    #[test]
    fn negotiation_and_unknown_versions() {
        let err = get("/openapi/v3/apis/nope/v1", None, None).expect_err("404");
        assert!(matches!(err, ApiError::NoRoute));
        let err =
            get("/openapi/v3/apis/apps/v1", None, Some("application/com.github.proto-openapi.spec.v3@v1.0+protobuf"));
        assert!(matches!(err, Err(ApiError::NotAcceptable(_))));
        let resp = get("/openapi/v2", None, Some(V2_PROTOBUF_REQUESTED)).expect("answer");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], V2_PROTOBUF);
        let resp = get("/openapi/v2", None, Some("application/json")).expect("answer");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    }
}
