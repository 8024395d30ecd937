//! The string formats a schema may name that kube checks (`format: uuid`, `date-time`, ...):
//! the OpenAPI format library kube uses (strfmt, with govalidator's patterns and Go's parsers)
//! restricted to the formats kube lets definitions use. A name is looked up with its dashes
//! removed, as strfmt does (`date-time` is `datetime`); a name kube does not check is accepted.
//! Formats only apply to strings: kube checks no range for `int32`, `int64`, `float` or
//! `double`.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::LazyLock;

use ballast_apiserver::registry::validation::{dns1123_label, dns1123_subdomain};
use regex::Regex;

/// Returns whether `s` is a valid `format` string.
pub fn conforms(format: &str, s: &str) -> bool {
    match format.replace('-', "").as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => crate::cel_url::request_uri_error(s).is_none(),
        "email" => email(s),
        "hostname" => hostname(s),
        "ipv4" => sloppy_ip(s).is_some() && s.contains('.'),
        "ipv6" => ipv6(s),
        "cidr" => sloppy_cidr(s),
        "mac" => mac(s),
        "uuid" => uuid(s, None),
        "uuid3" => uuid(s, Some(b'3')),
        "uuid4" => uuid(s, Some(b'4')),
        "uuid5" => uuid(s, Some(b'5')),
        "isbn" => isbn10(s) || isbn13(s),
        "isbn10" => isbn10(s),
        "isbn13" => isbn13(s),
        "creditcard" => credit_card(s),
        "ssn" => s.len() == 11 && SSN.is_match(s),
        "hexcolor" => HEX_COLOR.is_match(s),
        "rgbcolor" => RGB_COLOR.is_match(s),
        "byte" => base64(s),
        "date" => full_date(s),
        "datetime" => date_time(s),
        "duration" => duration(s),
        "quantity" => crate::cel_quantity::Quantity::parse(s).is_ok(),
        "k8sshortname" => dns1123_label(s).is_empty(),
        "k8slongname" => dns1123_subdomain(s).is_empty(),
        // `password` is any string; other names are not checked.
        _ => true,
    }
}

// govalidator's patterns, as strfmt checks them.
static SSN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$").expect("constant"));
static HEX_COLOR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").expect("constant"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    let c = r"(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])";
    Regex::new(&format!(r"^rgb\(\s*{c}\s*,\s*{c}\s*,\s*{c}\s*\)$")).expect("constant")
});
static CREDIT_CARD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}",
        r"|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$"
    ))
    .expect("constant")
});
// RFC 1034 host names as strfmt reads them: letters include any Unicode letter or symbol, the
// top-level label is letters only, at least two.
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|",
        r"([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}",
        r"([a-zA-Z\p{L}]){2,63})$"
    ))
    .expect("constant")
});

fn hostname(s: &str) -> bool {
    HOSTNAME.is_match(s) && s.len() <= 255 && s.split('.').all(|label| label.len() <= 63)
}

/// strfmt's `uuid`..`uuid5`: five hex groups of 8, 4, 4, 4 and 12 digits, any case, each dash
/// optional; for a version, the third group starts with it and (4 and 5) the fourth with one
/// of `8 9 a b`.
pub(crate) fn uuid(s: &str, version: Option<u8>) -> bool {
    let mut rest = s.as_bytes();
    let mut groups = Vec::with_capacity(5);
    for (i, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix(b"-").unwrap_or(rest);
        }
        if rest.len() < len || !rest[..len].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        groups.push(&rest[..len]);
        rest = &rest[len..];
    }
    match version {
        _ if !rest.is_empty() => false,
        None => true,
        Some(v) => {
            groups[2][0] == v && (v == b'3' || matches!(groups[3][0].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b'))
        }
    }
}

/// strfmt's `byte` (govalidator's base64 pattern): whole groups of four from the standard
/// alphabet, the last one padded with `=` or `==` if short; not empty.
pub(crate) fn base64(s: &str) -> bool {
    let b = s.as_bytes();
    let alphabet = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    if b.is_empty() || b.len() % 4 != 0 {
        return false;
    }
    let body = b.strip_suffix(b"==").or_else(|| b.strip_suffix(b"=")).unwrap_or(b);
    body.iter().all(alphabet)
}

fn leap(year: u32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// A full date, `YYYY-MM-DD`, naming a day that exists (Go's `time.Parse("2006-01-02")`).
pub(crate) fn full_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let number = |r: std::ops::Range<usize>| -> Option<u32> {
        let t = s.get(r)?;
        t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok())?
    };
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else { return false };
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap(year) => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `datetime`: lower-cased and cut at each `t`, the first piece a full date and the
/// second `hh:mm:ss`, an optional fraction (any one character, then digits) and `z` or an
/// offset `±hh:mm` (pieces after a second `t` are not looked at, as strfmt does not).
pub(crate) fn date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut pieces = lower.split('t');
    let (Some(date), Some(time)) = (pieces.next(), pieces.next()) else { return false };
    full_date(date) && time_of_day(time)
}

