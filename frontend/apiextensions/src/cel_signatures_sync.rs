//! Keeps the checker's declarations and the interpreter in step: a call of every overload
//! [`crate::cel_signatures`] declares, with arguments of its declared types, evaluates in the
//! context rules run in.

use crate::cel_signatures::Param::{self, Bool, Bytes, Double, Duration, Dyn, Int, Opaque, String, Timestamp, Uint, A};
use crate::cel_signatures::{CIDR, IP, LISTS, NAMED_FORMATS, OVERLOADS, QUANTITY, SEMVER, URL};

/// A valid argument of type `p` for `function`, in CEL.
fn sample(function: &str, p: &Param) -> std::string::String {
    match p {
        Bool => "true".into(),
        Int | Dyn | A => "1".into(),
        Uint => "1u".into(),
        Double => "1.0".into(),
        Bytes => "b'a'".into(),
        Duration => "duration('1s')".into(),
        Timestamp => "timestamp('2020-01-01T00:00:00Z')".into(),
        Param::Type => "int".into(),
        Param::Optional(t) => format!("optional.of({})", sample(function, t)),
        Param::List(e) => format!("[{}]", sample(function, e)),
        Param::Map(k, v) => format!("{{{}: {}}}", sample(function, k), sample(function, v)),
        Opaque(QUANTITY) => "quantity('1')".into(),
        Opaque(URL) => "url('https://a')".into(),
        Opaque(IP) => "ip('1.2.3.4')".into(),
        Opaque(CIDR) => "cidr('1.2.3.0/24')".into(),
        Opaque(SEMVER) => "semver('1.0.0')".into(),
        Opaque(_) => "format.dns1123Label()".into(),
        String => match function {
            "quantity" | "isQuantity" | "int" | "uint" | "double" => "'1'",
            "url" | "isURL" => "'https://a'",
            "ip" | "isIP" | "ip.isCanonical" | "containsIP" => "'1.2.3.4'",
            "cidr" | "isCIDR" | "containsCIDR" => "'1.2.3.0/24'",
            "semver" | "isSemver" => "'1.0.0'",
            "duration" => "'1s'",
            "timestamp" => "'2020-01-01T00:00:00Z'",
            "format.named" => "'dns1123Label'",
            "bool" => "'true'",
            "indexOf" | "lastIndexOf" => "'aa'",
            f if f.starts_with("get") => "'UTC'",
            _ => "'a'",
        }
        .into(),
    }
}

/// Every declared overload is one the interpreter has: a call of it with arguments of
/// its declared types evaluates.
#[test]
fn every_declared_overload_evaluates() {
    let mut wrong = Vec::new();
    let named = NAMED_FORMATS.iter().map(|n| format!("format.{n}()"));
    let calls = OVERLOADS.iter().chain(LISTS).map(|o| {
        let args: Vec<_> = o.params.iter().map(|p| sample(o.function, p)).collect();
        if o.member {
            format!("{}.{}({})", args[0], o.function, args[1..].join(", "))
        } else {
            format!("{}({})", o.function, args.join(", "))
        }
    });
    for call in calls.chain(named) {
        if let Err(e) = crate::rules::evaluate_in_libraries(&call) {
            wrong.push(format!("{call}: {e}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
