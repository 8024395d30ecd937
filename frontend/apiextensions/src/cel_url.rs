//! Kubernetes' CEL URL library for `x-kubernetes-validations` rules: `url(s)`, `isURL(s)`,
//! and on a URL `getScheme()`, `getHost()`, `getHostname()`, `getPort()`,
//! `getEscapedPath()`, `getQuery()`; two URLs are `==` when they print the same.
//!
//! URLs are read as kube reads them, with Go's `net/url`: `url()` and `isURL()` take what
//! `url.ParseRequestURI` takes (an absolute URI or an absolute path, `#` being no fragment
//! mark there), and the parts come from `url.Parse` of the same text. A refusal is Go's,
//! after kube's words: `URL parse error during conversion from string: parse
//! "https://a:b:c/": invalid port ":c" after host`. The functions are overloads on the
//! environment, declared as kube declares them.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::{Key, Opaque};
use cel::{ExecutionError, Value};

use crate::cel_ip::{go_quote, string_arg};
use crate::cel_overload::{owned, values};

/// The part of a URL an escape is in (Go's `encoding` modes that parsing uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// Go's `shouldEscape`: whether byte `c` is escaped when written in `part`.
fn should_escape(c: u8, part: Part) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(part, Part::Host | Part::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match part {
            Part::Path => c == b'?',
            Part::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
            Part::QueryComponent => true,
            Part::Fragment => false,
            Part::Host | Part::Zone => true,
        },
        b'!' | b'(' | b')' | b'*' if part == Part::Fragment => false,
        _ => true,
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Go's `unescape`: `%XX` decoded (and `+` as a space in a query component), with Go's errors.
fn unescape(s: &str, part: Part) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let pair = bytes.get(i + 1).and_then(|&h| hex(h)).zip(bytes.get(i + 2).and_then(|&l| hex(l)));
                let Some((high, low)) = pair else {
                    let bad = &s[i..s.len().min(i + 3)];
                    return Err(format!("invalid URL escape {}", go_quote(bad)));
                };
                let escape = &s[i..i + 3];
                // A host escapes only non-ASCII bytes, and `%25` introducing a zone.
                if part == Part::Host && high < 8 && escape != "%25" {
                    return Err(format!("invalid URL escape {}", go_quote(escape)));
                }
                let v = high << 4 | low;
                if part == Part::Zone && escape != "%25" && v != b' ' && should_escape(v, Part::Host) {
                    return Err(format!("invalid URL escape {}", go_quote(escape)));
                }
                out.push(v);
                i += 3;
            }
            b'+' if part == Part::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                if matches!(part, Part::Host | Part::Zone) && c < 0x80 && should_escape(c, part) {
                    return Err(format!("invalid character {} in host name", go_quote(&s[i..i + 1])));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    // Go's strings hold any bytes; a decoded escape that is not UTF-8 is kept as U+FFFD here.
    Ok(String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Go's `escape`.
fn escape(s: &str, part: Part) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c == b' ' && part == Part::QueryComponent {
            out.push('+');
        } else if should_escape(c, part) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(c as char);
        }
    }
    // Only ASCII was pushed unescaped byte by byte above; multi-byte characters were escaped.
    out
}

/// Go's `validEncoded` for a path.
fn valid_encoded_path(s: &str) -> bool {
    s.bytes().all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Part::Path))
}

/// Go's `validOptionalPort`: empty or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty() || port.strip_prefix(':').is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
}

/// The parts of a URL kube's functions read (Go's `url.URL` fields).
#[derive(Debug, Clone, Default)]
struct Url {
    scheme: String,
    opaque: String,
    user: Option<String>,
    host: String,
    path: String,
    raw_path: String,
    force_query: bool,
    raw_query: String,
    fragment: String,
}

impl PartialEq for Url {
    fn eq(&self, other: &Url) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Url {}

const URL_TYPE_NAME: &str = "kubernetes.URL";

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        URL_TYPE_NAME
    }
}

