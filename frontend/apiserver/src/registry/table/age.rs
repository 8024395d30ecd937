//! Human durations for `Age`-style cells, with the same rounding steps kubectl users know from
//! kube-apiserver (`5s`, `3m20s`, `95m`, `5h10m`, `3d4h`, `400d`, `2y30d`), and RFC 3339
//! parsing of `metav1.Time` values.

/// Formats a duration in seconds the way kube's `HumanDuration` does: finer units while the
/// value is small, coarser ones as it grows, so a column stays short and readable.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{days}d") } else { format!("{days}d{h}h") };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        let d = days % 365;
        return if d == 0 { format!("{years}y") } else { format!("{years}y{d}d") };
    }
    format!("{years}y")
}

/// Parses an RFC 3339 timestamp (`2026-11-22T13:08:21Z`, optional fraction and offset) into
/// seconds since the Unix epoch. Returns `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let h = rest.get(1..3)?.parse::<i64>().ok()?;
            let m = rest.get(4..6)?.parse::<i64>().ok()?;
            sign * (h * 3600 + m * 60)
        }
        _ => return None,
    };
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Converts a proleptic Gregorian date to days since 1970-01-01 (Howard Hinnant's
/// `days_from_civil`, the inverse of `clock::civil_from_days`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Returns the age of `timestamp` at `now` as a human duration, or `<unknown>` when the
/// timestamp is missing or malformed (kube prints the same for a zero time).
pub fn age(timestamp: Option<&str>, now: i64) -> String {
    match timestamp.and_then(parse_rfc3339) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_like_kubectl_shows_them() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (599, "9m59s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 600, "5h10m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (8 * 86_400, "8d"),
            (400 * 86_400, "400d"),
            (2 * 365 * 86_400 + 30 * 86_400, "2y30d"),
            (3 * 365 * 86_400, "3y"),
            (9 * 365 * 86_400 + 86_400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs} s");
        }
    }

    #[test]
    fn rfc3339_round_trips_with_the_clock() {
        for secs in [0, 951_782_400, 1_795_526_901, 4_102_444_799] {
            assert_eq!(parse_rfc3339(&crate::clock::format_rfc3339(secs)), Some(secs));
        }
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00.123456+01:00"), Some(0));
        assert_eq!(parse_rfc3339("not a time"), None);
        assert_eq!(parse_rfc3339("1970-13-01T00:00:00Z"), None);
        assert_eq!(age(None, 10), "<unknown>");
        assert_eq!(age(Some("1970-01-01T00:00:00Z"), 65), "65s");
    }
}
