//! JSON read as Go's `encoding/json` reads it, so that the gateway refuses a malformed body
//! with the texts etcd's gateway (Go) answers: its syntax errors (`invalid character 'x'
//! looking for beginning of value`, `unexpected EOF`, `unexpected end of JSON input`), its
//! type errors (`json: cannot unmarshal string into Go value of type int64`) and its base64
//! errors (`illegal base64 data at input byte 4`).
//!
//! Three parts: [`Scanner`], Go's byte-at-a-time syntax checker with its error contexts;
//! [`first_value`] and [`check_valid`], the two ways Go reads a document (a stream decoder's
//! first value, and `Unmarshal`'s whole input); and helpers that take a value already checked
//! apart (object members, array items, strings, numbers, base64) with Go's semantics.

use std::ops::Range;

/// Go's limit on nested objects and arrays.
const MAX_NESTING: usize = 10_000;

/// What a byte did to the scanner (the results Go's decoder acts on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Continue,
    SkipSpace,
    EndObject,
    EndArray,
    /// The top-level value ended before this byte.
    End,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Nest {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits read.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside the literal `word`, expecting `word[at]`.
    Literal {
        word: &'static str,
        at: usize,
    },
    Error,
}

/// Go's JSON scanner: fed one byte at a time, it says where values begin and end and stops at
/// the first byte that cannot be JSON, with Go's message for it.
#[derive(Debug)]
struct Scanner {
    state: State,
    nest: Vec<Nest>,
    end_top: bool,
    err: Option<String>,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// A byte as Go's syntax errors quote it: `'x'`, `'\x01'`, `'\u00ad'`, `'Ã'` (a byte above
/// 0x7f is read as the code point of that value).
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".into(),
        b'"' => "'\"'".into(),
        _ => format!("'{}'", go_escape_char(char::from(c))),
    }
}

/// Whether Go's `strconv` prints `c` as it is (its `IsPrint`, close enough for the characters
/// these messages can hold: controls, separators other than the space, and the soft hyphen are
/// escaped).
fn go_printable(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace() || c == '\u{ad}' || ('\u{2028}'..='\u{2029}').contains(&c))
}

/// `c` inside one of Go's `strconv.Quote` texts (without the quotes).
fn go_escape_char(c: char) -> String {
    match c {
        '\u{7}' => "\\a".into(),
        '\u{8}' => "\\b".into(),
        '\u{c}' => "\\f".into(),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        '\u{b}' => "\\v".into(),
        '\\' => "\\\\".into(),
        c if (c as u32) < 0x20 || c == '\u{7f}' => format!("\\x{:02x}", c as u32),
        c if go_printable(c) => c.to_string(),
        c if (c as u32) < 0x1_0000 => format!("\\u{:04x}", c as u32),
        c => format!("\\U{:08x}", c as u32),
    }
}

/// `s` as Go's `%q` writes it (bytes that are not UTF-8 as `\xNN`).
pub(crate) fn go_quote(s: &[u8]) -> String {
    let mut out = String::from("\"");
    let mut i = 0;
    while i < s.len() {
        match decode_rune(&s[i..]) {
            Some((c, n)) => {
                if c == '"' {
                    out.push_str("\\\"");
                } else {
                    out.push_str(&go_escape_char(c));
                }
                i += n;
            }
            None => {
                out.push_str(&format!("\\x{:02x}", s[i]));
                i += 1;
            }
        }
    }
    out.push('"');
    out
}

