//! Kubernetes' CEL format library for `x-kubernetes-validations` rules: named string formats
//! (`format.dns1123Label()`, `format.uri()`, ..., or `format.named(name)`, an optional that is
//! empty for an unknown name) whose `validate(s)` is `optional.none()` for a valid string and
//! otherwise holds kube's messages, so that a rule reads
//! `!format.dns1123Label().validate(self.name).hasValue()` and its `messageExpression`
//! `format.dns1123Label().validate(self.name).value().join(', ')`.
//!
//! The name formats take kube's own checks and messages; `uri` is `url()`'s request-URI check
//! with Go's message; `uuid`, `byte`, `date` and `datetime` are the checks of the OpenAPI
//! format library kube uses (strfmt), with kube's one-line messages.

use std::sync::Arc;

use ballast_apiserver::registry::validation::{
    dns1035_label, dns1123_label, dns1123_subdomain, label_value, qualified_name,
};
use cel::common::types::{Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::{Opaque, OptionalValue};
use cel::{ExecutionError, Value};

use crate::cel_ip::string_arg;
use crate::cel_overload::{owned, values};
use crate::formats::{base64, date_time, full_date, uuid};

/// One named format: its name in `format.<name>()` and its check.
#[derive(Debug, Clone, Copy)]
struct Format {
    name: &'static str,
    validate: fn(&str) -> Vec<String>,
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name == other.name
    }
}

impl Eq for Format {}

const FORMAT_TYPE_NAME: &str = "kubernetes.NamedFormat";

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        FORMAT_TYPE_NAME
    }
}

/// Kube's `maskTrailingDash`: a name that is only a prefix (`generateName`) may end in `-`, so
/// the check sees it with its last two characters replaced by `a`.
fn prefix_masked(s: &str) -> String {
    match s.strip_suffix('-') {
        Some(_) if s.len() > 1 => {
            let mut cut = s.len() - 2;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}a", &s[..cut])
        }
        _ => s.to_string(),
    }
}

fn one(ok: bool, message: &str) -> Vec<String> {
    if ok {
        Vec::new()
    } else {
        vec![message.to_string()]
    }
}

/// The formats, by the names rules call them with.
const FORMATS: &[Format] = &[
    Format { name: "dns1123Label", validate: dns1123_label },
    Format { name: "dns1123Subdomain", validate: dns1123_subdomain },
    Format { name: "dns1035Label", validate: dns1035_label },
    Format { name: "qualifiedName", validate: qualified_name },
    Format { name: "dns1123LabelPrefix", validate: |s| dns1123_label(&prefix_masked(s)) },
    Format { name: "dns1123SubdomainPrefix", validate: |s| dns1123_subdomain(&prefix_masked(s)) },
    Format { name: "dns1035LabelPrefix", validate: |s| dns1035_label(&prefix_masked(s)) },
    Format { name: "labelValue", validate: label_value },
    Format { name: "uri", validate: |s| crate::cel_url::request_uri_error(s).into_iter().collect() },
    Format { name: "uuid", validate: |s| one(uuid(s, None), "does not match the UUID format") },
    Format { name: "byte", validate: |s| one(base64(s), "invalid base64") },
    Format { name: "date", validate: |s| one(full_date(s), "invalid date") },
    Format { name: "datetime", validate: |s| one(date_time(s), "invalid datetime") },
];

fn format_arg(function: &str, v: &Value) -> Result<Format, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<Format>()
            .copied()
            .ok_or_else(|| ExecutionError::function_error(function, "no such overload")),
        _ => Err(ExecutionError::function_error(function, "no such overload")),
    }
}

fn wrap(format: Format) -> Value {
    Value::Opaque(Arc::new(format))
}

fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [name] = values("format.named", args)?;
    let name = string_arg("format.named", &name)?;
    let found = FORMATS.iter().find(|f| f.name == name.as_str());
    let optional = match found {
        Some(f) => OptionalValue::of(wrap(*f)),
        None => OptionalValue::none(),
    };
    owned(Value::Opaque(Arc::new(optional)))
}

fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [format, s] = values("validate", args)?;
    let problems = (format_arg("validate", &format)?.validate)(&string_arg("validate", &s)?);
    let optional = if problems.is_empty() {
        OptionalValue::none()
    } else {
        OptionalValue::of(Value::List(Arc::new(problems.into_iter().map(|p| Value::String(p.into())).collect())))
    };
    owned(Value::Opaque(Arc::new(optional)))
}

/// `format.<name>()`: one zero-argument overload per format, each a plain `fn`.
macro_rules! constants {
    ($($fn_name:ident = $index:expr;)*) => {
        $(
            fn $fn_name<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
                owned(wrap(FORMATS[$index]))
            }
        )*
        const CONSTANTS: &[cel::common::functions::Function] = &[$($fn_name),*];
    };
}