/// Go's `getScheme`: a leading `[a-zA-Z][a-zA-Z0-9+.-]*:` split off, if there is one.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `parseHost`: `host[:port]` or `[literal][:port]`, unescaped.
fn parse_host(host: &str) -> Result<String, String> {
    let invalid_port = |port: &str| format!("invalid port {} after host", go_quote(port));
    match host.rfind('[') {
        // A bracket inside the host name.
        Some(open) if open > 0 => return Err("invalid IP-literal".into()),
        Some(_) => {
            let end = host.rfind(']').ok_or("missing ']' in host")?;
            let port = &host[end + 1..];
            if !valid_optional_port(port) {
                return Err(invalid_port(port));
            }
            let port = unescape(port, Part::Host)?;
            let hostname = &host[1..end];
            let hostname = match hostname.find("%25") {
                Some(zone) => unescape(&hostname[..zone], Part::Host)? + &unescape(&hostname[zone..], Part::Zone)?,
                None => unescape(hostname, Part::Host)?,
            };
            // Only an IPv6 address (an IPv4-mapped one too, not an IPv4 one) may be bracketed.
            let (addr, _) = crate::cel_ip::parse_go_addr(&hostname).map_err(|e| format!("invalid host: {e}"))?;
            if addr.is_ipv4() {
                return Err("invalid IP-literal".into());
            }
            return Ok(format!("[{hostname}]{port}"));
        }
        None => {}
    }
    if let Some(colon) = host.rfind(':') {
        let port = &host[colon..];
        if !valid_optional_port(port) {
            return Err(invalid_port(port));
        }
    }
    unescape(host, Part::Host)
}

/// Go's `parseAuthority`: `[userinfo@]host`.
fn parse_authority(authority: &str) -> Result<(Option<String>, String), String> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let host = parse_host(host)?;
    let Some(userinfo) = userinfo else { return Ok((None, host)) };
    let valid = userinfo.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
    if !valid {
        return Err("net/url: invalid userinfo".into());
    }
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    unescape(user, Part::UserPassword)?;
    unescape(password, Part::UserPassword)?;
    Ok((Some(userinfo.to_string()), host))
}

impl Url {
    /// Go's `parse`: `via_request` for `ParseRequestURI`'s rules (no relative paths, `#` taken
    /// as text).
    fn parse_go(raw: &str, via_request: bool) -> Result<Url, String> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        if raw.is_empty() && via_request {
            return Err("empty url".into());
        }
        let mut url = Url::default();
        if raw == "*" {
            url.path = "*".into();
            return Ok(url);
        }
        let (scheme, mut rest) = split_scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        if rest.ends_with('?') && rest.matches('?').count() == 1 {
            url.force_query = true;
            rest = &rest[..rest.len() - 1];
        } else if let Some((before, query)) = rest.split_once('?') {
            url.raw_query = query.to_string();
            rest = before;
        }
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                // A rootless path after a scheme is opaque (`mailto:a@b`).
                url.opaque = rest.to_string();
                return Ok(url);
            }
            if via_request {
                return Err("invalid URI for request".into());
            }
            if rest.split('/').next().is_some_and(|segment| segment.contains(':')) {
                return Err("first path segment in URL cannot contain colon".into());
            }
        }
        if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///")) && rest.starts_with("//") {
            let authority = &rest[2..];
            let (authority, path) = match authority.find('/') {
                Some(slash) => authority.split_at(slash),
                None => (authority, ""),
            };
            (url.user, url.host) = parse_authority(authority)?;
            rest = path;
        }
        url.path = unescape(rest, Part::Path)?;
        if escape(&url.path, Part::Path) != rest {
            url.raw_path = rest.to_string();
        }
        Ok(url)
    }

    /// Go's `url.Parse`: the fragment cut off first.
    fn parse_with_fragment(raw: &str) -> Result<Url, String> {
        let (before, fragment) = raw.split_once('#').unwrap_or((raw, ""));
        let mut url = Url::parse_go(before, false).map_err(|e| format!("parse {}: {e}", go_quote(before)))?;
        url.fragment = unescape(fragment, Part::Fragment).map_err(|e| format!("parse {}: {e}", go_quote(raw)))?;
        Ok(url)
    }

    /// A URL as kube's `url()` takes it: what `ParseRequestURI` accepts, read by `Parse`.
    fn parse(raw: &str) -> Result<Url, String> {
        let context = "URL parse error during conversion from string";
        Url::parse_go(raw, true).map_err(|e| format!("{context}: parse {}: {e}", go_quote(raw)))?;
        Url::parse_with_fragment(raw).map_err(|e| format!("{context}: {e}"))
    }

    /// Go's `EscapedPath`.
    fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded_path(&self.raw_path)
            && unescape(&self.raw_path, Part::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == "*" {
            return "*".into();
        }
        escape(&self.path, Part::Path)
    }

    /// Go's `splitHostPort` of the host: the name (without brackets) and the port.
    fn host_port(&self) -> (&str, &str) {
        let (mut host, mut port) = (self.host.as_str(), "");
        if let Some(colon) = host.rfind(':') {
            if valid_optional_port(&host[colon..]) {
                (host, port) = (&self.host[..colon], &self.host[colon + 1..]);
            }
        }
        if host.len() >= 2 && host.starts_with('[') && host.ends_with(']') {
            host = &host[1..host.len() - 1];
        }
        (host, port)
    }

    /// Go's `Query`: `key=value` pairs split on `&`, unescaped; malformed pairs are dropped.
    fn query(&self) -> HashMap<String, Vec<String>> {
        let mut values: HashMap<String, Vec<String>> = HashMap::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Ok(key), Ok(value)) = (unescape(key, Part::QueryComponent), unescape(value, Part::QueryComponent)) {
                values.entry(key).or_default().push(value);
            }
        }
        values
    }
}

