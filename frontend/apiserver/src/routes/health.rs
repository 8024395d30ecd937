//! `/version` and the health endpoints `/healthz`, `/livez`, `/readyz`.
//!
//! Each health endpoint runs its checks (`ping`; `log`; `etcd`: a read against storage) and
//! answers `ok`, or with `?verbose` one `[+]name ok` / `[-]name failed: reason withheld` line per
//! check and a summary, 500 if any failed, like kube-apiserver. `/<endpoint>/<check>` runs one
//! check; `?exclude=<check>` skips one.
//!
//! A frontend running in one process with its storage engine (`ballast serve`) has one more
//! check, `engine` ([`super::state::EngineProbe`]): a shard the engine stopped on a storage error fails it,
//! and it names the shard and the cause (kube-apiserver withholds its checks' reasons, but
//! those are about its own connections; this one is what an operator must act on).

use http::StatusCode;

use super::state::AppState;
use crate::body::{self, Response};
use crate::error::ApiError;
use crate::request_info::query_pairs;
use crate::served::Version;

/// Returns the `/version` document (`version.Info`) of `version`.
pub fn version(version: Version) -> Response {
    let (major, minor) = (version.major.to_string(), version.minor.to_string());
    body::json(
        StatusCode::OK,
        &serde_json::json!({
            "major": major,
            "minor": minor,
            "gitVersion": version.git_version(),
            "gitCommit": "ballast",
            "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "n/a (rust)",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
            "emulationMajor": major,
            "emulationMinor": minor,
            "minCompatibilityMajor": major,
            "minCompatibilityMinor": version.minor.saturating_sub(1).to_string(),
        }),
    )
}

const CHECKS: [&str; 3] = ["ping", "log", "etcd"];
const ENGINE: &str = "engine";

/// The checks `state` runs, in order.
fn checks(state: &AppState) -> impl Iterator<Item = &'static str> {
    CHECKS.into_iter().chain(state.engine_probe.is_some().then_some(ENGINE))
}

/// Runs one check: `Err` with the reason to show (`None`: withheld) when it fails.
async fn run(state: &AppState, check: &str) -> Result<(), Option<String>> {
    match check {
        // kube-apiserver's etcd check reads `<--etcd-prefix>/health`.
        "etcd" => match state.store.storage().get(format!("{}/health", state.store.prefix()).as_bytes()).await {
            Ok(_) => Ok(()),
            Err(_) => Err(None),
        },
        ENGINE => match state.engine_probe.as_ref().and_then(|p| (p.0)()) {
            Some(reason) => Err(Some(reason)),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Serves `/healthz`, `/livez`, `/readyz` and their per-check paths.
///
/// # Errors
///
/// Returns `NoRoute` for an unknown check.
pub async fn check(state: &AppState, path: &str, query: Option<&str>) -> Result<Response, ApiError> {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let endpoint = parts.next().unwrap_or("healthz");
    if let Some(one) = parts.next() {
        if !checks(state).any(|c| c == one) {
            return Err(ApiError::NoRoute);
        }
        return Ok(match run(state, one).await {
            Ok(()) => body::text(StatusCode::OK, "ok".into()),
            Err(reason) => body::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                match reason {
                    Some(r) => format!("internal server error: {one} check failed: {r}\n"),
                    None => format!("internal server error: {one} check failed\n"),
                },
            ),
        });
    }
    let pairs = query_pairs(query);
    let verbose = pairs.iter().any(|(k, v)| k == "verbose" && v != "false");
    let excluded: Vec<&str> = pairs.iter().filter(|(k, _)| k == "exclude").map(|(_, v)| v.as_str()).collect();
    let mut lines = String::new();
    let mut failed = false;
    for name in checks(state) {
        if excluded.contains(&name) {
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match run(state, name).await {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                failed = true;
                let reason = reason.unwrap_or_else(|| "reason withheld".into());
                lines.push_str(&format!("[-]{name} failed: {reason}\n"));
            }
        }
    }
    if failed {
        return Ok(body::text(StatusCode::INTERNAL_SERVER_ERROR, format!("{lines}{endpoint} check failed\n")));
    }
    Ok(if verbose {
        body::text(StatusCode::OK, format!("{lines}{endpoint} check passed\n"))
    } else {
        body::text(StatusCode::OK, "ok".into())
    })
}
