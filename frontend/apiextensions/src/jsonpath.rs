//! The JSONPath subset of kube's `k8s.io/client-go/util/jsonpath` that printer columns and
//! selectable fields use: `.field`, `['field.with.dots']`, `[index]`, `[*]`, and filters
//! `[?(@.path == "value")]` (also `!=`, `<`, `>`, `<=`, `>=`, and `[?(@.path)]` for presence).
//! A path is parsed once ([`Path::parse`]) and evaluated against many objects.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter { path: Vec<Step>, op: Option<(String, Value)> },
}

/// A parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    steps: Vec<Step>,
}

/// Why a path does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

fn parse_steps(text: &str) -> Result<Vec<Step>, ParseError> {
    let b: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut steps = Vec::new();
    while i < b.len() {
        match b[i] {
            '.' => {
                i += 1;
                let start = i;
                while i < b.len() && b[i] != '.' && b[i] != '[' {
                    i += 1;
                }
                let name: String = b[start..i].iter().collect();
                if name.is_empty() {
                    if start < b.len() && b[start] == '.' {
                        return Err(ParseError("recursive descent is not supported".into()));
                    }
                    if i < b.len() {
                        continue;
                    }
                    break;
                }
                steps.push(Step::Field(name));
            }
            '[' => {
                let close = matching_bracket(&b, i).ok_or_else(|| ParseError("unterminated array".into()))?;
                let inner: String = b[i + 1..close].iter().collect();
                steps.push(bracket(inner.trim())?);
                i = close + 1;
            }
            c => return Err(ParseError(format!("unrecognized character in action: U+{:04X} '{c}'", c as u32))),
        }
    }
    Ok(steps)
}

fn matching_bracket(b: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    for (j, c) in b.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if *c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(*c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> Option<&str> {
    let s = s.trim();
    (s.len() >= 2 && ((s.starts_with('\'') && s.ends_with('\'')) || (s.starts_with('"') && s.ends_with('"'))))
        .then(|| &s[1..s.len() - 1])
}

fn bracket(inner: &str) -> Result<Step, ParseError> {
    if inner == "*" {
        return Ok(Step::All);
    }
    if let Some(name) = unquote(inner) {
        return Ok(Step::Field(name.to_string()));
    }
    if let Ok(n) = inner.parse::<i64>() {
        return Ok(Step::Index(n));
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if let Some((left, right)) = filter.split_once(op) {
                let path = filter_path(left.trim())?;
                let right = right.trim();
                let value = match unquote(right) {
                    Some(s) => Value::String(s.to_string()),
                    None => serde_json::from_str(right)
                        .map_err(|_| ParseError(format!("unrecognized identifier {right}")))?,
                };
                return Ok(Step::Filter { path, op: Some((op.to_string(), value)) });
            }
        }
        return Ok(Step::Filter { path: filter_path(filter.trim())?, op: None });
    }
    Err(ParseError(format!("invalid array index {inner}")))
}

fn filter_path(text: &str) -> Result<Vec<Step>, ParseError> {
    let rest = text.strip_prefix('@').ok_or_else(|| ParseError(format!("unrecognized identifier {text}")))?;
    parse_steps(rest)
}

fn compare(left: &Value, op: &str, right: &Value) -> bool {
    match op {
        "==" => left == right || left.as_f64().zip(right.as_f64()).is_some_and(|(a, b)| a == b),
        "!=" => !compare(left, "==", right),
        _ => {
            let ordering = match (left, right) {
                (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                _ => left.as_f64().zip(right.as_f64()).and_then(|(a, b)| a.partial_cmp(&b)),
            };
            match (ordering, op) {
                (Some(o), "<") => o.is_lt(),
                (Some(o), ">") => o.is_gt(),
                (Some(o), "<=") => o.is_le(),
                (Some(o), ">=") => o.is_ge(),
                _ => false,
            }
        }
    }
}

fn walk<'a>(steps: &[Step], current: Vec<&'a Value>) -> Vec<&'a Value> {
    let Some((step, rest)) = steps.split_first() else { return current };
    let mut next = Vec::new();
    for v in current {
        match step {
            Step::Field(name) => next.extend(v.get(name.as_str())),
            Step::Index(n) => {
                if let Some(items) = v.as_array() {
                    let i = if *n < 0 { items.len() as i64 + n } else { *n };
                    next.extend(usize::try_from(i).ok().and_then(|i| items.get(i)));
                }
            }
            Step::All => match v {
                Value::Array(items) => next.extend(items.iter()),
                Value::Object(map) => next.extend(map.values()),
                _ => {}
            },
            Step::Filter { path, op } => {
                for item in v.as_array().into_iter().flatten() {
                    let found = walk(path, vec![item]);
                    let keep = match op {
                        None => !found.is_empty(),
                        Some((op, right)) => found.first().is_some_and(|l| compare(l, op, right)),
                    };
                    if keep {
                        next.push(item);
                    }
                }
            }
        }
    }
    walk(rest, next)
}

impl Path {
    /// Parses a path such as `.status.conditions[?(@.type=="Ready")].status` (with or without
    /// kube's surrounding braces).
    ///
    /// # Errors
    ///
    /// Returns why the path does not parse.
    pub fn parse(text: &str) -> Result<Path, ParseError> {
        let text = text.trim();
        let text = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(text);
        if !text.starts_with('.') && !text.starts_with('[') {
            return Err(ParseError(format!("unrecognized identifier {text}")));
        }
        Ok(Path { steps: parse_steps(text)? })
    }

    /// Returns the values the path finds in `v`, in document order.
    pub fn find<'a>(&self, v: &'a Value) -> Vec<&'a Value> {
        walk(&self.steps, vec![v])
    }

    /// Returns whether the path is a plain chain of field names (what selectable fields and
    /// `/scale` paths must be), and the names.
    pub fn fields(&self) -> Option<Vec<&str>> {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Field(f) => Some(f.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_fields_indexes_and_filters() {
        let obj = json!({"spec": {"replicas": 3, "a.b": "dotted"}, "status": {"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]}});
        let find = |p: &str| Path::parse(p).expect("parses").find(&obj).into_iter().cloned().collect::<Vec<_>>();
        assert_eq!(find(".spec.replicas"), vec![json!(3)]);
        assert_eq!(find(".spec['a.b']"), vec![json!("dotted")]);
        assert_eq!(find(".status.conditions[?(@.type==\"Synced\")].status"), vec![json!("False")]);
        assert_eq!(find(".status.conditions[*].type"), vec![json!("Ready"), json!("Synced")]);
        assert_eq!(find(".status.conditions[-1].type"), vec![json!("Synced")]);
        assert_eq!(find(".spec.missing"), Vec::<Value>::new());
        assert!(Path::parse("spec").is_err());
    }
}