/// The UTF-8 character at the start of `s` and its length, if it is one.
fn decode_rune(s: &[u8]) -> Option<(char, usize)> {
    let n = match *s.first()? {
        0..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    let text = std::str::from_utf8(s.get(..n)?).ok()?;
    text.chars().next().map(|c| (c, n))
}

impl Scanner {
    fn new() -> Self {
        Self { state: State::BeginValue, nest: Vec::new(), end_top: false, err: None }
    }

    fn error(&mut self, c: u8, context: &str) -> Op {
        self.state = State::Error;
        self.err = Some(format!("invalid character {} {context}", quote_char(c)));
        Op::Error
    }

    fn push(&mut self, c: u8, nest: Nest, next: State) -> Op {
        self.nest.push(nest);
        self.state = next;
        if self.nest.len() <= MAX_NESTING {
            Op::Continue
        } else {
            self.error(c, "exceeded max depth")
        }
    }

    fn pop(&mut self) {
        self.nest.pop();
        if self.nest.is_empty() {
            self.state = State::EndTop;
            self.end_top = true;
        } else {
            self.state = State::EndValue;
        }
    }

    fn begin_value(&mut self, c: u8) -> Op {
        if is_space(c) {
            return Op::SkipSpace;
        }
        let literal = |word| State::Literal { word, at: 1 };
        self.state = match c {
            b'{' => return self.push(c, Nest::ObjectKey, State::BeginStringOrEmpty),
            b'[' => return self.push(c, Nest::ArrayValue, State::BeginValueOrEmpty),
            b'"' => State::InString,
            b'-' => State::Neg,
            b'0' => State::Zero,
            b'1'..=b'9' => State::One,
            b't' => literal("true"),
            b'f' => literal("false"),
            b'n' => literal("null"),
            _ => return self.error(c, "looking for beginning of value"),
        };
        Op::Continue
    }

    fn end_value(&mut self, c: u8) -> Op {
        let Some(&top) = self.nest.last() else {
            self.state = State::EndTop;
            self.end_top = true;
            return self.end_top(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Op::SkipSpace;
        }
        let n = self.nest.len() - 1;
        match (top, c) {
            (Nest::ObjectKey, b':') => {
                self.nest[n] = Nest::ObjectValue;
                self.state = State::BeginValue;
                Op::Continue
            }
            (Nest::ObjectKey, _) => self.error(c, "after object key"),
            (Nest::ObjectValue, b',') => {
                self.nest[n] = Nest::ObjectKey;
                self.state = State::BeginString;
                Op::Continue
            }
            (Nest::ObjectValue, b'}') => {
                self.pop();
                Op::EndObject
            }
            (Nest::ObjectValue, _) => self.error(c, "after object key:value pair"),
            (Nest::ArrayValue, b',') => {
                self.state = State::BeginValue;
                Op::Continue
            }
            (Nest::ArrayValue, b']') => {
                self.pop();
                Op::EndArray
            }
            (Nest::ArrayValue, _) => self.error(c, "after array element"),
        }
    }

    fn end_top(&mut self, c: u8) -> Op {
        if !is_space(c) && self.err.is_none() {
            // Go complains about it only if asked for more (`Unmarshal` does; a stream
            // decoder has its value and stops).
            self.err = Some(format!("invalid character {} after top-level value", quote_char(c)));
        }
        Op::End
    }

    /// Feeds one byte.
    fn step(&mut self, c: u8) -> Op {
        let digit = c.is_ascii_digit();
        match self.state {
            State::BeginValueOrEmpty if is_space(c) => Op::SkipSpace,
            State::BeginValueOrEmpty if c == b']' => self.end_value(c),
            State::BeginValueOrEmpty | State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty if is_space(c) => Op::SkipSpace,
            State::BeginStringOrEmpty if c == b'}' => {
                let n = self.nest.len() - 1;
                self.nest[n] = Nest::ObjectValue;
                self.end_value(c)
            }
            State::BeginStringOrEmpty | State::BeginString => {
                if is_space(c) {
                    Op::SkipSpace
                } else if c == b'"' {
                    self.state = State::InString;
                    Op::Continue
                } else {
                    self.error(c, "looking for beginning of object key string")
                }
            }
            State::EndValue => self.end_value(c),
            State::EndTop => self.end_top(c),
            State::InString => {
                match c {
                    b'"' => self.state = State::EndValue,
                    b'\\' => self.state = State::InStringEsc,
                    0..=0x1f => return self.error(c, "in string literal"),
                    _ => {}
                }
                Op::Continue
            }
            State::InStringEsc => {
                self.state = match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => State::InString,
                    b'u' => State::InStringEscU(0),
                    _ => return self.error(c, "in string escape code"),
                };
                Op::Continue
            }
            State::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return self.error(c, "in \\u hexadecimal character escape");
                }
                self.state = if n == 3 { State::InString } else { State::InStringEscU(n + 1) };
                Op::Continue
            }
            State::Neg => {
                self.state = match c {
                    b'0' => State::Zero,
                    b'1'..=b'9' => State::One,
                    _ => return self.error(c, "in numeric literal"),
                };
                Op::Continue
            }
            State::One if digit => Op::Continue,
            State::One | State::Zero => match c {
                b'.' => {
                    self.state = State::Dot;
                    Op::Continue
                }
                b'e' | b'E' => {
                    self.state = State::E;
                    Op::Continue
                }
                _ => self.end_value(c),
            },
            State::Dot if digit => {
                self.state = State::Dot0;
                Op::Continue
            }
            State::Dot => self.error(c, "after decimal point in numeric literal"),
            State::Dot0 if digit => Op::Continue,
            State::Dot0 if c == b'e' || c == b'E' => {
                self.state = State::E;
                Op::Continue
            }
            State::Dot0 => self.end_value(c),
            State::E if c == b'+' || c == b'-' => {
                self.state = State::ESign;
                Op::Continue
            }
            State::E | State::ESign if digit => {
                self.state = State::E0;
                Op::Continue
            }
            State::E | State::ESign => self.error(c, "in exponent of numeric literal"),
            State::E0 if digit => Op::Continue,
            State::E0 => self.end_value(c),
            State::Literal { word, at } => {
                let want = word.as_bytes()[at];
                if c != want {
                    return self.error(c, &format!("in literal {word} (expecting {})", quote_char(want)));
                }
                self.state = if at + 1 == word.len() { State::EndValue } else { State::Literal { word, at: at + 1 } };
                Op::Continue
            }
            State::Error => Op::Error,
        }
    }

    /// The end of the input, as `Unmarshal` treats it.
    fn eof(&mut self) -> Result<(), String> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        if self.end_top {
            return Ok(());
        }
        self.step(b' ');
        if self.end_top {
            return Ok(());
        }
        Err(self.err.clone().unwrap_or_else(|| "unexpected end of JSON input".into()))
    }
}

