//! Kubernetes' CEL IP library for `x-kubernetes-validations` rules: `ip(s)`, `isIP(s)`,
//! `ip.isCanonical(s)`, `string(ip)`, and on an address `family()`, `isUnspecified()`,
//! `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`, `isGlobalUnicast()`;
//! two addresses are `==` when they are the same address.
//!
//! Addresses are read as Go's `netip.ParseAddr` reads them, and refused in its words (kube
//! passes them on): no leading zeros in IPv4 octets, an embedded IPv4 only in the last 32 bits
//! of an IPv6 address. Kube also refuses a zone (`fe80::1%eth0`) and an IPv4-mapped IPv6
//! address (`::ffff:1.2.3.4`), and so do these functions. The functions are overloads on the
//! environment, since `string` is the standard library's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use cel::common::types::{Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::cel_overload::{owned, values};

/// An IP address value (`net.IP`, as kube names the type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ip(pub(crate) IpAddr);

pub(crate) const IP_TYPE_NAME: &str = "net.IP";

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE_NAME
    }
}

/// Go's `strconv.Quote`, as Go's messages quote the text they were given.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An address as `netip.ParseAddr` reads it, with whether it carried a zone; Go's error text
/// (`ParseAddr("1.2.3"): IPv4 address too short`) when it refuses it.
pub(crate) fn parse_go_addr(s: &str) -> Result<(IpAddr, bool), String> {
    let fail = |msg: &str, at: Option<&str>| match at {
        Some(at) if !at.is_empty() => format!("ParseAddr({}): {msg} (at {})", go_quote(s), go_quote(at)),
        _ => format!("ParseAddr({}): {msg}", go_quote(s)),
    };
    match s.bytes().find(|b| matches!(b, b'.' | b':' | b'%')) {
        Some(b'.') => parse_v4(s).map(|a| (IpAddr::V4(a), false)).map_err(|(msg, at)| fail(msg, at)),
        Some(b':') => parse_v6(s).map(|(a, zone)| (IpAddr::V6(a), zone)).map_err(|(msg, at)| fail(&msg, at)),
        Some(_) => Err(fail("missing IPv6 address", None)),
        None => Err(fail("unable to parse IP", None)),
    }
}

type ParseFailure<'a, M> = (M, Option<&'a str>);

fn parse_v4(s: &str) -> Result<Ipv4Addr, ParseFailure<'_, &'static str>> {
    let mut fields = [0u8; 4];
    let (mut value, mut pos, mut digits) = (0u32, 0usize, 0usize);
    let bytes = s.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'0'..=b'9' => {
                if digits == 1 && value == 0 {
                    return Err(("IPv4 field has octet with leading zero", None));
                }
                value = value * 10 + u32::from(b - b'0');
                digits += 1;
                if value > 255 {
                    return Err(("IPv4 field has value >255", None));
                }
            }
            b'.' => {
                if i == 0 || i == bytes.len() - 1 || bytes[i - 1] == b'.' {
                    return Err(("IPv4 field must have at least one digit", Some(&s[i..])));
                }
                if pos == 3 {
                    return Err(("IPv4 address too long", None));
                }
                fields[pos] = value as u8;
                pos += 1;
                value = 0;
                digits = 0;
            }
            _ => return Err(("unexpected character", Some(&s[i..]))),
        }
    }
    if pos < 3 {
        return Err(("IPv4 address too short", None));
    }
    fields[3] = value as u8;
    Ok(Ipv4Addr::from(fields))
}

fn fail_at<'a>(msg: &str, at: &'a str) -> ParseFailure<'a, String> {
    (msg.to_string(), Some(at))
}

