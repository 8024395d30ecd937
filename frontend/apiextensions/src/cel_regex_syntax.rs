//! Regular expressions as kube's CEL functions read them: Go's RE2 syntax, compiled with the
//! `regex` crate, and refused with Go's words (`error parsing regexp: missing closing ):
//! `(a``).
//!
//! The two syntaxes nearly agree; where they differ the pattern is rewritten before the `regex`
//! crate sees it, so that it matches what Go matches:
//! - `\d`, `\w`, `\s`, `\b` and their negations are ASCII in Go, Unicode-aware in the crate;
//! - a `{` that does not start a repetition (`a{`, `{,3}`) is a literal in Go;
//! - inside a class, `[`, `&&`, `--` and `~~` are literals in Go, set operators in the crate;
//! - `\Q...\E` quotes a literal in Go;
//! - a repetition of a repetition (`a**`) is an error in Go, a nested repetition in the crate.
//!
//! Inside a class Go's `\S` is the crate's ASCII non-space, which leaves out the vertical tab
//! Go's includes; nothing else is known to differ.

use regex_syntax::ast::ErrorKind as AstKind;
use regex_syntax::hir::ErrorKind as HirKind;

/// Go's error codes (`regexp/syntax.ErrorCode`), as printed.
const INVALID_CHAR_RANGE: &str = "invalid character class range";
const INVALID_ESCAPE: &str = "invalid escape sequence";
const INVALID_NAMED_CAPTURE: &str = "invalid named capture";
const INVALID_PERL_OP: &str = "invalid or unsupported Perl syntax";
const INVALID_REPEAT_OP: &str = "invalid nested repetition operator";
const INVALID_REPEAT_SIZE: &str = "invalid repeat count";
const INVALID_UTF8: &str = "invalid UTF-8";
const MISSING_BRACKET: &str = "missing closing ]";
const MISSING_PAREN: &str = "missing closing )";
const MISSING_REPEAT_ARGUMENT: &str = "missing argument to repetition operator";
const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
const UNEXPECTED_PAREN: &str = "unexpected )";
const NESTING_DEPTH: &str = "expression nests too deeply";
const LARGE: &str = "expression too large";

/// Go's largest count in one repetition (`x{1001}` is refused).
const MAX_REPEAT: u32 = 1000;

/// A pattern Go refuses: its error code and the offending part of the pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    code: &'static str,
    expr: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error parsing regexp: {}: `{}`", self.code, self.expr)
    }
}

fn error(code: &'static str, expr: &str) -> SyntaxError {
    SyntaxError { code, expr: expr.to_string() }
}

/// Compiles a Go regular expression.
///
/// # Errors
///
/// Go's error for a pattern Go refuses.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, SyntaxError> {
    let translated = translate(pattern)?;
    if let Err(e) = regex_syntax::Parser::new().parse(&translated) {
        return Err(from_crate(&e, pattern, &translated));
    }
    // The crate's size limit is the only failure left after a parse that succeeded.
    regex::Regex::new(&translated).map_err(|_| error(LARGE, pattern))
}

/// Go's error for what the crate's parser refused in `translated` (the rewrite of `pattern`).
fn from_crate(e: &regex_syntax::Error, pattern: &str, translated: &str) -> SyntaxError {
    let at = |span: &regex_syntax::ast::Span| translated.get(span.start.offset..span.end.offset).unwrap_or(pattern);
    match e {
        regex_syntax::Error::Parse(e) => {
            let code = match e.kind() {
                AstKind::GroupUnclosed => return error(MISSING_PAREN, pattern),
                AstKind::GroupUnopened => return error(UNEXPECTED_PAREN, pattern),
                AstKind::NestLimitExceeded(_) => return error(NESTING_DEPTH, pattern),
                AstKind::ClassUnclosed => {
                    return error(MISSING_BRACKET, translated.get(e.span().start.offset..).unwrap_or(pattern));
                }
                AstKind::ClassRangeInvalid | AstKind::ClassRangeLiteral => INVALID_CHAR_RANGE,
                AstKind::DecimalEmpty
                | AstKind::DecimalInvalid
                | AstKind::RepetitionCountInvalid
                | AstKind::RepetitionCountDecimalEmpty
                | AstKind::RepetitionCountUnclosed => INVALID_REPEAT_SIZE,
                AstKind::GroupNameDuplicate { .. }
                | AstKind::GroupNameEmpty
                | AstKind::GroupNameInvalid
                | AstKind::GroupNameUnexpectedEof => INVALID_NAMED_CAPTURE,
                AstKind::RepetitionMissing => MISSING_REPEAT_ARGUMENT,
                AstKind::CaptureLimitExceeded => return error(LARGE, pattern),
                AstKind::FlagDanglingNegation
                | AstKind::FlagDuplicate { .. }
                | AstKind::FlagRepeatedNegation { .. }
                | AstKind::FlagUnexpectedEof
                | AstKind::FlagUnrecognized
                | AstKind::UnsupportedLookAround => INVALID_PERL_OP,
                _ => INVALID_ESCAPE,
            };
            error(code, at(e.span()))
        }
        regex_syntax::Error::Translate(e) => {
            let code = match e.kind() {
                HirKind::InvalidUtf8 => INVALID_UTF8,
                HirKind::UnicodePropertyNotFound | HirKind::UnicodePropertyValueNotFound => INVALID_CHAR_RANGE,
                _ => INVALID_PERL_OP,
            };
            error(code, at(e.span()))
        }
        _ => error(INVALID_PERL_OP, pattern),
    }
}

