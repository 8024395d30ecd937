//! Name, label and key validation with kube-apiserver's rules and messages
//! (`k8s.io/apimachinery/pkg/util/validation`): clients and conformance tests read these.

/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest DNS-1123 label.
pub const DNS1123_LABEL_MAX: usize = 63;

const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Returns the problems with `s` as a DNS-1123 label (namespace names).
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(format!("must be no more than {DNS1123_LABEL_MAX} characters"));
    }
    if !is_label(s) {
        errs.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start \
             and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
             '{LABEL_FMT}')"
        ));
    }
    errs
}

/// Returns the problems with `s` as a DNS-1123 subdomain (most object names).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    if s.is_empty() || !s.split('.').all(is_label) {
        errs.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
             must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '{SUBDOMAIN_FMT}')"
        ));
    }
    errs
}

/// Returns the problems with a ConfigMap or Secret data key (`IsConfigMapKey`).
pub fn config_map_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    if key.is_empty() || !key.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')) {
        errs.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or \
             'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                .to_string(),
        );
    }
    if key == "." {
        errs.push("must not be '.'".into());
    } else if key == ".." {
        errs.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Returns the problems with a label or annotation key (`IsQualifiedName`).
pub fn qualified_name(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errs = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(dns1123_subdomain(prefix).into_iter().map(|e| format!("prefix part {e}")));
        }
    }
    if !is_qualified_name_part(name) || name.contains('/') {
        errs.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                .to_string(),
        );
    }
    errs
}

/// Returns the problems with a label value (`IsValidLabelValue`); empty is allowed.
pub fn label_value(value: &str) -> Vec<String> {
    if value.is_empty() || is_qualified_name_part(value) {
        return Vec::new();
    }
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    errs.push(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
         start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for \
         validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            .to_string(),
    );
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(dns1123_label("kube-system").is_empty());
        assert!(!dns1123_label("a.b").is_empty());
        assert!(dns1123_subdomain("a.b-c").is_empty());
        assert!(!dns1123_subdomain("Bad_Name").is_empty());
        assert!(!dns1123_subdomain("-a").is_empty());
        assert!(!dns1123_subdomain("").is_empty());
    }

    #[test]
    fn keys_and_labels() {
        assert!(config_map_key("KEY_name.1").is_empty());
        assert!(!config_map_key("").is_empty());
        assert!(!config_map_key("..a").is_empty());
        assert!(!config_map_key("a b").is_empty());
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert!(!qualified_name("/x").is_empty());
        assert!(label_value("").is_empty());
        assert!(!label_value("-x").is_empty());
    }
}
