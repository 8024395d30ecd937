//! Parsing a rule without trusting its shape. The CEL parser, the checker, the cost estimator
//! and the interpreter all recurse over the expression, and a debug build spends tens of
//! kilobytes of stack per level: a rule of a hundred nested parentheses, or a chain of a few
//! hundred `+`, would overflow a 2 MiB runtime thread and abort the whole server. So a rule is
//! refused before parsing when it is longer than CEL's size limit or its nesting may be deeper
//! than CEL's recursion limit (the limits and texts of kube's CEL parser), and the work that
//! recurses runs on the thread's stack when enough of it is left (the server's runtime threads
//! are given [`RULES_THREAD_STACK`]), else on a stack segment big enough for an expression
//! within those limits.

/// CEL's limit on an expression's length, in code points.
const MAX_CODE_POINTS: usize = 100_000;

/// CEL's recursion limit. The depth is bounded from the source (see [`depth_bound`]), which
/// may count more than the parser would: every operator character adds a level, so a chain
/// of `a == b && c == d && ...` counts each `==` and `&&` twice.
const MAX_DEPTH: usize = 250;

/// Remaining stack under which recursive CEL work moves to a fresh segment. The deepest
/// expressions within the limits above (about 95 nested lists, calls or comprehensions, the
/// parser's own limit on groups; chains of a few hundred operators need half as much) take, to
/// admit a definition and check an object, at most 0.8 MiB of stack in a release build and
/// 16 MiB in a debug build (measured by running them on threads of decreasing stack): the red
/// zone leaves half as much again or more as margin.
const STACK_RED_ZONE: usize = if cfg!(debug_assertions) { 24 << 20 } else { 2 << 20 };

/// The size of that segment. It is reserved, not committed: only the pages a rule's recursion
/// touches are ever backed by memory.
const STACK_SEGMENT: usize = if cfg!(debug_assertions) { 32 << 20 } else { 4 << 20 };

/// The stack a thread that checks rules is given so that they run on it without a segment:
/// the red zone, above what the frames of a request's handling take before the rules start
/// (tokio's default stack for its workers, 2 MiB, which they fit in). Mapping a segment per
/// object costs more than checking a typical object's rules; a thread with less stack still
/// checks them, on a segment. Like any thread stack it is reserved, not committed.
pub const RULES_THREAD_STACK: usize = STACK_RED_ZONE + (2 << 20);

/// Runs `f`, which recurses over CEL expressions, with enough stack for any expression
/// [`compile`] accepts.
pub(crate) fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, f)
}

/// Why a source is refused before parsing.
#[derive(Debug)]
pub(crate) enum Refused {
    /// CEL's text, in the frame its parser reports an error without a position in.
    Limit(String),
    /// The parser's own errors.
    Parse(cel::ParseErrors),
}

/// Parses `source` within CEL's limits.
pub(crate) fn compile(source: &str) -> Result<cel::Program, Refused> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(Refused::Limit(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        )));
    }
    if depth_bound(source) > MAX_DEPTH {
        return Err(Refused::Limit(format!("ERROR: <input>:-1:0: expression recursion limit exceeded: {MAX_DEPTH}")));
    }
    with_stack(|| SYNTAX.compile(source)).map_err(Refused::Parse)
}

/// The syntax rules are written in: CEL's standard macros and, as kube enables them, optional
/// values (`self.?field`, `list[?index]`, `[?item]`, `{?key: value}`) and two-variable
/// comprehensions ([`crate::cel_comprehensions`]).
static SYNTAX: std::sync::LazyLock<cel::Env> = std::sync::LazyLock::new(|| {
    let mut env = cel::Env::stdlib().with_optional_support(true);
    env.add_extension(crate::cel_comprehensions::extension)
        .expect("invariant: the two-variable macros are declared once, beside the standard ones");
    env
});