/// A repetition's length at the start of `s` when it is Go's `{n}`, `{n,}` or `{n,m}`, with
/// its counts.
fn repetition(s: &str) -> Option<(usize, u32, Option<u32>)> {
    let inner_end = s.find('}')?;
    let inner = s.get(1..inner_end)?;
    let number = |t: &str| -> Option<u32> {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().unwrap_or(u32::MAX))
    };
    let (min, max) = match inner.split_once(',') {
        None => (number(inner)?, Some(number(inner)?)),
        Some((min, "")) => (number(min)?, None),
        Some((min, max)) => (number(min)?, Some(number(max)?)),
    };
    Some((inner_end + 1, min, max))
}

/// The Perl class `c` (after a backslash) as an ASCII class outside brackets, or as the items
/// of one inside brackets.
fn perl_class(c: char, in_class: bool) -> Option<&'static str> {
    Some(match (c, in_class) {
        ('d', false) => "[0-9]",
        ('D', false) => "[^0-9]",
        ('w', false) => "[0-9A-Za-z_]",
        ('W', false) => "[^0-9A-Za-z_]",
        ('s', false) => r"[\t\n\f\r ]",
        ('S', false) => r"[^\t\n\f\r ]",
        ('d', true) => "0-9",
        ('D', true) => "[:^digit:]",
        ('w', true) => "0-9A-Za-z_",
        ('W', true) => "[:^word:]",
        ('s', true) => r"\t\n\f\r ",
        ('S', true) => "[:^space:]",
        _ => return None,
    })
}

/// Rewrites a Go pattern into the `regex` crate's syntax with the same meaning, refusing what
/// Go refuses and the crate would take.
fn translate(pattern: &str) -> Result<String, SyntaxError> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    // Where the last repetition operator started, when the previous token was one.
    let mut last_repeat: Option<usize> = None;
    // Whether there is something before to repeat: not at the start nor after `(` or `|`.
    let mut operand = false;
    while i < pattern.len() {
        let rest = &pattern[i..];
        let c = rest.chars().next().unwrap_or_default();
        let start = i;
        let mut repeat = None;
        match c {
            '\\' => {
                let Some(next) = rest[1..].chars().next() else {
                    return Err(error(TRAILING_BACKSLASH, ""));
                };
                i += 1 + next.len_utf8();
                match next {
                    'Q' => {
                        let (literal, after) = match rest[2..].find(r"\E") {
                            Some(end) => (&rest[2..2 + end], 2 + end + 2),
                            None => (&rest[2..], rest.len()),
                        };
                        out.push_str(&regex::escape(literal));
                        i = start + after;
                    }
                    'b' => out.push_str(r"(?-u:\b)"),
                    'B' => out.push_str(r"(?-u:\B)"),
                    'C' => return Err(error(INVALID_ESCAPE, r"\C")),
                    // `\p{Greek}`, `\x{263a}`: the braces belong to the escape.
                    'p' | 'P' | 'x' if rest[2..].starts_with('{') => {
                        let end = rest.find('}').map_or(rest.len(), |e| e + 1);
                        out.push_str(&rest[..end]);
                        i = start + end;
                    }
                    _ => match perl_class(next, false) {
                        Some(class) => out.push_str(class),
                        None => out.push_str(&rest[..1 + next.len_utf8()]),
                    },
                }
            }
            '[' => i += translate_class(rest, &mut out)?,
            // A group's `(?` (flags, non-capturing, named) is no repetition.
            '(' if rest.starts_with("(?") => {
                out.push_str("(?");
                i += 2;
            }
            '*' | '+' | '?' | '{' => {
                let len = if c == '{' {
                    match repetition(rest) {
                        Some((len, min, max)) => {
                            if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min) {
                                return Err(error(INVALID_REPEAT_SIZE, &rest[..len]));
                            }
                            len
                        }
                        None => 0,
                    }
                } else {
                    1
                };
                if len == 0 {
                    out.push_str(r"\{");
                    i += 1;
                } else {
                    // A trailing `?` makes the repetition lazy; it is part of the operator.
                    let lazy = usize::from(rest[len..].starts_with('?'));
                    let end = len + lazy;
                    if let Some(previous) = last_repeat {
                        return Err(error(INVALID_REPEAT_OP, &pattern[previous..i + end]));
                    }
                    if !operand {
                        return Err(error(MISSING_REPEAT_ARGUMENT, &rest[..end]));
                    }
                    out.push_str(&rest[..end]);
                    i += end;
                    repeat = Some(start);
                }
            }
            _ => {
                out.push(c);
                i += c.len_utf8();
            }
        }
        operand = !matches!(c, '(' | '|');
        last_repeat = repeat;
    }
    Ok(out)
}