constants! {
    format_0 = 0; format_1 = 1; format_2 = 2; format_3 = 3; format_4 = 4; format_5 = 5; format_6 = 6;
    format_7 = 7; format_8 = 8; format_9 = 9; format_10 = 10; format_11 = 11; format_12 = 12;
}

/// Declares the library's type and overloads on `env`.
pub(crate) fn extension(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let format = || Type::new_opaque_type(FORMAT_TYPE_NAME);
    env.add_type(format())?;
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], named)?;
    env.add_member_overload("validate", "format-validate", format(), vec![STRING_TYPE], validate)?;
    for (f, constant) in FORMATS.iter().zip(CONSTANTS) {
        let name = format!("format.{}", f.name);
        env.add_overload(&name, &name, vec![], *constant)?;
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
    fn every_format_has_its_constant() {
        assert_eq!(FORMATS.len(), CONSTANTS.len());
        for f in FORMATS {
            let expr = format!("format.named('{0}').value() == format.{0}()", f.name);
            assert_eq!(eval(&expr), Ok(Value::Bool(true)), "{expr}");
        }
        assert_eq!(eval("format.dns1123Label() == format.dns1035Label()"), Ok(Value::Bool(false)));
    }

    #[test]
    fn functions_behave_as_kube_documents() {
        let valid = |expr: &str| {
            let expr = format!("!{expr}.hasValue()");
            assert_eq!(eval(&expr), Ok(Value::Bool(true)), "{expr}");
        };
        valid("format.dns1123Label().validate('my-label-name')");
        valid("format.dns1123Subdomain().validate('apiextensions.k8s.io')");
        valid("format.qualifiedName().validate('apiextensions.k8s.io/v1beta1')");
        valid("format.dns1123LabelPrefix().validate('my-label-prefix-')");
        valid("format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-')");
        valid("format.dns1035LabelPrefix().validate('my-label-prefix-')");
        valid("format.uri().validate('http://example.com')");
        valid("format.uuid().validate('123e4567-e89b-12d3-a456-426614174000')");
        valid("format.byte().validate('aGVsbG8=')");
        valid("format.date().validate('2021-01-01')");
        valid("format.date().validate('2024-02-29')");
        valid("format.datetime().validate('2021-01-01T00:00:00Z')");
        valid("format.labelValue().validate('my-cool-label-Value')");
        let problems = |expr: &str| -> Value {
            let expr = format!("{expr}.value()");
            eval(&expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
        };
        let list =
            |items: &[&str]| Value::List(Arc::new(items.iter().map(|s| Value::String(s.to_string().into())).collect()));
        assert_eq!(
            problems("format.dns1123Label().validate('contains a space')"),
            list(&["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"])
        );
        assert_eq!(
            problems("format.dns1035LabelPrefix().validate('contains a space-')"),
            list(&["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"])
        );
        assert_eq!(
            problems("format.qualifiedName().validate('contains a space')"),
            list(&["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"])
        );
        assert_eq!(problems("format.byte().validate('aGVsbG8')"), list(&["invalid base64"]));
        assert_eq!(problems("format.date().validate('2020-01-32')"), list(&["invalid date"]));
        assert_eq!(problems("format.date().validate('2023-02-29')"), list(&["invalid date"]));
        assert_eq!(problems("format.datetime().validate('2020-01-32T00:00:00Z')"), list(&["invalid datetime"]));
        assert_eq!(problems("format.uuid().validate('123')"), list(&["does not match the UUID format"]));
        valid("format.uuid().validate('123E4567E89B12D3A456426614174000')");
        valid("format.uuid().validate('123e4567-e89b12d3-a456-426614174000')");
        valid("format.byte().validate('aGVsbA==')");
        assert_eq!(problems("format.byte().validate('')"), list(&["invalid base64"]));
        assert_eq!(problems("format.byte().validate('aGV=bA==')"), list(&["invalid base64"]));
        valid("format.datetime().validate('2021-01-01t10:20:30.123+05:30')");
        valid("format.datetime().validate('2021-01-01T10:20:30,5Z')");
        assert_eq!(problems("format.datetime().validate('2021-01-01T24:00:00Z')"), list(&["invalid datetime"]));
        assert_eq!(problems("format.datetime().validate('2021-01-01T10:20:30')"), list(&["invalid datetime"]));
        assert_eq!(problems("format.datetime().validate('2021-01-01T10:20:60Z')"), list(&["invalid datetime"]));
        assert_eq!(
            problems("format.uri().validate('relative')"),
            list(&["parse \"relative\": invalid URI for request"])
        );
        assert_eq!(eval("format.named('unknown').hasValue()"), Ok(Value::Bool(false)));
        assert_eq!(
            eval("format.dns1123Label().validate('a_b').value().join(', ').startsWith('a lowercase RFC 1123 label')"),
            Ok(Value::Bool(true))
        );
    }
}
