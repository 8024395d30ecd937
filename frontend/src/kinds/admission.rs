//! The API-extension and control-plane configuration groups: admissionregistration.k8s.io,
//! apiregistration.k8s.io, apiextensions.k8s.io and flowcontrol.apiserver.k8s.io. Their
//! objects are stored and served; what they configure (webhooks, aggregation, custom
//! resources, priority and fairness) is not acted on here.

use super::categories::API_EXTENSIONS;
use ballast_apiserver::registry::{NameRule, ResourceKind, Subresources};

const ADMISSION: &str = "admissionregistration.k8s.io";
const FLOW: &str = "flowcontrol.apiserver.k8s.io";

/// The rows of these groups.
pub static ROWS: &[&ResourceKind] = &[
    &ResourceKind::row(
        ADMISSION,
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfiguration",
        false,
    )
    .categories(API_EXTENSIONS)
    .with_fields(&["webhooks"])
    .generation(&["webhooks"]),
    &ResourceKind::row(
        ADMISSION,
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicy",
        false,
    )
    .categories(API_EXTENSIONS)
    .sub(Subresources::STATUS)
    .generation(&["spec"]),
    &ResourceKind::row(
        ADMISSION,
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybinding",
        false,
    )
    .categories(API_EXTENSIONS)
    .with_fields(&["spec"])
    .generation(&["spec"]),
    &ResourceKind::row(
        ADMISSION,
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfiguration",
        false,
    )
    .categories(API_EXTENSIONS)
    .with_fields(&["webhooks"])
    .generation(&["webhooks"]),
    &ResourceKind::row("apiregistration.k8s.io", "v1", "apiservices", "APIService", "apiservice", false)
        // `v1.` (the core group's) is a name, not a DNS subdomain.
        .names(NameRule::PathSegment)
        .categories(API_EXTENSIONS)
        .stored_as("apiregistration.k8s.io/apiservices")
        .sub(Subresources::STATUS),
    &ResourceKind::row(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        "customresourcedefinition",
        false,
    )
    .short(&["crd", "crds"])
    .categories(API_EXTENSIONS)
    .stored_as("apiextensions.k8s.io/customresourcedefinitions")
    .sub(Subresources::STATUS)
    .generation(&["spec"]),
    &ResourceKind::row(FLOW, "v1", "flowschemas", "FlowSchema", "flowschema", false)
        .names(NameRule::PathSegment)
        .sub(Subresources::STATUS)
        .generation(&["spec"]),
    &ResourceKind::row(
        FLOW,
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        "prioritylevelconfiguration",
        false,
    )
    .names(NameRule::PathSegment)
    .sub(Subresources::STATUS)
    .generation(&["spec"]),
];
