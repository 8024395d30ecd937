//! Label and field selectors (`labelSelector=`, `fieldSelector=` on list, watch and
//! deletecollection), with kube's grammar:
//!
//! ```text
//! labels: app=web,tier!=db,env in (a,b),env notin (c),has-key,!no-key,replicas>2
//! fields: metadata.name=x,metadata.namespace!=y      (only fields the kind whitelists)
//! ```
//!
//! `!=` and `notin` also match objects without the label, as in kube.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use super::validation;
use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    GreaterThan(i64),
    LessThan(i64),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<(String, LabelOp)>,
}

fn bad(selector: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("unable to parse requirement: {why} (selector \"{selector}\")"))
}

/// Splits on commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

impl LabelSelector {
    /// Parses a selector.
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for malformed requirements, keys or values.
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        if selector.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for raw in split_top_level(selector) {
            let req = raw.trim();
            if req.is_empty() {
                return Err(bad(selector, "found '', expected: identifier"));
            }
            let (key, op) = if let Some(key) = req.strip_prefix('!') {
                (key.trim().to_string(), LabelOp::DoesNotExist)
            } else {
                let end = req.find(|c: char| c.is_whitespace() || "=!<>(".contains(c)).unwrap_or(req.len());
                let (key, rest) = req.split_at(end);
                let rest = rest.trim();
                let value = |v: &str| -> Result<String, ApiError> {
                    let v = v.trim().to_string();
                    if let Some(e) = validation::label_value(&v).first() {
                        return Err(bad(selector, format!("invalid label value: \"{v}\": {e}")));
                    }
                    Ok(v)
                };
                let set = |v: &str| -> Result<Vec<String>, ApiError> {
                    let inner = v
                        .trim()
                        .strip_prefix('(')
                        .and_then(|v| v.strip_suffix(')'))
                        .ok_or_else(|| bad(selector, "expected '(' and ')' around values"))?;
                    inner.split(',').map(value).collect()
                };
                let op = if rest.is_empty() {
                    LabelOp::Exists
                } else if let Some(v) = rest.strip_prefix("==") {
                    LabelOp::Equals(value(v)?)
                } else if let Some(v) = rest.strip_prefix("!=") {
                    LabelOp::NotEquals(value(v)?)
                } else if let Some(v) = rest.strip_prefix('=') {
                    LabelOp::Equals(value(v)?)
                } else if let Some(v) = rest.strip_prefix("notin") {
                    LabelOp::NotIn(set(v)?)
                } else if let Some(v) = rest.strip_prefix("in") {
                    LabelOp::In(set(v)?)
                } else if let Some(v) = rest.strip_prefix('>') {
                    LabelOp::GreaterThan(
                        v.trim()
                            .parse()
                            .map_err(|_| bad(selector, "for 'Gt', 'Lt' operators, the value must be an integer"))?,
                    )
                } else if let Some(v) = rest.strip_prefix('<') {
                    LabelOp::LessThan(
                        v.trim()
                            .parse()
                            .map_err(|_| bad(selector, "for 'Gt', 'Lt' operators, the value must be an integer"))?,
                    )
                } else {
                    return Err(bad(selector, format!("found '{rest}', expected: in, notin, =, ==, !=, gt, lt")));
                };
                (key.to_string(), op)
            };
            if let Some(e) = validation::qualified_name(&key).first() {
                return Err(bad(selector, format!("invalid label key \"{key}\": {e}")));
            }
            requirements.push((key, op));
        }
        Ok(LabelSelector { requirements })
    }

    /// Returns whether the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Returns whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|(key, op)| {
            let value = labels.get(key);
            match op {
                LabelOp::Equals(v) => value == Some(v),
                LabelOp::NotEquals(v) => value != Some(v),
                LabelOp::In(vs) => value.is_some_and(|x| vs.contains(x)),
                LabelOp::NotIn(vs) => value.is_none_or(|x| !vs.contains(x)),
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
                LabelOp::GreaterThan(n) => value.and_then(|x| x.parse::<i64>().ok()).is_some_and(|x| x > *n),
                LabelOp::LessThan(n) => value.and_then(|x| x.parse::<i64>().ok()).is_some_and(|x| x < *n),
            }
        })
    }
}

/// A parsed field selector over the fields a kind allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (JSON path, wanted value, equal?) triples.
    requirements: Vec<(&'static str, String, bool)>,
}

