//! The only place that reads the clocks (`clippy.toml` refuses `SystemTime::now` and
//! `Instant::now` elsewhere), and the RFC 3339 formatting Kubernetes uses for `metav1.Time`
//! (seconds, `Z`).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Returns the current wall-clock time.
#[allow(clippy::disallowed_methods)] // The one sanctioned call of SystemTime::now.
fn system_now() -> SystemTime {
    SystemTime::now()
}

/// Returns the current monotonic instant (for durations such as request latency).
#[allow(clippy::disallowed_methods)] // The one sanctioned call of Instant::now.
pub fn monotonic_now() -> Instant {
    Instant::now()
}

/// Returns the current time in whole seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    system_now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Returns the nanoseconds within the current second of the wall clock (what kube's
/// `time.Now().Nanosecond()` reads, e.g. to name a CEL rule's `self` type afresh).
pub fn subsec_nanos_now() -> u32 {
    system_now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
}

/// Returns the current time as `metav1.Time` text, e.g. `2026-11-22T13:08:21Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339(unix_now())
}

/// Returns the current time as `metav1.MicroTime` text (microseconds, `Z`), e.g.
/// `2026-11-22T13:08:21.123456Z`, as audit events carry.
pub fn now_micro_rfc3339() -> String {
    let since = system_now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let whole = format_rfc3339(since.as_secs() as i64);
    format!("{}.{:06}Z", whole.trim_end_matches('Z'), since.subsec_micros())
}

/// Formats seconds since the Unix epoch as RFC 3339 in UTC with whole seconds.
pub fn format_rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Parses RFC 3339 text (`2026-11-22T13:08:21Z`, fractions and offsets allowed) into whole
/// seconds since the Unix epoch; `None` when it is not such text.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, s) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        rest = frac.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (rest.get(1..3)?.parse::<i64>().ok()? * 3600 + rest.get(4..6)?.parse::<i64>().ok()? * 60)
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset)
}

/// Converts a proleptic Gregorian date to days since 1970-01-01 (Hinnant's
/// `days_from_civil`, the inverse of [`civil_from_days`]).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day).
///
/// This is Howard Hinnant's `civil_from_days`: eras of 400 years make the leap rules regular.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(1_795_526_901), "2026-11-24T13:28:21Z");
    }

    #[test]
    fn parses_what_it_formats() {
        for secs in [0, 951_782_400, 1_795_526_901, -86_400] {
            assert_eq!(parse_rfc3339(&format_rfc3339(secs)), Some(secs));
        }
        assert_eq!(parse_rfc3339("2026-11-24T14:28:21.5+01:00"), Some(1_795_526_901));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
