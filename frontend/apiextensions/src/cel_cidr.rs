//! Kubernetes' CEL CIDR library for `x-kubernetes-validations` rules: `cidr(s)`, `isCIDR(s)`,
//! `string(cidr)`, and on a CIDR `containsIP(ip|string)`, `containsCIDR(cidr|string)`,
//! `ip()`, `masked()`, `prefixLength()`; two CIDRs are `==` when address and length agree
//! (`10.0.0.1/8` is not `10.0.0.0/8`: `masked()` first for that).
//!
//! A CIDR is read as Go's `netip.ParsePrefix` reads it (the address as `ip()` reads one, a
//! decimal length without sign or leading zero) and refused in kube's words; an IPv4-mapped
//! IPv6 address is refused as kube refuses it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use cel::common::types::{Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::cel_ip::{go_quote, ip_arg, ip_type, is_4_in_6, parse_go_addr, parse_ip, string_arg};
use crate::cel_overload::{owned, values};

/// A CIDR value (`net.CIDR`, as kube names the type): an address and a prefix length that fits
/// its family. The address keeps the bits past the prefix, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    addr: IpAddr,
    bits: u8,
}

const CIDR_TYPE_NAME: &str = "net.CIDR";

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE_NAME
    }
}

fn max_bits(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

/// `addr` with every bit past the first `bits` cleared.
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

impl Cidr {
    /// Go's `netip.ParsePrefix`, in its words when it refuses.
    fn parse_go(s: &str) -> Result<Cidr, String> {
        let fail = |msg: &str| format!("netip.ParsePrefix({}): {msg}", go_quote(s));
        let (addr, bits) = s.rsplit_once('/').ok_or_else(|| fail("no '/'"))?;
        let (addr, zone) = parse_go_addr(addr).map_err(|e| fail(&e))?;
        if zone {
            return Err(fail("IPv6 zones cannot be present in a prefix"));
        }
        let bad_bits = || fail(&format!("bad bits after slash: {}", go_quote(bits)));
        if bits.len() > 1 && !bits.starts_with(|c: char| ('1'..='9').contains(&c)) {
            return Err(bad_bits());
        }
        let digits = bits.strip_prefix(['+', '-']).unwrap_or(bits);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad_bits());
        }
        // Past any family's length; Go's `Atoi` refuses only past int64, also out of range.
        let bits: u32 = bits.parse().unwrap_or(u32::MAX);
        let bits = u8::try_from(bits).ok().filter(|b| *b <= max_bits(addr));
        let bits = bits.ok_or_else(|| fail("prefix length out of range"))?;
        Ok(Cidr { addr, bits })
    }

    /// A CIDR as kube's `cidr()` takes it.
    fn parse(s: &str) -> Result<Cidr, String> {
        let context = "network address parse error during conversion from string";
        let cidr = Cidr::parse_go(s).map_err(|e| format!("{context}: {context}: {e}"))?;
        if is_4_in_6(cidr.addr) {
            return Err(format!("{context}: IPv4-mapped IPv6 address {} is not allowed", go_quote(s)));
        }
        Ok(cidr)
    }

    fn contains_ip(&self, ip: IpAddr) -> bool {
        self.addr.is_ipv4() == ip.is_ipv4() && mask(ip, self.bits) == mask(self.addr, self.bits)
    }

    /// Go's `Overlaps` and a prefix no longer than `other`'s: every address of `other` is in it.
    fn contains_cidr(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && self.bits <= other.bits
            && mask(self.addr, self.bits) == mask(other.addr, self.bits)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn cidr_arg(function: &str, v: &Value) -> Result<Cidr, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Cidr>().copied().ok_or_else(|| error(function, "no such overload")),
        _ => Err(error(function, "no such overload")),
    }
}

fn wrap(cidr: Cidr) -> Value {
    Value::Opaque(Arc::new(cidr))
}

fn string_to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values("cidr", args)?;
    owned(wrap(Cidr::parse(&string_arg("cidr", &s)?).map_err(|e| error("cidr", e))?))
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values("isCIDR", args)?;
    owned(Value::Bool(Cidr::parse(&string_arg("isCIDR", &s)?).is_ok()))
}

fn cidr_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr] = values("string", args)?;
    owned(Value::String(cidr_arg("string", &cidr)?.to_string().into()))
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr, ip] = values("containsIP", args)?;
    owned(Value::Bool(cidr_arg("containsIP", &cidr)?.contains_ip(ip_arg("containsIP", &ip)?)))
}

/// `containsIP` of a string: an address kube cannot read makes no such overload, as kube's
/// does (its error value is not an address).
fn contains_ip_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr, s] = values("containsIP", args)?;
    let ip = parse_ip(&string_arg("containsIP", &s)?).map_err(|_| error("containsIP", "no such overload"))?;
    owned(Value::Bool(cidr_arg("containsIP", &cidr)?.contains_ip(ip)))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr, other] = values("containsCIDR", args)?;
    owned(Value::Bool(cidr_arg("containsCIDR", &cidr)?.contains_cidr(&cidr_arg("containsCIDR", &other)?)))
}

fn contains_cidr_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr, s] = values("containsCIDR", args)?;
    let other = Cidr::parse(&string_arg("containsCIDR", &s)?).map_err(|e| error("containsCIDR", e))?;
    owned(Value::Bool(cidr_arg("containsCIDR", &cidr)?.contains_cidr(&other)))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr] = values("ip", args)?;
    owned(crate::cel_ip::wrap(cidr_arg("ip", &cidr)?.addr))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr] = values("masked", args)?;
    let cidr = cidr_arg("masked", &cidr)?;
    owned(wrap(Cidr { addr: mask(cidr.addr, cidr.bits), bits: cidr.bits }))
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr] = values("prefixLength", args)?;
    owned(Value::Int(i64::from(cidr_arg("prefixLength", &cidr)?.bits)))
}