impl FieldSelector {
    /// Parses a selector; `allowed` maps selector field names to JSON paths (dot-separated).
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for malformed requirements and `field label not supported` for
    /// fields the kind does not allow.
    pub fn parse(selector: &str, allowed: &[(&'static str, &'static str)]) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for req in selector.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            let (field, value, equal) = if let Some((f, v)) = req.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = req.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = req.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::BadRequest(format!("invalid selector: '{selector}'; can't understand '{req}'")));
            };
            let field = field.trim();
            let path = allowed
                .iter()
                .find(|(name, _)| *name == field)
                .map(|(_, path)| *path)
                .ok_or_else(|| ApiError::BadRequest(format!("field label not supported: {field}")))?;
            requirements.push((path, value.trim().to_string(), equal));
        }
        Ok(FieldSelector { requirements })
    }

    /// Returns whether the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Returns whether every requirement is on `metadata.name` or `metadata.namespace`, which
    /// LIST can read without decoding the object.
    pub fn only_metadata_names(&self) -> bool {
        self.requirements.iter().all(|(path, ..)| matches!(*path, "metadata.name" | "metadata.namespace"))
    }

    /// Returns whether `object` satisfies every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        self.matches_with(|path| {
            Some(match path.split('.').try_fold(object, |v, part| v.get(part)) {
                Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
                Some(Value::Bool(b)) => Cow::Owned(b.to_string()),
                Some(Value::Number(n)) => Cow::Owned(n.to_string()),
                _ => Cow::Borrowed(""),
            })
        })
        .unwrap_or(false)
    }

    /// Returns whether the values `field` gives (by JSON path; empty for an absent field)
    /// satisfy every requirement, or `None` when `field` cannot give one that decides.
    pub fn matches_with<'v>(&self, mut field: impl FnMut(&str) -> Option<Cow<'v, str>>) -> Option<bool> {
        for (path, wanted, equal) in &self.requirements {
            if (field(path)? == wanted.as_str()) != *equal {
                return Some(false);
            }
        }
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selectors_equality_and_sets() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let cases = [
            ("app=web", true, false),
            ("app==web,tier=front", true, false),
            ("app!=web", false, true),
            ("app in (web, db)", true, true),
            ("app notin (web)", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("tier!=back", true, true),
            ("", true, true),
        ];
        for (sel, w, d) in cases {
            let s = LabelSelector::parse(sel).expect(sel);
            assert_eq!((s.matches(&web), s.matches(&db)), (w, d), "{sel}");
        }
        assert!(LabelSelector::parse("a b").is_err());
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a=b c").is_err());
    }

    #[test]
    fn field_selectors_only_on_allowed_fields() {
        let allowed = [("metadata.name", "metadata.name"), ("type", "type")];
        let s = FieldSelector::parse("metadata.name=x,type!=Opaque", &allowed).expect("parse");
        assert!(s.matches(&json!({"metadata": {"name": "x"}, "type": "tls"})));
        assert!(!s.matches(&json!({"metadata": {"name": "x"}, "type": "Opaque"})));
        let err = FieldSelector::parse("spec.foo=1", &allowed).expect_err("unsupported");
        assert_eq!(err.to_string(), "field label not supported: spec.foo");
    }

    #[test]
    fn field_selectors_on_names_read_through_a_lookup() {
        let allowed =
            [("metadata.name", "metadata.name"), ("metadata.namespace", "metadata.namespace"), ("type", "type")];
        let names = FieldSelector::parse("metadata.name=x,metadata.namespace!=kube-system", &allowed).expect("parse");
        assert!(names.only_metadata_names() && FieldSelector::default().only_metadata_names());
        assert!(!FieldSelector::parse("metadata.name=x,type=a", &allowed).expect("parse").only_metadata_names());
        let lookup = |name: &'static str, ns: Option<&'static str>| {
            move |path: &str| match path {
                "metadata.name" => Some(Cow::Borrowed(name)),
                _ => ns.map(Cow::Borrowed),
            }
        };
        assert_eq!(names.matches_with(lookup("x", Some("default"))), Some(true));
        assert_eq!(names.matches_with(lookup("x", Some("kube-system"))), Some(false));
        // A field it cannot read leaves the answer open, unless an earlier one already failed.
        assert_eq!(names.matches_with(lookup("x", None)), None);
        assert_eq!(names.matches_with(lookup("y", None)), Some(false));
        // An absent field reads as empty, as on decoded objects.
        let empty = FieldSelector::parse("metadata.namespace=", &allowed).expect("parse");
        assert!(empty.matches(&json!({"metadata": {"name": "x"}})));
        assert_eq!(empty.matches_with(|_| Some(Cow::Borrowed(""))), Some(true));
    }
}