fn time_of_day(t: &str) -> bool {
    let b = t.as_bytes();
    let two =
        |i: usize, max: &[u8; 2]| b.get(i..i + 2).is_some_and(|d| d.iter().all(u8::is_ascii_digit) && d <= &max[..]);
    if !(two(0, b"23") && b.get(2) == Some(&b':') && two(3, b"59") && b.get(5) == Some(&b':') && two(6, b"59")) {
        return false;
    }
    let zone = |z: &str| {
        let z = z.as_bytes();
        z == b"z"
            || (z.len() == 6
                && (z[0] == b'+' || z[0] == b'-')
                && z[1..3].iter().all(u8::is_ascii_digit)
                && z[3] == b':'
                && z[4..].iter().all(u8::is_ascii_digit))
    };
    let rest = &t[8..];
    if zone(rest) {
        return true;
    }
    // A fraction: one character (not a newline), then digits; the zone cannot start with one.
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) if c != '\n' => {
            let after = chars.as_str();
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            digits > 0 && zone(&after[digits..])
        }
        _ => false,
    }
}

/// Go's `time.ParseDuration` syntax: an optional sign, then one or more decimal numbers each
/// with a unit (`ns us µs μs ms s m h`), or a lone `0`; the total within ±2^63 ns.
pub(crate) fn go_duration(s: &str) -> bool {
    go_duration_nanos(s).is_some()
}

/// The nanoseconds of a duration in Go's `time.ParseDuration` syntax; `None` when Go refuses
/// it.
pub(crate) fn go_duration_nanos(s: &str) -> Option<i64> {
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if s == "0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.bytes().take_while(u8::is_ascii_digit).count();
                a.split_at(n)
            }
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_len = after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut value = whole.checked_mul(scale)?;
        // Digits past the twentieth are below a nanosecond of any unit.
        let frac = &frac[..frac.len().min(20)];
        if !frac.is_empty() {
            let digits: u128 = frac.parse().ok()?;
            value += digits * scale / 10u128.pow(frac.len() as u32);
        }
        total = total.checked_add(value)?;
        if total > 1 << 63 {
            return None;
        }
        rest = after;
    }
    if negative {
        Some((-(total as i128)) as i64)
    } else {
        i64::try_from(total).ok()
    }
}

static DURATION_TERM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(((?:-\s?)?\d+)\s*([A-Za-zµ]+))").expect("constant"));

/// strfmt's `duration`: Go's syntax, or else terms of the Scala-like form `<n> <unit>` found
/// anywhere in the string (`3 days`, `1 hour 20 min`), at least one naming a known unit.
fn duration(s: &str) -> bool {
    duration_nanos(s).is_some()
}

/// The nanoseconds of a duration as strfmt reads one (kube's value of a `duration` field in
/// rules): Go's syntax, or else the sum of the Scala-like terms, each unit's every variant
/// that matches counting.
pub(crate) fn duration_nanos(s: &str) -> Option<i64> {
    if let Some(nanos) = go_duration_nanos(s) {
        return Some(nanos);
    }
    const UNITS: &[(&[&str], i64)] = &[
        (&["ns", "nano"], 1),
        (&["us", "µs", "micro"], 1_000),
        (&["ms", "milli"], 1_000_000),
        (&["s", "sec"], 1_000_000_000),
        (&["m", "min"], 60_000_000_000),
        (&["h", "hr", "hour"], 3_600_000_000_000),
        (&["d", "day"], 86_400_000_000_000),
        (&["w", "wk", "week"], 604_800_000_000_000),
    ];
    let mut total: Option<i64> = None;
    for term in DURATION_TERM.captures_iter(s) {
        let (negative, number) = match term[2].strip_prefix('-') {
            Some(n) => (true, n.trim_start()),
            None => (false, &term[2]),
        };
        // Go's `strconv.Atoi` refuses a number beyond 64 bits and the whole string with it.
        let factor = number.parse::<i64>().ok()?;
        let factor = if negative { -factor } else { factor };
        let unit = term[3].to_lowercase();
        for (variants, multiplier) in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || unit == *v {
                    // Go's arithmetic wraps.
                    total = Some(total.unwrap_or(0).wrapping_add(factor.wrapping_mul(*multiplier)));
                }
            }
        }
    }
    total
}