/// What a stream decoder finds at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum First {
    /// A complete value at this range (surrounding spaces left out).
    Value(Range<usize>),
    /// Nothing but spaces, and the input has ended (Go's `io.EOF`).
    Empty,
    /// The value is not complete yet; at the end of the input this is `unexpected EOF`.
    Incomplete,
    /// Not JSON: Go's message.
    Error(String),
}

/// The first JSON value of `buf` as Go's `json.Decoder` reads it (what follows the value is
/// not looked at); `at_end` says no more input will come.
pub(crate) fn first_value(buf: &[u8], at_end: bool) -> First {
    let mut s = Scanner::new();
    let mut start = None;
    for (i, &c) in buf.iter().enumerate() {
        let op = s.step(c);
        if start.is_none() && op != Op::SkipSpace {
            start = Some(i);
        }
        match op {
            Op::End => return First::Value(start.unwrap_or(i)..i),
            Op::EndObject | Op::EndArray if s.nest.is_empty() => return First::Value(start.unwrap_or(i)..i + 1),
            Op::Error => return First::Error(s.err.unwrap_or_default()),
            _ => {}
        }
    }
    match start {
        Some(start) if at_end && s.step(b' ') == Op::End => First::Value(start..buf.len()),
        Some(_) if at_end => First::Error("unexpected EOF".into()),
        None if at_end => First::Empty,
        _ => First::Incomplete,
    }
}

/// Checks that `data` is one JSON value, as Go's `Unmarshal` does before decoding it.
pub(crate) fn check_valid(data: &[u8]) -> Result<(), String> {
    let mut s = Scanner::new();
    for &c in data {
        if s.step(c) == Op::Error {
            return Err(s.err.unwrap_or_default());
        }
    }
    s.eof()
}

// ---- values already checked ----

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).copied().is_some_and(is_space) {
        i += 1;
    }
    i
}

