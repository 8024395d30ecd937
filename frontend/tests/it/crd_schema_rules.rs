//! Definition schemas and string formats held to kube's rules, driven by kubectl: a schema that
//! breaks a structural invariant is refused with kube's field paths and texts, and a custom
//! resource whose strings do not match their declared formats is refused with kube's
//! `must be of type <format>` messages while well-formed values are stored.

use crate::crd::{cluster, write};
use crate::harness::{both_backends, Backend};

both_backends!(structural_invariants_are_enforced, string_formats_are_checked);

/// A cluster-scoped definition of `gadgets.example.com` whose root has `properties` (YAML at
/// eight spaces' indent).
fn gadgets(properties: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Cluster
  names: {{plural: gadgets, singular: gadget, kind: Gadget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
{properties}"#
    )
}

async fn structural_invariants_are_enforced(backend: Backend) {
    let c = cluster(backend).await;
    let at = "spec.validation.openAPIV3Schema";
    let bad = gadgets(concat!(
        "          metadata:\n            type: object\n            properties:\n              labels: {type: object}\n",
        "          template:\n            type: string\n            x-kubernetes-embedded-resource: true\n",
        "          size:\n            x-kubernetes-int-or-string: true\n            x-kubernetes-preserve-unknown-fields: true\n",
        "          mode:\n            type: string\n            not: {description: nested}\n",
    ));
    let out = c.kubectl(&["create", "-f", &write(&c, "bad.yaml", &bad)]).await;
    assert!(!out.ok);
    for want in [
        "The CustomResourceDefinition \"gadgets.example.com\" is invalid".to_string(),
        format!("{at}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"),
        format!("{at}.properties[template].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true"),
        format!("{at}.properties[template].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"),
        format!("{at}.properties[size].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"),
        format!("{at}.properties[mode].not.description: Forbidden: must be empty to be structural"),
    ] {
        assert!(out.stderr.contains(&want), "missing {want:?} in {}", out.stderr);
    }
    // Nothing was written; the same definition within the rules is admitted.
    assert!(c.must_kubectl(&["get", "crd", "-o", "name"]).await.trim().is_empty());
    let good = gadgets(concat!(
        "          metadata:\n            type: object\n            properties:\n              name: {type: string, maxLength: 20}\n",
        "          template:\n            type: object\n            x-kubernetes-embedded-resource: true\n            x-kubernetes-preserve-unknown-fields: true\n",
        "          size:\n            x-kubernetes-int-or-string: true\n",
    ));
    c.must_kubectl(&["create", "-f", &write(&c, "good.yaml", &good)]).await;
}

async fn string_formats_are_checked(backend: Backend) {
    let c = cluster(backend).await;
    let fields = ["email", "mac", "duration", "uuid4", "cidr", "hostname", "date-time"];
    let properties: String = fields
        .iter()
        .map(|f| format!("          {}:\n            type: string\n            format: {f}\n", f.replace('-', "")))
        .collect();
    c.must_kubectl(&["create", "-f", &write(&c, "formats.yaml", &gadgets(&properties))]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/gadgets.example.com"]).await;

    let object = |name: &str, values: [&str; 7]| {
        let body: String = fields.iter().zip(values).map(|(f, v)| format!("{}: {v:?}\n", f.replace('-', ""))).collect();
        format!("apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: {name}\n{body}")
    };
    let bad = object(
        "bad",
        [
            "nobody",
            "01:02:03",
            "forever",
            "025b0d74-00a2-3048-bf57-227c5111bb34",
            "10.0.0.0/33",
            "-x.com",
            "2024-02-30T00:00:00Z",
        ],
    );
    let out = c.kubectl(&["create", "-f", &write(&c, "bad.yaml", &bad)]).await;
    assert!(!out.ok);
    for want in [
        "email: Invalid value: \"nobody\": email in body must be of type email: \"nobody\"",
        "mac: Invalid value: \"01:02:03\": mac in body must be of type mac: \"01:02:03\"",
        "duration: Invalid value: \"forever\": duration in body must be of type duration: \"forever\"",
        "uuid4: Invalid value: \"025b0d74-00a2-3048-bf57-227c5111bb34\": uuid4 in body must be of type uuid4: \"025b0d74-00a2-3048-bf57-227c5111bb34\"",
        "cidr: Invalid value: \"10.0.0.0/33\": cidr in body must be of type cidr: \"10.0.0.0/33\"",
        "hostname: Invalid value: \"-x.com\": hostname in body must be of type hostname: \"-x.com\"",
        "datetime: Invalid value: \"2024-02-30T00:00:00Z\": datetime in body must be of type date-time: \"2024-02-30T00:00:00Z\"",
    ] {
        assert!(out.stderr.contains(want), "missing {want:?} in {}", out.stderr);
    }
    let good = object(
        "good",
        [
            "Some One <someone@example.com>",
            "01-02-03-04-05-06",
            "3 days",
            "025b0d74-00a2-4048-bf57-227c5111bb34",
            "10.0.0.0/8",
            "example.com",
            "2024-02-29T00:00:00.5+01:00",
        ],
    );
    c.must_kubectl(&["create", "-f", &write(&c, "good.yaml", &good)]).await;
    let stored = c.must_kubectl(&["get", "gadget", "good", "-o", "jsonpath={.duration}"]).await;
    assert_eq!(stored.trim(), "3 days");
}
