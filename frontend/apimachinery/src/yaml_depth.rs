//! A linear pre-check of how deeply a YAML document nests, run before the YAML parser sees it.
//!
//! The parser's cost grows with the square of the nesting (each token looks at every open
//! level), so a 200 KB body of 100,000 `[` kept a core busy for seconds before the decoder's
//! own depth limit refused it. kube's YAML scanner refuses nesting past 10,000 levels as it reads;
//! this scan gives the same answer in one pass over the bytes, counting flow collections (`[`,
//! `{` outside quotes and comments) and block levels (indentation, and `- ` / `? ` entries that
//! open a level on the same line). It over-counts rather than under-counts: a bracket inside a
//! block scalar counts too, which only matters for documents already near the limit.

/// kube's YAML nesting limit (its scanner's "exceeded max depth of 10000").
pub const MAX_DEPTH: usize = 10_000;

/// Where a document first nests deeper than `max`: its 1-based line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// The line on which the limit was passed.
    pub line: usize,
}

/// Returns `Err` with the line where `text` first nests deeper than `max` levels.
///
/// # Errors
///
/// [`TooDeep`] when the estimated nesting passes `max`.
pub fn check(text: &[u8], max: usize) -> Result<(), TooDeep> {
    // Indentations of the open block levels, innermost last.
    let mut block: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    let mut quote: Option<u8> = None;
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let too_deep = TooDeep { line: n + 1 };
        let mut i = 0;
        if flow == 0 && quote.is_none() {
            let indent = line.iter().take_while(|&&b| b == b' ').count();
            let rest = &line[indent..];
            let blank = rest.iter().all(|b| b.is_ascii_whitespace());
            if !blank && rest[0] != b'#' {
                while block.last().is_some_and(|&open| open >= indent) {
                    block.pop();
                }
                block.push(indent);
                i = indent;
                // `- - - x` opens a level per indicator.
                while i + 1 < line.len() && matches!(line[i], b'-' | b'?') && matches!(line[i + 1], b' ' | b'\t') {
                    i += 2;
                    while i < line.len() && line[i] == b' ' {
                        i += 1;
                    }
                    block.push(i);
                    if block.len() > max {
                        return Err(too_deep);
                    }
                }
            }
        }
        // The last character that was not a space: a quote opens a scalar only where a scalar
        // may start, so an apostrophe inside a plain scalar (`don't`) opens nothing.
        let mut prev = b' ';
        while i < line.len() {
            let b = line[i];
            match quote {
                Some(b'"') if b == b'\\' => i += 1,
                Some(q) if b == q => {
                    // `''` inside a single-quoted scalar is an escaped quote.
                    if q == b'\'' && line.get(i + 1) == Some(&b'\'') {
                        i += 1;
                    } else {
                        quote = None;
                    }
                }
                Some(_) => {}
                None => match b {
                    b'#' if i == 0 || matches!(line[i - 1], b' ' | b'\t') => break,
                    b'\'' | b'"' if matches!(prev, b' ' | b'-' | b':' | b'[' | b'{' | b',' | b'?') => quote = Some(b),
                    b'[' | b'{' => {
                        flow += 1;
                        if flow + block.len() > max {
                            return Err(too_deep);
                        }
                    }
                    b']' | b'}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            if !matches!(b, b' ' | b'\t') {
                prev = b;
            }
            i += 1;
        }
        if block.len() > max {
            return Err(too_deep);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_nesting_past_the_limit_is_refused() {
        let deep = "[".repeat(100_000);
        assert_eq!(check(deep.as_bytes(), MAX_DEPTH), Err(TooDeep { line: 1 }));
        // The document's own level counts too.
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert_eq!(check(ok.as_bytes(), MAX_DEPTH), Ok(()));
        let mixed = format!("a:\n  b: {}", "{x: ".repeat(MAX_DEPTH));
        assert_eq!(check(mixed.as_bytes(), MAX_DEPTH), Err(TooDeep { line: 2 }));
    }

    #[test]
    fn block_nesting_counts_indentation_and_entries() {
        let dashes = format!("{}x\n", "- ".repeat(MAX_DEPTH + 1));
        assert_eq!(check(dashes.as_bytes(), MAX_DEPTH), Err(TooDeep { line: 1 }));
        let mut indented = String::new();
        for level in 0..20 {
            indented.push_str(&format!("{}k{level}:\n", " ".repeat(level)));
        }
        assert_eq!(check(indented.as_bytes(), 10), Err(TooDeep { line: 11 }));
        assert_eq!(check(indented.as_bytes(), 20), Ok(()));
    }

    #[test]
    fn brackets_in_quotes_and_comments_do_not_count() {
        for doc in ["a: '[[[['\n", "b: \"{{\\\"{{\"\n", "c: x # [[[[\n", "d: don't [\n", "e: 'it''s [['\n"] {
            assert_eq!(check(doc.as_bytes(), 2), Ok(()), "{doc}");
        }
    }

    #[test]
    fn an_ordinary_manifest_passes() {
        let doc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {a: b}\ndata:\n  k: |\n    line\n";
        assert_eq!(check(doc.as_bytes(), MAX_DEPTH), Ok(()));
    }
}