fn parse_v6(input: &str) -> Result<(Ipv6Addr, bool), ParseFailure<'_, String>> {
    let fail = fail_at;
    let (mut s, zone) = match input.split_once('%') {
        Some((_, "")) => return Err(("zone must be a non-empty string".into(), None)),
        Some((addr, _)) => (addr, true),
        None => (input, false),
    };
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok((Ipv6Addr::UNSPECIFIED, zone));
        }
    }
    let mut i = 0;
    while i < 16 {
        let digits = s.bytes().take_while(u8::is_ascii_hexdigit).count();
        let mut acc = 0u32;
        for b in s[..digits].bytes() {
            acc = (acc << 4) + (b as char).to_digit(16).unwrap_or(0);
            if acc > 0xffff {
                return Err(fail("IPv6 field has value >=2^16", s));
            }
        }
        if digits == 0 {
            return Err(fail("each colon-separated field must have at least one digit", s));
        }
        if s.as_bytes().get(digits) == Some(&b'.') {
            if ellipsis.is_none() && i != 12 {
                return Err(fail("embedded IPv4 address must replace the final 2 fields of the address", s));
            }
            if i + 4 > 16 {
                return Err(fail("too many hex fields to fit an embedded IPv4 at the end of the address", s));
            }
            let v4 = parse_v4(s).map_err(|(msg, at)| {
                let inner = match at {
                    Some(at) => format!("ParseAddr({}): {msg} (at {})", go_quote(s), go_quote(at)),
                    None => format!("ParseAddr({}): {msg}", go_quote(s)),
                };
                (inner, Some(s))
            })?;
            ip[i..i + 4].copy_from_slice(&v4.octets());
            s = "";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[digits..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(fail("unexpected character, want colon", s));
        } else if s.len() == 1 {
            return Err(fail("colon must be followed by more characters", s));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(fail("multiple :: in address", s));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(fail("trailing garbage after address", s));
    }
    if i < 16 {
        let Some(at) = ellipsis else { return Err(("address string too short".into(), None)) };
        // Moves the fields after the `::` to the end, zeros in between.
        let n = 16 - i;
        ip.copy_within(at..i, at + n);
        ip[at..at + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(("the :: must expand to at least one field of zeros".into(), None));
    }
    Ok((Ipv6Addr::from(ip), zone))
}

/// An address as kube's `ip()` takes it: Go's parse, then no zone and no IPv4-mapped IPv6.
pub(crate) fn parse_ip(s: &str) -> Result<IpAddr, String> {
    let (addr, zone) = parse_go_addr(s)
        .map_err(|e| format!("IP Address {} parse error during conversion from string: {e}", go_quote(s)))?;
    if zone {
        return Err(format!("IP address {} with zone value is not allowed", go_quote(s)));
    }
    if is_4_in_6(addr) {
        return Err(format!("IPv4-mapped IPv6 address {} is not allowed", go_quote(s)));
    }
    Ok(addr)
}

pub(crate) fn is_4_in_6(addr: IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

pub(crate) fn string_arg(function: &str, v: &Value) -> Result<Arc<String>, ExecutionError> {
    match v {
        Value::String(s) => Ok(Arc::clone(s)),
        _ => Err(error(function, "no such overload")),
    }
}

pub(crate) fn ip_arg(function: &str, v: &Value) -> Result<IpAddr, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Ip>().map(|ip| ip.0).ok_or_else(|| error(function, "no such overload")),
        _ => Err(error(function, "no such overload")),
    }
}

pub(crate) fn wrap(addr: IpAddr) -> Value {
    Value::Opaque(Arc::new(Ip(addr)))
}

fn string_to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values("ip", args)?;
    owned(wrap(parse_ip(&string_arg("ip", &s)?).map_err(|e| error("ip", e))?))
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values("isIP", args)?;
    owned(Value::Bool(parse_ip(&string_arg("isIP", &s)?).is_ok()))
}

fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values("ip.isCanonical", args)?;
    let s = string_arg("ip.isCanonical", &s)?;
    let addr = parse_ip(&s).map_err(|e| error("ip.isCanonical", e))?;
    owned(Value::Bool(addr.to_string() == *s))
}

fn ip_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [ip] = values("string", args)?;
    owned(Value::String(ip_arg("string", &ip)?.to_string().into()))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [ip] = values("family", args)?;
    owned(Value::Int(if ip_arg("family", &ip)?.is_ipv4() { 4 } else { 6 }))
}

/// The first 16 bits of an IPv6 address.
fn first_group(v6: &Ipv6Addr) -> u16 {
    v6.segments()[0]
}

fn link_local_unicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => first_group(&v6) & 0xffc0 == 0xfe80,
    }
}

fn link_local_multicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => first_group(&v6) & 0xff0f == 0xff02,
    }
}

/// Go's `IsGlobalUnicast`: neither unspecified, broadcast, loopback, multicast nor link-local
/// unicast (private ranges count as global).
fn global_unicast(addr: IpAddr) -> bool {
    if addr == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return false;
    }
    !addr.is_unspecified() && !addr.is_loopback() && !addr.is_multicast() && !link_local_unicast(addr)
}

/// One `bool` property of an address, as an overload.
macro_rules! predicate {
    ($fn_name:ident, $cel_name:literal, $test:expr) => {
        fn $fn_name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let [ip] = values($cel_name, args)?;
            let test: fn(IpAddr) -> bool = $test;
            owned(Value::Bool(test(ip_arg($cel_name, &ip)?)))
        }
    };
}

predicate!(is_unspecified, "isUnspecified", |a| a.is_unspecified());
predicate!(is_loopback, "isLoopback", |a| a.is_loopback());
predicate!(is_link_local_multicast, "isLinkLocalMulticast", link_local_multicast);
predicate!(is_link_local_unicast, "isLinkLocalUnicast", link_local_unicast);
predicate!(is_global_unicast, "isGlobalUnicast", global_unicast);

/// The IP type, as rules name it (`type(ip('::1')) == net.IP`).
pub(crate) fn ip_type() -> Type {
    Type::new_opaque_type(IP_TYPE_NAME)
}