/// An IPv4 field as Go 1.16 read it (and kube's sloppy parser still does): decimal digits,
/// leading zeros allowed, at most 255.
fn sloppy_v4(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut fields = s.split('.');
    for octet in &mut octets {
        let f = fields.next()?;
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = f.trim_start_matches('0');
        if n.len() > 3 {
            return None;
        }
        *octet = if n.is_empty() { 0 } else { n.parse::<u16>().ok().filter(|v| *v <= 255)? as u8 };
    }
    fields.next().is_none().then_some(Ipv4Addr::from(octets))
}

/// Go's `net.ParseIP` with leading zeros in IPv4 fields allowed (kube's `ParseIPSloppy`).
fn sloppy_ip(s: &str) -> Option<IpAddr> {
    if s.contains(':') {
        match crate::cel_ip::parse_go_addr(s) {
            Ok((addr, false)) => Some(addr),
            _ => None,
        }
    } else {
        sloppy_v4(s).map(IpAddr::V4)
    }
}

/// govalidator's `IsIPv6`: Go parses it as an address and it has a colon.
fn ipv6(s: &str) -> bool {
    s.contains(':') && sloppy_ip(s).is_some()
}

/// kube's `ParseCIDRSloppy`: an address, `/`, and a prefix length (decimal, leading zeros
/// allowed) no longer than the address.
fn sloppy_cidr(s: &str) -> bool {
    let Some((ip, len)) = s.split_once('/') else { return false };
    let Some(addr) = sloppy_ip(ip) else { return false };
    let bits = if addr.is_ipv4() { 32 } else { 128 };
    !len.is_empty()
        && len.len() <= 8
        && len.bytes().all(|b| b.is_ascii_digit())
        && len.parse::<u32>().is_ok_and(|n| n <= bits)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 bytes as hex pairs split by `:` or `-`, or as groups of
/// four hex digits split by `.`.
fn mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let hex = |part: &[u8]| part.iter().all(u8::is_ascii_hexdigit);
    let (bytes, ok) = if b[2] == b':' || b[2] == b'-' {
        if (b.len() + 1) % 3 != 0 {
            return false;
        }
        let ok = b.chunks(3).all(|c| hex(&c[..2]) && (c.len() == 2 || c[2] == b[2]));
        ((b.len() + 1) / 3, ok)
    } else if b[4] == b'.' {
        if (b.len() + 1) % 5 != 0 {
            return false;
        }
        let ok = b.chunks(5).all(|c| hex(&c[..4]) && (c.len() == 4 || c[4] == b'.'));
        (2 * (b.len() + 1) / 5, ok)
    } else {
        return false;
    };
    ok && matches!(bytes, 6 | 8 | 20)
}

/// The digits of an ISBN with its dashes and white space taken out.
fn isbn_digits(s: &str) -> String {
    s.chars().filter(|c| !(c.is_whitespace() || *c == '-')).collect()
}

/// govalidator's `IsISBN10`: nine digits and a digit or `X`, weighted sum divisible by 11.
fn isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 10 || !b[..9].iter().all(u8::is_ascii_digit) || !(b[9].is_ascii_digit() || b[9] == b'X') {
        return false;
    }
    let sum: u32 =
        b.iter().enumerate().map(|(i, c)| (i as u32 + 1) * if *c == b'X' { 10 } else { u32::from(c - b'0') }).sum();
    sum % 11 == 0
}

/// govalidator's `IsISBN13`: thirteen digits, weights alternating 1 and 3, sum divisible by 10.
fn isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = b.iter().enumerate().map(|(i, c)| u32::from(c - b'0') * if i % 2 == 0 { 1 } else { 3 }).sum();
    sum % 10 == 0
}