/// The end of the string literal starting at `b[i]`.
fn string_end(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while let Some(&c) = b.get(j) {
        match c {
            b'"' => return j + 1,
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
    b.len()
}

/// The end of the (checked) value starting at `b[i]`.
fn value_end(b: &[u8], mut i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => string_end(b, i),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            while let Some(&c) = b.get(i) {
                match c {
                    b'"' => {
                        i = string_end(b, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            b.len()
        }
        _ => {
            while b.get(i).is_some_and(|&c| !matches!(c, b',' | b'}' | b']') && !is_space(c)) {
                i += 1;
            }
            i
        }
    }
}

/// The members of a checked object, in order, with their keys unquoted.
pub(crate) fn object_members(raw: &[u8]) -> Vec<(String, &[u8])> {
    let mut out = Vec::new();
    let mut i = skip_space(raw, 1);
    while raw.get(i) == Some(&b'"') {
        let key_end = string_end(raw, i);
        let key = unquote(&raw[i..key_end]);
        // Past the `:`.
        let v = skip_space(raw, skip_space(raw, key_end) + 1);
        let end = value_end(raw, v);
        out.push((key, &raw[v..end]));
        i = skip_space(raw, end);
        if raw.get(i) == Some(&b',') {
            i = skip_space(raw, i + 1);
        }
    }
    out
}

/// The items of a checked array.
pub(crate) fn array_items(raw: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = skip_space(raw, 1);
    while i < raw.len() && raw[i] != b']' {
        let end = value_end(raw, i);
        out.push(&raw[i..end]);
        i = skip_space(raw, end);
        if raw.get(i) == Some(&b',') {
            i = skip_space(raw, i + 1);
        }
    }
    out
}

fn hex4(s: &[u8]) -> Option<u32> {
    let digits = std::str::from_utf8(s.get(..4)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// A checked string literal's text, as Go decodes it: bytes that are not UTF-8 and lone
/// surrogates become U+FFFD.
pub(crate) fn unquote(raw: &[u8]) -> String {
    let s = raw.get(1..raw.len().saturating_sub(1)).unwrap_or_default();
    let mut out = String::with_capacity(s.len());
    let mut r = 0;
    while r < s.len() {
        if s[r] != b'\\' {
            match decode_rune(&s[r..]) {
                Some((c, n)) => {
                    out.push(c);
                    r += n;
                }
                None => {
                    out.push('\u{fffd}');
                    r += 1;
                }
            }
            continue;
        }
        let Some(&e) = s.get(r + 1) else { break };
        r += 2;
        let c = match e {
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(s.get(r..).unwrap_or_default()).unwrap_or(0xfffd);
                r += 4;
                if (0xd800..0xe000).contains(&hi) {
                    let lo = s.get(r..).and_then(|t| t.strip_prefix(b"\\u")).and_then(hex4);
                    match lo {
                        Some(lo) if (0xd800..0xdc00).contains(&hi) && (0xdc00..0xe000).contains(&lo) => {
                            r += 6;
                            char::from_u32(0x1_0000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)).unwrap_or('\u{fffd}')
                        }
                        _ => '\u{fffd}',
                    }
                } else {
                    char::from_u32(hi).unwrap_or('\u{fffd}')
                }
            }
            other => char::from(other),
        };
        out.push(c);
    }
    out
}

/// What a checked value is, in the words of Go's type errors (`null` gets none).
pub(crate) fn kind(raw: &[u8]) -> &'static str {
    match raw.first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// Go's type error for a value of `kind` decoded into `go_type`.
pub(crate) fn type_error(kind: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {kind} into Go value of type {go_type}")
}

/// Base64 in the standard alphabet with padding, as Go's `base64.StdEncoding` decodes it:
/// line breaks are skipped, and an error names the offset Go names.
pub(crate) fn base64_decode(src: &[u8]) -> Result<Vec<u8>, String> {
    fn sextet(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let corrupt = |at: usize| format!("illegal base64 data at input byte {at}");
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    while si < src.len() {
        // One quantum of up to four characters.
        let mut buf = [0u8; 4];
        let mut len = 4;
        let mut j = 0;
        let mut trailing = None;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                return Err(corrupt(si - j));
            }
            let c = src[si];
            si += 1;
            if let Some(v) = sextet(c) {
                buf[j] = v;
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' || j < 2 {
                return Err(corrupt(si - 1));
            }
            // Padding: `==` after two characters, `=` after three, then only line breaks.
            if j == 2 {
                while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                    si += 1;
                }
                if si == src.len() {
                    return Err(corrupt(src.len()));
                }
                if src[si] != b'=' {
                    return Err(corrupt(si - 1));
                }
                si += 1;
            }
            while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                si += 1;
            }
            if si < src.len() {
                trailing = Some(si);
            }
            len = j;
            break;
        }
        let v = (u32::from(buf[0]) << 18) | (u32::from(buf[1]) << 12) | (u32::from(buf[2]) << 6) | u32::from(buf[3]);
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..len - 1]);
        if let Some(at) = trailing {
            return Err(corrupt(at));
        }
        if len < 4 {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(s: &str) -> First {
        first_value(s.as_bytes(), true)
    }

    #[test]
    fn syntax_errors_read_as_gos() {
        let err = |s: &str| match first(s) {
            First::Error(e) => e,
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(err("notjson"), "invalid character 'o' in literal null (expecting 'u')");
        assert_eq!(err("x"), "invalid character 'x' looking for beginning of value");
        assert_eq!(err("{"), "unexpected EOF");
        assert_eq!(err("-"), "unexpected EOF");
        assert_eq!(err(r#"{"key":"Zm9v",}"#), "invalid character '}' looking for beginning of object key string");
        assert_eq!(err("{'key':1}"), "invalid character '\\'' looking for beginning of object key string");
        assert_eq!(err(r#"{"a":1 "b"}"#), "invalid character '\"' after object key:value pair");
        assert_eq!(err(r#"{"a":"\u12g4"}"#), "invalid character 'g' in \\u hexadecimal character escape");
        assert_eq!(err("\u{1}"), "invalid character '\\x01' looking for beginning of value");
        assert_eq!(err("é"), "invalid character 'Ã' looking for beginning of value");
        assert_eq!(err("\\"), "invalid character '\\\\' looking for beginning of value");
        assert_eq!(err("[1 2]"), "invalid character '2' after array element");
        assert_eq!(err(r#"{"a":1.}"#), "invalid character '}' after decimal point in numeric literal");
    }

    #[test]
    fn the_first_value_is_read_and_the_rest_is_not() {
        assert_eq!(first(r#" {"a":1} x"#), First::Value(1..8));
        assert_eq!(first("1x"), First::Value(0..1));
        assert_eq!(first(" 12 "), First::Value(1..3));
        assert_eq!(first("12"), First::Value(0..2));
        assert_eq!(first("  "), First::Empty);
        assert_eq!(first_value(b"{\"a\"", false), First::Incomplete);
        assert_eq!(first_value(b"12", false), First::Incomplete, "a number may go on");
    }

    #[test]
    fn unmarshal_checks_the_whole_input() {
        assert_eq!(check_valid(b""), Err("unexpected end of JSON input".into()));
        assert_eq!(check_valid(b"-"), Err("invalid character ' ' in numeric literal".into()));
        assert_eq!(check_valid(b"0x10"), Err("invalid character 'x' after top-level value".into()));
        assert_eq!(check_valid(b" 1"), Ok(()));
    }

    #[test]
    fn checked_values_come_apart() {
        let raw = br#"{ "k\u0065y" : [1, "a,]", {"x":[]}] , "b":null}"#;
        let m = object_members(raw);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].0, "key");
        assert_eq!(array_items(m[0].1), vec![&b"1"[..], b"\"a,]\"", br#"{"x":[]}"#]);
        assert_eq!(m[1], ("b".to_string(), &b"null"[..]));
        assert_eq!(unquote(b"\"\\ud83d\\ude00\\ud800x\xff\""), "😀\u{fffd}x\u{fffd}");
        assert_eq!(go_quote(b"NO\"PE\\u0031"), "\"NO\\\"PE\\\\u0031\"");
    }

    #[test]
    fn base64_errors_name_gos_offsets() {
        let err = |s: &str| base64_decode(s.as_bytes()).expect_err(s);
        assert_eq!(base64_decode(b"Zm9v\n"), Ok(b"foo".to_vec()));
        assert_eq!(base64_decode(b"Zg=\n="), Ok(b"f".to_vec()));
        assert_eq!(base64_decode(b"Zh=="), Ok(b"f".to_vec()), "Go ignores the unused bits");
        assert_eq!(err("Zm9"), "illegal base64 data at input byte 0");
        assert_eq!(err("Zm9v="), "illegal base64 data at input byte 4");
        assert_eq!(err("Zm-_"), "illegal base64 data at input byte 2");
        assert_eq!(err("Zg="), "illegal base64 data at input byte 3");
        assert_eq!(err("Zg==Zg=="), "illegal base64 data at input byte 4");
        assert_eq!(err("Zm9vZm9vZm9v!"), "illegal base64 data at input byte 12");
    }
}