/// Declares the library's type and overloads on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_type(ip_type())?;
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], string_to_ip)?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], is_ip)?;
    env.add_overload("ip.isCanonical", "ip_is_canonical", vec![STRING_TYPE], is_canonical)?;
    env.add_overload("string", "ip_to_string", vec![ip_type()], ip_to_string)?;
    env.add_member_overload("family", "ip_family", ip_type(), vec![], family)?;
    let predicates: [(&str, &str, cel::common::functions::Function); 5] = [
        ("isUnspecified", "ip_is_unspecified", is_unspecified),
        ("isLoopback", "ip_is_loopback", is_loopback),
        ("isLinkLocalMulticast", "ip_is_link_local_multicast", is_link_local_multicast),
        ("isLinkLocalUnicast", "ip_is_link_local_unicast", is_link_local_unicast),
        ("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast),
    ];
    for (name, id, f) in predicates {
        env.add_member_overload(name, id, ip_type(), vec![], f)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str) -> Result<Value, String> {
        crate::cel_error::eval_in(extension, |_| Ok(()), expr)
    }

    #[test]
    fn functions_behave_as_kube_documents() {
        let t = |expr: &str| assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        t("isIP('192.168.0.1') && !isIP('192.168.0.1.0') && isIP('2001:db8::68') && !isIP('2001:db8:::68')");
        t("ip.isCanonical('127.0.0.1') && ip.isCanonical('2001:db8::68') && !ip.isCanonical('2001:DB8::68')");
        t("!ip.isCanonical('2001:db8::0:0:0:abcd')");
        t("ip('192.168.0.1').family() == 4 && ip('2001:db8::68').family() == 6");
        t("ip('0.0.0.0').isUnspecified() && !ip('127.0.0.1').isUnspecified() && ip('::').isUnspecified()");
        t("ip('127.0.0.1').isLoopback() && !ip('1.2.3.4').isLoopback() && ip('::1').isLoopback()");
        t("ip('224.0.0.1').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()");
        t("ip('ff02::1').isLinkLocalMulticast() && !ip('fd00::1').isLinkLocalMulticast()");
        t("ip('169.254.169.254').isLinkLocalUnicast() && !ip('192.168.0.1').isLinkLocalUnicast()");
        t("ip('fe80::1').isLinkLocalUnicast() && !ip('fd80::1').isLinkLocalUnicast()");
        t("ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()");
        t("ip('2001:db8::abcd').isGlobalUnicast() && !ip('ff00::1').isGlobalUnicast()");
        t("string(ip('192.168.0.1')) == '192.168.0.1' && string(ip('2001:DB8::0:68')) == '2001:db8::68'");
        t("ip('::1') == ip('0:0::1') && ip('::1') != ip('::2')");
        t("type(ip('192.168.0.1')) == net.IP");
    }

    #[test]
    fn refusals_read_as_kube_and_go_word_them() {
        let err = |expr: &str| eval(expr).expect_err(expr);
        assert_eq!(
            err("ip('192.168.0.1.0')"),
            "IP Address \"192.168.0.1.0\" parse error during conversion from string: \
             ParseAddr(\"192.168.0.1.0\"): IPv4 address too long"
        );
        assert_eq!(
            err("ip('2001:db8:::68')"),
            "IP Address \"2001:db8:::68\" parse error during conversion from string: \
             ParseAddr(\"2001:db8:::68\"): each colon-separated field must have at least one digit (at \":68\")"
        );
        assert_eq!(
            err("ip.isCanonical('127.0.0.1.0')"),
            "IP Address \"127.0.0.1.0\" parse error during conversion from string: \
             ParseAddr(\"127.0.0.1.0\"): IPv4 address too long"
        );
        assert_eq!(err("ip('::ffff:1.2.3.4')"), "IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed");
        assert_eq!(err("ip('fe80::1%eth0')"), "IP address \"fe80::1%eth0\" with zone value is not allowed");
        assert!(err("ip('127.0.0.01')").ends_with("IPv4 field has octet with leading zero"));
        assert!(err("ip('1.2.3.256')").ends_with("IPv4 field has value >255"));
        assert!(err("ip('1.2..3')").ends_with("IPv4 field must have at least one digit (at \".3\")"));
        assert!(err("ip('abc')").ends_with("ParseAddr(\"abc\"): unable to parse IP"));
        assert!(err("ip('1:2:3')").ends_with("address string too short"));
        assert!(err("ip('1::2:3:4:5:6:7:8')").ends_with("the :: must expand to at least one field of zeros"));
        assert!(err("ip('::1:2.3.4')")
            .ends_with("ParseAddr(\"::1:2.3.4\"): ParseAddr(\"2.3.4\"): IPv4 address too short (at \"2.3.4\")"));
        assert!(err("isIP(1)").contains("isIP"));
    }

    #[test]
    fn embedded_ipv4_fills_the_last_32_bits() {
        assert_eq!(parse_ip("::1.2.3.4").map(|a| a.to_string()), Ok("::102:304".to_string()));
        assert_eq!(parse_ip("64:ff9b::192.0.2.33").map(|a| a.to_string()), Ok("64:ff9b::c000:221".to_string()));
    }
}