/// Declares the library's type and overloads on `env` (the IP type too: `ip()` of a CIDR is
/// one).
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let cidr = || Type::new_opaque_type(CIDR_TYPE_NAME);
    env.add_type(cidr())?;
    env.add_type(ip_type())?;
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], string_to_cidr)?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], is_cidr)?;
    env.add_overload("string", "cidr_to_string", vec![cidr()], cidr_to_string)?;
    env.add_member_overload("containsIP", "cidr_contains_ip_string", cidr(), vec![STRING_TYPE], contains_ip_string)?;
    env.add_member_overload("containsIP", "cidr_contains_ip_ip", cidr(), vec![ip_type()], contains_ip)?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        cidr(),
        vec![STRING_TYPE],
        contains_cidr_string,
    )?;
    env.add_member_overload("containsCIDR", "cidr_contains_cidr", cidr(), vec![cidr()], contains_cidr)?;
    env.add_member_overload("ip", "cidr_ip", cidr(), vec![], cidr_ip)?;
    env.add_member_overload("prefixLength", "cidr_prefix_length", cidr(), vec![], prefix_length)?;
    env.add_member_overload("masked", "cidr_masked", cidr(), vec![], masked)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str) -> Result<Value, String> {
        let both = |env: &mut cel::Env| -> Result<(), cel::DeclarationError> {
            crate::cel_ip::extension(env)?;
            extension(env)
        };
        crate::cel_error::eval_in(both, |_| Ok(()), expr)
    }

    #[test]
    fn functions_behave_as_kube_documents() {
        let t = |expr: &str| assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        t("isCIDR('192.168.0.0/24') && !isCIDR('192.168.0.0/') && !isCIDR('192.168.0.0')");
        t("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))");
        t("!cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))");
        t("cidr('192.168.0.0/24').containsIP('192.168.0.1') && !cidr('192.168.0.0/24').containsIP('192.168.1.1')");
        t("cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))");
        t("cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.1/32'))");
        t("!cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))");
        t("!cidr('192.168.0.0/24').containsCIDR(cidr('192.169.0.1/32'))");
        t("cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25') && !cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')");
        t("cidr('192.168.0.0/24').ip() == ip('192.168.0.0')");
        t("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24') && cidr('192.168.0.1/24') != cidr('192.168.0.0/24')");
        t("cidr('192.168.0.0/24').prefixLength() == 24");
        t("cidr('2001:db8::/32').containsIP(ip('2001:db8::1')) && !cidr('2001:db8::/32').containsIP(ip('2001:dc8::1'))");
        t("cidr('2001:db8::/32').containsIP('2001:db8::1') && !cidr('2001:db8::/32').containsIP('2001:dc8::1')");
        t("cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/33')) && !cidr('2001:db8::/32').containsCIDR('2001:db8::/31')");
        t("cidr('2001:db8::/32').ip() == ip('2001:db8::') && cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32')");
        t("cidr('2001:db8::/32').prefixLength() == 32");
        t("!cidr('0.0.0.0/0').containsIP(ip('::1')) && cidr('::/0').containsIP(ip('::1'))");
        t("string(cidr('192.168.0.0/24')) == '192.168.0.0/24' && string(cidr('2001:DB8::/32')) == '2001:db8::/32'");
        t("type(cidr('192.168.0.0/24')) == net.CIDR");
    }

    #[test]
    fn refusals_read_as_kube_words_them() {
        let err = |expr: &str| eval(expr).expect_err(expr);
        assert_eq!(
            err("cidr('192.168.0.0/')"),
            "network address parse error during conversion from string: network address parse error during \
             conversion from string: netip.ParsePrefix(\"192.168.0.0/\"): bad bits after slash: \"\""
        );
        assert_eq!(
            err("cidr('2001:db8::/')"),
            "network address parse error during conversion from string: network address parse error during \
             conversion from string: netip.ParsePrefix(\"2001:db8::/\"): bad bits after slash: \"\""
        );
        assert!(err("cidr('10.0.0.0/33')").ends_with("netip.ParsePrefix(\"10.0.0.0/33\"): prefix length out of range"));
        assert!(err("cidr('10.0.0.0/08')").ends_with("bad bits after slash: \"08\""));
        assert!(err("cidr('10.0.0.0')").ends_with("netip.ParsePrefix(\"10.0.0.0\"): no '/'"));
        assert!(err("cidr('10.0.0/8')")
            .ends_with("netip.ParsePrefix(\"10.0.0/8\"): ParseAddr(\"10.0.0\"): IPv4 address too short"));
        assert!(err("cidr('fe80::%eth0/64')").ends_with("IPv6 zones cannot be present in a prefix"));
        assert_eq!(
            err("cidr('::ffff:1.2.3.4/120')"),
            "network address parse error during conversion from string: IPv4-mapped IPv6 address \
             \"::ffff:1.2.3.4/120\" is not allowed"
        );
        assert_eq!(err("cidr('10.0.0.0/8').containsIP('10.0.0.256')"), "no such overload");
        assert!(err("cidr('10.0.0.0/8').containsCIDR('10.0.0.0/x')").ends_with("bad bits after slash: \"x\""));
    }
}