/// Go's `URL.String`, by which URLs compare.
impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.scheme.is_empty() {
            write!(f, "{}:", self.scheme)?;
        }
        if !self.opaque.is_empty() {
            f.write_str(&self.opaque)?;
        } else {
            let path = self.escaped_path();
            let mut wrote = !self.scheme.is_empty();
            if !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some() {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    f.write_str("//")?;
                }
                if let Some(user) = &self.user {
                    write!(f, "{user}@")?;
                }
                f.write_str(&escape(&self.host, Part::Host))?;
                wrote = true;
            }
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                f.write_str("/")?;
            }
            if !wrote && path.split('/').next().is_some_and(|segment| segment.contains(':')) {
                f.write_str("./")?;
            }
            f.write_str(&path)?;
        }
        if self.force_query || !self.raw_query.is_empty() {
            write!(f, "?{}", self.raw_query)?;
        }
        if !self.fragment.is_empty() {
            write!(f, "#{}", escape(&self.fragment, Part::Fragment))?;
        }
        Ok(())
    }
}

/// Go's `url.ParseRequestURI` error for `raw` (`parse "x": invalid URI for request`), if it
/// refuses it: the format library's `uri`.
pub(crate) fn request_uri_error(raw: &str) -> Option<String> {
    Url::parse_go(raw, true).err().map(|e| format!("parse {}: {e}", go_quote(raw)))
}

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn url_arg(function: &str, v: &Value) -> Result<Url, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Url>().cloned().ok_or_else(|| error(function, "no such overload")),
        _ => Err(error(function, "no such overload")),
    }
}

fn string_to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values("url", args)?;
    let url = Url::parse(&string_arg("url", &s)?).map_err(|e| error("url", e))?;
    owned(Value::Opaque(Arc::new(url)))
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values("isURL", args)?;
    owned(Value::Bool(Url::parse_go(&string_arg("isURL", &s)?, true).is_ok()))
}

/// One string part of a URL, as an overload.
macro_rules! part {
    ($fn_name:ident, $cel_name:literal, $part:expr) => {
        fn $fn_name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let [url] = values($cel_name, args)?;
            let part: fn(&Url) -> String = $part;
            owned(Value::String(part(&url_arg($cel_name, &url)?).into()))
        }
    };
}

part!(get_scheme, "getScheme", |u| u.scheme.clone());
part!(get_host, "getHost", |u| u.host.clone());
part!(get_hostname, "getHostname", |u| u.host_port().0.to_string());
part!(get_port, "getPort", |u| u.host_port().1.to_string());
part!(get_escaped_path, "getEscapedPath", Url::escaped_path);

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [url] = values("getQuery", args)?;
    let query: HashMap<Key, Value> = url_arg("getQuery", &url)?
        .query()
        .into_iter()
        .map(|(k, v)| (Key::from(k), Value::List(Arc::new(v.into_iter().map(|s| Value::String(s.into())).collect()))))
        .collect();
    owned(Value::from(query))
}

