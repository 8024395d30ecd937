//! rbac.authorization.k8s.io/v1: roles, cluster roles and their bindings. Names are path
//! segments (`system:controller:x`), rules need verbs and API groups, bindings need a valid
//! `roleRef` that never changes, and subjects get kube's default `apiGroup`.

use serde_json::Value;

use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::strategy::{Object, Strategy};
use ballast_apiserver::registry::validation::supported;
use ballast_apiserver::registry::{NameRule, ResourceKind};

const GROUP: &str = "rbac.authorization.k8s.io";

/// The rbac.authorization.k8s.io/v1 rows.
pub static ROWS: &[&ResourceKind] = &[
    &ResourceKind::row(GROUP, "v1", "clusterrolebindings", "ClusterRoleBinding", "clusterrolebinding", false)
        .names(NameRule::PathSegment)
        .with_fields(&["subjects", "roleRef"])
        .rules(&BindingStrategy { cluster: true }),
    &ResourceKind::row(GROUP, "v1", "clusterroles", "ClusterRole", "clusterrole", false)
        .names(NameRule::PathSegment)
        .with_fields(&["rules", "aggregationRule"])
        .rules(&RoleStrategy { cluster: true }),
    &ResourceKind::row(GROUP, "v1", "rolebindings", "RoleBinding", "rolebinding", true)
        .names(NameRule::PathSegment)
        .with_fields(&["subjects", "roleRef"])
        .rules(&BindingStrategy { cluster: false }),
    &ResourceKind::row(GROUP, "v1", "roles", "Role", "role", true)
        .names(NameRule::PathSegment)
        .with_fields(&["rules"])
        .rules(&RoleStrategy { cluster: false }),
];

fn non_empty_list(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_array).is_some_and(|l| !l.is_empty())
}

/// Roles and ClusterRoles.
#[derive(Debug)]
struct RoleStrategy {
    cluster: bool,
}

impl Strategy for RoleStrategy {
    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, rule) in obj.get("rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let at = format!("rules[{i}]");
            if !non_empty_list(rule, "verbs") {
                errs.push(FieldError::required(format!("{at}.verbs"), "verbs must contain at least one value"));
            }
            let non_resource = non_empty_list(rule, "nonResourceURLs");
            if non_resource && !self.cluster {
                errs.push(FieldError::invalid(
                    format!("{at}.nonResourceURLs"),
                    rule["nonResourceURLs"].clone(),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !non_resource && !non_empty_list(rule, "apiGroups") {
                errs.push(FieldError::required(
                    format!("{at}.apiGroups"),
                    "resource rules must supply at least one api group",
                ));
            }
        }
        errs
    }
}

/// RoleBindings and ClusterRoleBindings.
#[derive(Debug)]
struct BindingStrategy {
    cluster: bool,
}

impl Strategy for BindingStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        if let Some(Value::Array(subjects)) = obj.get_mut("subjects") {
            for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
                let group = match s.get("kind").and_then(Value::as_str) {
                    Some("ServiceAccount") => "",
                    Some("User" | "Group") => GROUP,
                    _ => continue,
                };
                if s.get("apiGroup").is_none() {
                    s.insert("apiGroup".into(), group.into());
                }
            }
        }
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let role_ref = obj.get("roleRef").cloned().unwrap_or(Value::Null);
        errs.extend(supported("roleRef.apiGroup", role_ref.get("apiGroup"), &[GROUP]));
        let kinds: &[&str] = if self.cluster { &["ClusterRole"] } else { &["Role", "ClusterRole"] };
        errs.extend(supported("roleRef.kind", role_ref.get("kind"), kinds));
        if role_ref["name"].as_str().unwrap_or("").is_empty() {
            errs.push(FieldError::required("roleRef.name", ""));
        }
        for (i, s) in obj.get("subjects").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let at = format!("subjects[{i}]");
            if s["name"].as_str().unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("{at}.name"), ""));
            }
            match s["kind"].as_str().unwrap_or("") {
                "ServiceAccount" => {
                    if s["apiGroup"].as_str().is_some_and(|g| !g.is_empty()) {
                        errs.push(FieldError::not_supported(format!("{at}.apiGroup"), s["apiGroup"].clone(), &[""]));
                    }
                    if self.cluster && s["namespace"].as_str().unwrap_or("").is_empty() {
                        errs.push(FieldError::required(format!("{at}.namespace"), ""));
                    }
                }
                "User" | "Group" => errs.extend(supported(&format!("{at}.apiGroup"), s.get("apiGroup"), &[GROUP])),
                other => errs.push(FieldError::not_supported(
                    format!("{at}.kind"),
                    other,
                    &["ServiceAccount", "User", "Group"],
                )),
            }
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.prepare_for_create(new);
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("roleRef") != old.get("roleRef") {
            errs.push(FieldError::invalid(
                "roleRef",
                new.get("roleRef").cloned().unwrap_or(Value::Null),
                "cannot change roleRef",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn binding_rules() {
        let b = BindingStrategy { cluster: false };
        let mut ok = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "alice"}]})
        .as_object()
        .cloned()
        .expect("object");
        b.prepare_for_create(&mut ok);
        assert_eq!(ok["subjects"][0]["apiGroup"], GROUP);
        assert!(b.validate(&ok).is_empty());
        let mut changed = ok.clone();
        changed["roleRef"]["name"] = "other".into();
        let errs = b.validate_update(&changed, &ok);
        assert!(errs[0].to_string().ends_with("cannot change roleRef"), "{errs:?}");
        let crb = BindingStrategy { cluster: true };
        let errs: Vec<String> = crb.validate(&ok).iter().map(ToString::to_string).collect();
        assert_eq!(errs, vec![r#"roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#]);
    }

    #[test]
    fn role_rules_need_verbs() {
        let r = RoleStrategy { cluster: false };
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        let errs: Vec<String> = r.validate(role.as_object().expect("object")).iter().map(ToString::to_string).collect();
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0], "rules[0].verbs: Required value: verbs must contain at least one value");
    }
}
