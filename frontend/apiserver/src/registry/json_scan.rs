//! A forward-only cursor over JSON text that finds structure (member names, where each value
//! starts and ends) without building values. LIST's fast path ([`super::raw_object`]) uses it
//! to find an object's `metadata` in stored bytes that it then copies unread.
//!
//! What it checks and what it does not: strings are delimited escape-aware, but their escapes
//! and UTF-8 are only checked when a member name is decoded; containers are matched bracket for
//! bracket, but the commas and colons inside skipped values are not checked; scalars must be a
//! literal or start like a number. Its input is what a JSON encoder wrote (stored objects, from
//! this frontend or kube-apiserver). Whatever it cannot place makes it return `None`, and the
//! caller takes the decoding path, which says what is wrong.
//!
//! Strings are skipped with `memchr2` on `"` and `\`, which is where a scan spends its time on
//! Kubernetes objects (mostly short strings); the bytes between strings go one at a time.

// #[PerformanceCriticalPath]

use std::borrow::Cow;

/// The deepest nesting [`Cursor::skip_value`] follows: its bracket stack is one `u64` (one bit
/// per level). Stored objects nest a dozen levels at most; deeper input takes the decoding path
/// (serde_json's own limit is 128).
const MAX_DEPTH: u32 = 64;

/// A position in JSON text. Every method skips the whitespace before what it reads.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// A JSON string as written, quotes included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawStr<'a> {
    quoted: &'a [u8],
    /// Whether a backslash occurs inside (the text then differs from the value).
    escaped: bool,
}

impl<'a> RawStr<'a> {
    /// Returns the string's value: borrowed when it has no escapes, decoded otherwise; `None`
    /// when it is not valid UTF-8 or has a bad escape.
    pub fn decode(&self) -> Option<Cow<'a, str>> {
        if self.escaped {
            serde_json::from_slice::<String>(self.quoted).ok().map(Cow::Owned)
        } else {
            std::str::from_utf8(&self.quoted[1..self.quoted.len() - 1]).ok().map(Cow::Borrowed)
        }
    }

    /// Returns the string's value as written when it has no escapes (it is then the same).
    pub fn plain(&self) -> Option<&'a [u8]> {
        (!self.escaped).then(|| &self.quoted[1..self.quoted.len() - 1])
    }

    /// Returns whether the string's value is `s` (escaped text is decoded first, so
    /// `"metadat\u0061"` is `metadata`).
    pub fn is(&self, s: &str) -> bool {
        if self.escaped {
            self.decode().is_some_and(|v| v == s)
        } else {
            &self.quoted[1..self.quoted.len() - 1] == s.as_bytes()
        }
    }
}