/// govalidator's `IsCreditCard`: the digits (everything else dropped) form a known issuer's
/// number and pass the Luhn check.
fn credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !CREDIT_CARD.is_match(&digits) {
        return false;
    }
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, c)| {
            let d = u32::from(c - b'0');
            match (i % 2 == 1, d * 2) {
                (true, twice) if twice >= 10 => twice % 10 + 1,
                (true, twice) => twice,
                (false, _) => d,
            }
        })
        .sum();
    sum % 10 == 0
}

/// Characters of an RFC 5322 atom (`atext`); Go also takes any non-ASCII character.
fn atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

/// A quoted string `"..."` at the start of `s` (backslash escapes a character): its length.
fn quoted_len(s: &str) -> Option<usize> {
    let mut chars = s.char_indices();
    if chars.next()?.1 != '"' {
        return None;
    }
    let mut escaped = false;
    for (i, c) in chars {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i + 1),
            '\r' | '\n' => return None,
            _ => {}
        }
    }
    None
}

/// `local@domain` as Go's `net/mail` reads an address: the local part a quoted string or
/// atoms and dots (Go tolerates stray dots there), the domain dot-separated atoms or a
/// bracketed literal.
fn addr_spec(s: &str) -> bool {
    let Some(at) = s.rfind('@') else { return false };
    let (local, domain) = (&s[..at], &s[at + 1..]);
    let local_ok = match quoted_len(local) {
        Some(n) => n == local.len(),
        None => !local.is_empty() && local.chars().all(|c| atext(c) || c == '.'),
    };
    let domain_ok = if let Some(literal) = domain.strip_prefix('[') {
        literal.strip_suffix(']').is_some_and(|l| !l.contains(['[', ']', '\\']))
    } else {
        !domain.is_empty() && domain.split('.').all(|label| !label.is_empty() && label.chars().all(atext))
    };
    local_ok && domain_ok
}

/// strfmt's `email`: Go's `net/mail.ParseAddress` takes it, either a bare address or one in
/// angle brackets after a display name (atoms or quoted strings).
fn email(s: &str) -> bool {
    let s = s.trim_matches([' ', '\t']);
    let Some(open) = s.find('<') else { return addr_spec(s) };
    let Some(inner) = s[open + 1..].strip_suffix('>') else { return false };
    let mut name = s[..open].trim_matches([' ', '\t']);
    while !name.is_empty() {
        if let Some(n) = quoted_len(name) {
            name = name[n..].trim_start_matches([' ', '\t']);
            continue;
        }
        let word = name.find([' ', '\t']).unwrap_or(name.len());
        if !name[..word].chars().all(|c| atext(c) || c == '.') {
            return false;
        }
        name = name[word..].trim_start_matches([' ', '\t']);
    }
    addr_spec(inner)
}

#[cfg(test)]
mod tests {
    use super::conforms;