/// Declares the library's type and overloads on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let url = || Type::new_opaque_type(URL_TYPE_NAME);
    env.add_type(url())?;
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], string_to_url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    let parts: [(&str, &str, cel::common::functions::Function); 6] = [
        ("getScheme", "url_get_scheme", get_scheme),
        ("getHost", "url_get_host", get_host),
        ("getHostname", "url_get_hostname", get_hostname),
        ("getPort", "url_get_port", get_port),
        ("getEscapedPath", "url_get_escaped_path", get_escaped_path),
        ("getQuery", "url_get_query", get_query),
    ];
    for (name, id, f) in parts {
        env.add_member_overload(name, id, url(), vec![], f)?;
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
        t("isURL('https://user:pass@example.com:80/path?query=val#fragment') && isURL('/absolute-path')");
        t("!isURL('https://a:b:c/') && !isURL('../relative-path') && !isURL('')");
        t("url('/path').getScheme() == '' && url('https://example.com/').getScheme() == 'https'");
        t("url('HTTPS://example.com/').getScheme() == 'https'");
        t("url('https://example.com:80/').getHost() == 'example.com:80'");
        t("url('https://example.com/').getHost() == 'example.com'");
        t("url('https://[::1]:80/').getHost() == '[::1]:80' && url('https://[::1]/').getHost() == '[::1]'");
        t("url('/path').getHost() == ''");
        t("url('https://example.com:80/').getHostname() == 'example.com'");
        t("url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'");
        t("url('https://[::1]:80/').getHostname() == '::1' && url('/path').getHostname() == ''");
        t("url('https://example.com:80/').getPort() == '80' && url('https://example.com/').getPort() == ''");
        t("url('/path').getPort() == ''");
        t("url('https://example.com/path').getEscapedPath() == '/path'");
        t("url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'");
        t("url('https://example.com').getEscapedPath() == ''");
        t("url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'");
        t("url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}");
        t("url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}");
        t("url('https://example.com/path?').getQuery() == {} && url('https://example.com/path').getQuery() == {}");
        t("url('https://example.com/p?a=1#frag').getQuery() == {'a': ['1']}");
        t("url('https://example.com/a') == url('https://example.com/a') && url('https://example.com/a') != url('https://example.com/b')");
        t("url('mailto:someone@example.com').getHost() == ''");
        t("type(url('/a')) == kubernetes.URL");
    }

    #[test]
    fn refusals_read_as_kube_and_go_word_them() {
        let err = |expr: &str| eval(expr).expect_err(expr);
        assert_eq!(
            err("url('https://a:b:c/')"),
            "URL parse error during conversion from string: parse \"https://a:b:c/\": invalid port \":c\" after host"
        );
        assert_eq!(
            err("url('../relative-path')"),
            "URL parse error during conversion from string: parse \"../relative-path\": invalid URI for request"
        );
        assert!(err("url('')").ends_with("parse \"\": empty url"));
        assert!(err("url(':x')").ends_with("missing protocol scheme"));
        assert!(err("url('https://[::1/')").ends_with("missing ']' in host"));
        // Brackets hold an IPv6 address and nothing else (Go since its fix of CVE-2025-47912).
        assert_eq!(
            err("url('https://[foo]/')"),
            "URL parse error during conversion from string: parse \"https://[foo]/\": invalid host: ParseAddr(\"foo\"): unable to parse IP"
        );
        assert!(err("url('https://[1.2.3.4]:80/')").ends_with("parse \"https://[1.2.3.4]:80/\": invalid IP-literal"));
        assert!(err("url('https://a[::1]/')").ends_with("invalid IP-literal"));
        assert!(err("url('https://[v1.x]/')")
            .ends_with("invalid host: ParseAddr(\"v1.x\"): unexpected character (at \"v1.x\")"));
        assert!(err("url('https://[2001:db8:::1]/')").ends_with(
            "invalid host: ParseAddr(\"2001:db8:::1\"): each colon-separated field must have at least one digit (at \":1\")"
        ));
        assert_eq!(eval("url('https://[::ffff:1.2.3.4]:8/').getHostname() == '::ffff:1.2.3.4'"), Ok(Value::Bool(true)));
        assert_eq!(eval("url('https://[fe80::1%25en0]/').getHost() == '[fe80::1%en0]'"), Ok(Value::Bool(true)));
        assert!(err("url('https://ex ample.com/')").ends_with("invalid character \" \" in host name"));
        assert!(err("url('/a%zz')").ends_with("invalid URL escape \"%zz\""));
        assert!(err("url('https://example.com/\\x01')").ends_with("net/url: invalid control character in URL"));
        assert!(err("url('https://a b@example.com/')").ends_with("net/url: invalid userinfo"));
        // A fragment is text to the request-URI check, so its bad escape is caught by the second
        // parse, which names the whole URL.
        assert_eq!(
            err("url('/a#%zz')"),
            "URL parse error during conversion from string: parse \"/a#%zz\": invalid URL escape \"%zz\""
        );
    }
}