/// An upper bound on the depth of the expression `source` parses to, from its characters
/// alone (without recursing). Operators chain to the left, so a chain of n operators nests n
/// deep; a bracketed group (call, list, map, parentheses) nests inside the chain it appears
/// in, anywhere along it; comma-separated items of a group are chains of their own.
fn depth_bound(source: &str) -> usize {
    struct Group {
        parent: usize,
        /// The longest chain among the group's finished items.
        longest: usize,
        /// Operators in the item being read.
        current: usize,
    }
    let mut groups = vec![Group { parent: 0, longest: 0, current: 0 }];
    let mut open = 0;
    let chars: Vec<char> = source.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                i = skip_string(&chars, i);
                continue;
            }
            '(' | '[' | '{' => {
                groups.push(Group { parent: open, longest: 0, current: 0 });
                open = groups.len() - 1;
            }
            ')' | ']' | '}' => {
                let g = &mut groups[open];
                g.longest = g.longest.max(g.current);
                open = g.parent;
            }
            ',' => {
                let g = &mut groups[open];
                g.longest = g.longest.max(g.current);
                g.current = 0;
            }
            '+' | '-' | '*' | '/' | '%' | '!' | '<' | '>' | '=' | '&' | '|' | '?' | ':' | '.' => {
                groups[open].current += 1;
            }
            _ if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                if chars[start..i] == ['i', 'n'] {
                    groups[open].current += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Groups never closed count as they stand; parents come before their children.
    let mut nesting = vec![0usize; groups.len()];
    let mut deepest = 0;
    for (g, group) in groups.iter().enumerate() {
        let longest = group.longest.max(group.current);
        if g > 0 {
            let parent = &groups[group.parent];
            nesting[g] = nesting[group.parent] + parent.longest.max(parent.current) + 1;
        }
        deepest = deepest.max(nesting[g] + longest);
    }
    deepest
}

/// The index just past the string literal starting at `start` (a quote; single, double or
/// tripled; raw when an `r` or `R` comes before it, where backslashes escape nothing).
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let raw = start > 0 && matches!(chars[start - 1], 'r' | 'R');
    let triple = chars.get(start..start + 3).is_some_and(|q| q.iter().all(|&c| c == quote));
    let mut i = start + if triple { 3 } else { 1 };
    while i < chars.len() {
        if chars[i] == '\\' && !raw {
            i += 2;
            continue;
        }
        if chars[i] == quote && (!triple || chars.get(i..i + 3).is_some_and(|q| q.iter().all(|&c| c == quote))) {
            return i + if triple { 3 } else { 1 };
        }
        i += 1;
    }
    chars.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread with a runtime worker's 2 MiB stack.
    fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::Builder::new().stack_size(2 << 20).spawn(f).expect("thread").join().expect("no overflow")
    }

    fn limit(source: &str) -> Option<String> {
        match compile(source) {
            Err(Refused::Limit(text)) => Some(text),
            _ => None,
        }
    }

    #[test]
    fn depth_counts_chains_and_groups() {
        assert_eq!(depth_bound("self.a"), 1);
        assert_eq!(depth_bound("1 + 2 + 3"), 2);
        assert_eq!(depth_bound("f(a + b, c)"), 2);
        assert_eq!(depth_bound("(x) + 1 + 1"), 3);
        assert_eq!(depth_bound("((((1))))"), 4);
        assert_eq!(depth_bound("'((((' + \"))\" + '''a'b''' + r'\\'"), 3);
        assert_eq!(depth_bound("x in [1, 2]"), 2);
        assert_eq!(depth_bound("index"), 0);
    }

    #[test]
    fn deep_rules_are_refused_in_cel_words_and_nothing_overflows() {
        let chain = format!("1{}", " + 1".repeat(5000));
        assert_eq!(limit(&chain).as_deref(), Some("ERROR: <input>:-1:0: expression recursion limit exceeded: 250"));
        let long = format!("'{}'", "a".repeat(MAX_CODE_POINTS));
        assert_eq!(
            limit(&long).as_deref(),
            Some("ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100002, limit 100000")
        );
        // At the limit a rule parses and runs on a runtime thread's stack; the parser refuses
        // more than 96 nested groups of its own accord.
        let at_limit = on_small_stack(|| {
            let program = compile(&format!("1{} == 241", " + 1".repeat(240))).expect("parses");
            with_stack(|| program.execute(&cel::Context::default()).map_err(|e| e.to_string()))
        });
        assert_eq!(at_limit, Ok(cel::Value::Bool(true)));
        // Nested lists were measured to need the most stack per level.
        let lists = on_small_stack(|| {
            let program = compile(&format!("size({}1{}) == 1", "[".repeat(94), "]".repeat(94))).expect("parses");
            with_stack(|| program.execute(&cel::Context::default()).map_err(|e| e.to_string()))
        });
        assert_eq!(lists, Ok(cel::Value::Bool(true)));
        let nested = on_small_stack(|| compile(&format!("{}true{}", "(".repeat(120), ")".repeat(120))).is_err());
        assert!(nested);
    }

    #[test]
    fn a_thread_of_the_rules_stack_runs_them_without_a_segment() {
        let left = std::thread::Builder::new()
            .stack_size(RULES_THREAD_STACK)
            .spawn(stacker::remaining_stack)
            .expect("thread")
            .join()
            .expect("joined");
        assert!(left.is_some_and(|l| l >= STACK_RED_ZONE + (1 << 20)), "{left:?}");
    }
}