    /// Values from strfmt's and govalidator's own tests, each with whether it passes.
    #[test]
    fn formats_accept_and_refuse_what_kube_does() {
        let cases: &[(&str, &str, bool)] = &[
            ("bsonobjectid", "507f1f77bcf86cd799439011", true),
            ("bsonobjectid", "507f1f77bcf86cd79943901", false),
            ("bsonobjectid", "507f1f77bcf86cd79943901z", false),
            ("uri", "http://somewhere.com", true),
            ("uri", "/relative/path", true),
            ("uri", "somewhere.com", false),
            ("email", "somebody@somewhere.com", true),
            ("email", "Some Body <somebody@somewhere.com>", true),
            ("email", "\"some body\"@somewhere.com", true),
            ("email", "somebody", false),
            ("email", "somebody@", false),
            ("email", "@somewhere.com", false),
            ("hostname", "somewhere.com", true),
            ("hostname", "www.xn--exampl-gva.com", true),
            ("hostname", "localhost", true),
            ("hostname", "a.b", false),
            ("hostname", "somewhere.com!", false),
            ("hostname", "-somewhere.com", false),
            ("hostname", &format!("{}.com", "a".repeat(64)), false),
            ("ipv4", "192.168.254.1", true),
            ("ipv4", "192.168.254.01", true),
            ("ipv4", "192.168.254.256", false),
            ("ipv4", "192.168.254", false),
            ("ipv4", "::1", false),
            ("ipv6", "::1", true),
            ("ipv6", "2001:db8::68", true),
            ("ipv6", "fe80::1%eth0", false),
            ("ipv6", "192.168.1.1", false),
            ("cidr", "192.168.254.1/24", true),
            ("cidr", "192.168.254.01/024", true),
            ("cidr", "2001:db8::/32", true),
            ("cidr", "192.168.254.1/33", false),
            ("cidr", "192.168.254.1", false),
            ("mac", "01:02:03:04:05:06", true),
            ("mac", "01-02-03-04-05-06", true),
            ("mac", "0102.0304.0506", true),
            ("mac", "01:02:03:04:05:06:07:08", true),
            ("mac", "01:02:03:04:05", false),
            ("mac", "01:02-03:04:05:06", false),
            ("mac", "01:02:03:04:05:0g", false),
            ("uuid", "a8098c1a-f86e-11da-bd1a-00112444be1e", true),
            ("uuid", "A8098C1AF86E11DABD1A00112444BE1E", true),
            ("uuid", "a8098c1a-f86e-11da-bd1a-00112444be1", false),
            ("uuid3", "bcd02e22-68f0-3046-a512-327cca9def8f", true),
            ("uuid3", "bcd02e22-68f0-4046-a512-327cca9def8f", false),
            ("uuid4", "025b0d74-00a2-4048-bf57-227c5111bb34", true),
            ("uuid4", "025b0d74-00a2-4048-0f57-227c5111bb34", false),
            ("uuid5", "886313e1-3b8a-5372-9b90-0c9aee199e5d", true),
            ("uuid5", "886313e1-3b8a-4372-9b90-0c9aee199e5d", false),
            ("isbn", "0321751043", true),
            ("isbn", "978-0321751041", true),
            ("isbn10", "0321751043", true),
            ("isbn10", "3-401-01319-X", true),
            ("isbn10", "0321751044", false),
            ("isbn13", "978 0321751041", true),
            ("isbn13", "978-0321751042", false),
            ("creditcard", "4111-1111-1111-1111", true),
            ("creditcard", "4111 1111 1111 1111", true),
            ("creditcard", "4111-1111-1111-1112", false),
            ("creditcard", "9111-1111-1111-1111", false),
            ("ssn", "111-11-1111", true),
            ("ssn", "111 11 1111", true),
            ("ssn", "111111111", false),
            ("ssn", "11-111-1111", false),
            ("hexcolor", "#FFFFFF", true),
            ("hexcolor", "fff", true),
            ("hexcolor", "#FFFF", false),
            ("rgbcolor", "rgb(255,255,255)", true),
            ("rgbcolor", "rgb( 0 , 10 , 255 )", true),
            ("rgbcolor", "rgb(256,255,255)", false),
            ("byte", "ZWxpemFiZXRocG9zZXk=", true),
            ("byte", "", false),
            ("byte", "ZWxpemFiZXRocG9zZXk", false),
            ("password", "anything at all", true),
            ("date", "2012-01-01", true),
            ("date", "2012-02-30", false),
            ("date", "2012-1-1", false),
            ("date-time", "2014-12-15T19:30:20.000Z", true),
            ("datetime", "2014-12-15t19:30:20+01:00", true),
            ("date-time", "2014-12-15 19:30:20Z", false),
            ("date-time", "2014-12-15T25:30:20Z", false),
            ("duration", "1h30m", true),
            ("duration", "-1.5h", true),
            ("duration", "3 days", true),
            ("duration", "1 hour 20 mins", true),
            ("duration", "2 weeks", true),
            ("duration", "1 fortnight", false),
            ("duration", "99999999999999999999 s", false),
            ("duration", "forever", false),
            ("quantity", "10Gi", true),
            ("quantity", "100m", true),
            ("quantity", "10 Gi", false),
            ("k8s-short-name", "my-name", true),
            ("k8s-short-name", "My-name", false),
            ("k8s-long-name", "my.name-1", true),
            ("k8s-long-name", "my..name", false),
            ("made-up", "anything", true),
        ];
        for (format, value, want) in cases {
            assert_eq!(conforms(format, value), *want, "format {format} value {value:?}");
        }
    }
}