impl<'a> Cursor<'a> {
    /// Starts at the beginning of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// Returns the offset of the next unread byte.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Returns the bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    fn skip_ws(&mut self) {
        while self.bytes.get(self.pos).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Skips whitespace and returns the next byte without reading it (`None` at the end).
    pub fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.pos).copied()
    }

    /// Skips whitespace and reads `byte` if it comes next.
    pub fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Reads a string.
    pub fn string(&mut self) -> Option<RawStr<'a>> {
        if self.peek()? != b'"' {
            return None;
        }
        self.string_here()
    }

    /// Reads the string whose opening quote is the next byte.
    fn string_here(&mut self) -> Option<RawStr<'a>> {
        let start = self.pos;
        let mut at = start + 1;
        let mut escaped = false;
        loop {
            at = find_quote_or_backslash(self.bytes, at)?;
            if self.bytes[at] == b'"' {
                break;
            }
            // A backslash and the byte it escapes; `\uXXXX`'s digits are ordinary bytes.
            escaped = true;
            at += 2;
        }
        self.pos = at + 1;
        Some(RawStr { quoted: &self.bytes[start..self.pos], escaped })
    }

    /// Reads a member name and the colon after it.
    pub fn member_name(&mut self) -> Option<RawStr<'a>> {
        let name = self.string()?;
        self.eat(b':').then_some(name)
    }

    /// Reads what follows a member's value: `Some(true)` after a comma (another member
    /// follows), `Some(false)` after the closing brace, `None` otherwise.
    pub fn after_member(&mut self) -> Option<bool> {
        if self.eat(b',') {
            Some(true)
        } else if self.eat(b'}') {
            Some(false)
        } else {
            None
        }
    }

    /// Skips one value of any type, returning the bytes it spans.
    pub fn skip_value(&mut self) -> Option<&'a [u8]> {
        let start = match self.peek()? {
            b'"' => {
                let start = self.pos;
                self.string_here()?;
                start
            }
            b'{' | b'[' => {
                let start = self.pos;
                self.skip_container()?;
                start
            }
            _ => self.skip_scalar()?,
        };
        Some(&self.bytes[start..self.pos])
    }

    /// Skips a number or a literal; returns where it started.
    fn skip_scalar(&mut self) -> Option<usize> {
        let start = self.pos;
        while self.bytes.get(self.pos).is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')) {
            self.pos += 1;
        }
        let scalar = &self.bytes[start..self.pos];
        let plausible = matches!(scalar, b"true" | b"false" | b"null")
            || scalar.first().is_some_and(|b| *b == b'-' || b.is_ascii_digit());
        plausible.then_some(start)
    }

    /// Skips the object or array whose opening bracket is the next byte.
    fn skip_container(&mut self) -> Option<()> {
        // One bit per open level, 1 for an object: closing brackets must match.
        let (mut stack, mut depth) = (0u64, 0u32);
        loop {
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.string_here()?;
                    continue;
                }
                open @ (b'{' | b'[') => {
                    if depth == MAX_DEPTH {
                        return None;
                    }
                    stack = (stack << 1) | u64::from(open == b'{');
                    depth += 1;
                }
                close @ (b'}' | b']') => {
                    if depth == 0 || (stack & 1 == 1) != (close == b'}') {
                        return None;
                    }
                    stack >>= 1;
                    depth -= 1;
                    if depth == 0 {
                        self.pos += 1;
                        return Some(());
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
    }
}

/// How many bytes [`find_quote_or_backslash`] looks at one by one before it hands over to
/// `memchr2`: most strings in Kubernetes metadata are shorter, and for them a plain loop costs
/// less than setting up the vector search.
const SHORT_STRING: usize = 32;

/// Returns the offset of the first `"` or `\` at or after `from`.
fn find_quote_or_backslash(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let short = rest.len().min(SHORT_STRING);
    match rest[..short].iter().position(|b| matches!(b, b'"' | b'\\')) {
        Some(i) => Some(from + i),
        None => memchr::memchr2(b'"', b'\\', &rest[short..]).map(|i| from + short + i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(text: &str) -> Option<(&str, &str)> {
        let mut c = Cursor::new(text.as_bytes());
        let value = c.skip_value()?;
        Some((std::str::from_utf8(value).expect("utf-8"), std::str::from_utf8(c.rest()).expect("utf-8")))
    }

    #[test]
    fn values_of_every_type_are_skipped_whole() {
        assert_eq!(skipped(r#" "a\"b\\" ,x"#), Some((r#""a\"b\\""#, " ,x")));
        assert_eq!(
            skipped(r#"{"a":[1,{"b":"]}"}],"c":null} rest"#),
            Some((r#"{"a":[1,{"b":"]}"}],"c":null}"#, " rest"))
        );
        assert_eq!(skipped("[[],{}]]"), Some(("[[],{}]", "]")));
        assert_eq!(skipped("-1.5e+3,"), Some(("-1.5e+3", ",")));
        assert_eq!(skipped("true}"), Some(("true", "}")));
        assert_eq!(skipped("null"), Some(("null", "")));
    }

    #[test]
    fn malformed_values_are_refused() {
        for text in [r#""open"#, r#""trailing backslash\"#, "{", "[}", "{]", "[1,2", "nope", "", "}", r#"{"a":"}"#] {
            assert_eq!(skipped(text), None, "{text}");
        }
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(skipped(&deep), None);
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(skipped(&ok).is_some());
    }

    #[test]
    fn strings_of_any_length_end_at_their_quote() {
        for len in [0, 1, 31, 32, 33, 64, 100] {
            for escape_at in [None, Some(0), Some(len / 2), Some(40)] {
                let mut text = "a".repeat(len);
                if let Some(at) = escape_at.filter(|at| *at <= len) {
                    text.insert_str(at, "\\\"");
                }
                let quoted = format!("\"{text}\",");
                let mut c = Cursor::new(quoted.as_bytes());
                let s = c.string().expect("string");
                assert_eq!(s.quoted, &quoted.as_bytes()[..quoted.len() - 1], "{quoted}");
                assert_eq!(c.rest(), b",");
            }
        }
    }

    #[test]
    fn member_names_compare_by_value() {
        let mut c = Cursor::new(br#"{ "metadat\u0061" : 1, "plain":2}"#);
        assert!(c.eat(b'{'));
        let name = c.member_name().expect("name");
        assert!(name.is("metadata") && !name.is("metadat\\u0061"));
        assert_eq!(name.decode().as_deref(), Some("metadata"));
        c.skip_value().expect("value");
        assert_eq!(c.after_member(), Some(true));
        let name = c.member_name().expect("name");
        assert!(name.is("plain"));
        assert!(matches!(name.decode(), Some(Cow::Borrowed("plain"))));
        c.skip_value().expect("value");
        assert_eq!(c.after_member(), Some(false));
        assert_eq!(c.peek(), None);
        // A bad escape never equals anything.
        let mut c = Cursor::new(br#""\x""#);
        assert!(!c.string().expect("delimited").is("x"));
    }
}
