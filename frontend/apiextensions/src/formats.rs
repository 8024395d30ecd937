//! The string formats a schema may name that kube checks (`format: uuid`, `date-time`, ...).
//! Formats not listed here are accepted, as kube accepts unknown formats.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Returns whether `s` is a valid `format` string.
pub fn conforms(format: &str, s: &str) -> bool {
    match format {
        "uuid" => uuid(s),
        "date" => date(s),
        "date-time" => date_time(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "byte" => base64_ok(s),
        _ => true,
    }
}

fn uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

fn date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 3 && digits(parts[0], 4) && digits(parts[1], 2) && digits(parts[2], 2)
}

fn date_time(s: &str) -> bool {
    ballast_apiserver::registry::table::age::parse_rfc3339(s).is_some()
}

fn base64_ok(s: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).is_ok()
}