/// Rewrites the class at the start of `rest` onto `out`, returning its length in the pattern.
fn translate_class(rest: &str, out: &mut String) -> Result<usize, SyntaxError> {
    out.push('[');
    let mut i = 1;
    if rest[i..].starts_with('^') {
        out.push('^');
        i += 1;
    }
    // A `]` first in a class is a literal in both syntaxes.
    if rest[i..].starts_with(']') {
        out.push_str(r"\]");
        i += 1;
    }
    while i < rest.len() {
        let tail = &rest[i..];
        let c = tail.chars().next().unwrap_or_default();
        match c {
            ']' => {
                out.push(']');
                return Ok(i + 1);
            }
            '[' if tail.starts_with("[:") => match tail.find(":]") {
                Some(end) => {
                    out.push_str(&tail[..end + 2]);
                    i += end + 2;
                }
                None => {
                    out.push_str(r"\[");
                    i += 1;
                }
            },
            '[' | '&' | '~' => {
                out.push('\\');
                out.push(c);
                i += 1;
            }
            '-' if out.ends_with('-') => {
                out.push_str(r"\-");
                i += 1;
            }
            '\\' => {
                let Some(next) = tail[1..].chars().next() else {
                    return Err(error(TRAILING_BACKSLASH, ""));
                };
                match perl_class(next, true) {
                    Some(items) => out.push_str(items),
                    None => out.push_str(&tail[..1 + next.len_utf8()]),
                }
                i += 1 + next.len_utf8();
            }
            _ => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    Err(error(MISSING_BRACKET, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(pattern: &str) -> String {
        compile(pattern).expect_err(pattern).to_string()
    }

    #[test]
    fn refuses_what_go_refuses_in_go_words() {
        assert_eq!(err("(abc"), "error parsing regexp: missing closing ): `(abc`");
        assert_eq!(err("abc)"), "error parsing regexp: unexpected ): `abc)`");
        assert_eq!(err("[a"), "error parsing regexp: missing closing ]: `[a`");
        assert_eq!(err("x[a-"), "error parsing regexp: missing closing ]: `[a-`");
        assert_eq!(err("a**"), "error parsing regexp: invalid nested repetition operator: `**`");
        assert_eq!(err("a+?*"), "error parsing regexp: invalid nested repetition operator: `+?*`");
        assert_eq!(err("*"), "error parsing regexp: missing argument to repetition operator: `*`");
        assert_eq!(err(r"\q"), "error parsing regexp: invalid escape sequence: `\\q`");
        assert_eq!(err("a\\"), "error parsing regexp: trailing backslash at end of expression: ``");
        assert_eq!(err("a{1001}"), "error parsing regexp: invalid repeat count: `{1001}`");
        assert_eq!(err("a{2,1}"), "error parsing regexp: invalid repeat count: `{2,1}`");
        assert_eq!(err("[z-a]"), "error parsing regexp: invalid character class range: `z-a`");
        assert_eq!(err(r"\p{Nope}"), "error parsing regexp: invalid character class range: `\\p{Nope}`");
        assert_eq!(err("(?=a)"), "error parsing regexp: invalid or unsupported Perl syntax: `(?=`");
    }

    #[test]
    fn matches_what_go_matches() {
        let find = |pattern: &str, s: &str| compile(pattern).expect(pattern).find(s).map(|m| m.as_str().to_string());
        // Perl classes and word boundaries are ASCII.
        assert_eq!(find(r"\d+", "x٣4"), Some("4".into()));
        assert_eq!(find(r"\w+", "é_a1"), Some("_a1".into()));
        assert_eq!(find(r"[\d.]+", "v1.2"), Some("1.2".into()));
        assert_eq!(find(r"\bab", "éab"), Some("ab".into()));
        // A `{` that is no repetition, and class punctuation, are literals.
        assert_eq!(find("a{", "xa{"), Some("a{".into()));
        assert_eq!(find("a{,2}", "a{,2}"), Some("a{,2}".into()));
        assert_eq!(find("[[]+", "x[["), Some("[[".into()));
        assert_eq!(find("[a&&b]+", "&&ab"), Some("&&ab".into()));
        assert_eq!(find("[[:digit:]x]+", "x12"), Some("x12".into()));
        assert_eq!(find(r"\Q.*\E!", "a.*!"), Some(".*!".into()));
        assert_eq!(find("a{2}b{1,}", "aab"), Some("aab".into()));
        assert_eq!(find("(?i)é", "É"), Some("É".into()));
    }
}
