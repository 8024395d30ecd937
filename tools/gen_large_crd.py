#!/usr/bin/env python3
"""Writes frontend/apiextensions/testdata/large-crd.yaml: a CustomResourceDefinition as large and
demanding as real operators' (a database operator's cluster: an embedded pod template, affinity,
tolerations, resources as quantities, list-map keys, int-or-string values, CEL rules with
transition rules), for benchmarks and tests.

The built-in types are inlined from a running frontend's OpenAPI v3 document of core/v1, the way
CRD generators inline them: `$ref`s replaced by the schema, quantities and int-or-strings as
`x-kubernetes-int-or-string`, nested ObjectMeta with the fields a template sets, every node
typed.

    python3 tools/gen_large_crd.py <kubeconfig>
"""
import copy
import json
import subprocess
import sys

import yaml

QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")


def load(kubeconfig):
    raw = subprocess.check_output(["kubectl", "--kubeconfig", kubeconfig, "get", "--raw", "/openapi/v3/api/v1"])
    return json.loads(raw)["components"]["schemas"]


def inline(schemas, node, depth=0):
    """Returns `node` with every reference resolved, in structural form."""
    if depth > 40:
        raise SystemExit("schema too deep")
    ref = node.get("$ref")
    if ref is None and "allOf" in node and len(node["allOf"]) == 1 and "$ref" in node["allOf"][0]:
        ref = node["allOf"][0]["$ref"]
    if ref is not None:
        name = ref.split("/")[-1]
        outer = {k: v for k, v in node.items() if k in ("description", "default")}
        if name == "io.k8s.apimachinery.pkg.api.resource.Quantity":
            inner = {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
                     "x-kubernetes-int-or-string": True}
        elif name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
            inner = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        elif name == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":
            # What generators write for an embedded ObjectMeta (the fields a template sets).
            strmap = {"type": "object", "additionalProperties": {"type": "string"}}
            inner = {"type": "object", "properties": {
                "annotations": strmap, "labels": strmap, "name": {"type": "string"},
                "namespace": {"type": "string"}, "finalizers": {"type": "array", "items": {"type": "string"}}}}
        elif name in ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"):
            inner = {"type": "string", "format": "date-time"}
        else:
            inner = inline(schemas, schemas[name], depth + 1)
        inner = dict(inner)
        inner.update(outer)
        return inner
    out = {}
    for k, v in node.items():
        if k.startswith("x-kubernetes-patch") or k in ("allOf", "oneOf", "x-kubernetes-unions"):
            continue
        if k == "properties":
            out[k] = {p: inline(schemas, s, depth + 1) for p, s in v.items()}
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            out[k] = inline(schemas, v, depth + 1)
        else:
            out[k] = v
    if "type" not in out and "x-kubernetes-int-or-string" not in out:
        if "properties" in out:
            out["type"] = "object"
        else:
            out["type"] = "object"
            out["x-kubernetes-preserve-unknown-fields"] = True
    # A list-map key must be required or defaulted (a structural schema's rule).
    if out.get("x-kubernetes-list-type") == "map":
        item = out["items"]
        for key in out.get("x-kubernetes-list-map-keys", []):
            sub = item["properties"][key]
            if key not in item.get("required", []) and "default" not in sub:
                sub["default"] = "TCP" if key == "protocol" else ""
    return out


def core(schemas, name):
    return inline(schemas, {"$ref": "#/components/schemas/io.k8s.api.core.v1." + name})


def spec(schemas):
    s = lambda t, **kw: dict(type=t, **kw)
    role = s("object", required=["name"], properties={
        "name": s("string", minLength=1, maxLength=63, pattern="^[a-z_][a-z0-9_]*$", description="The role's name."),
        "ensure": s("string", enum=["present", "absent"], default="present"),
        "login": s("boolean", default=True),
        "superuser": s("boolean"),
        "connectionLimit": s("integer", format="int64", minimum=-1, default=-1),
        "validUntil": s("string", format="date-time", nullable=True),
        "inRoles": s("array", items=s("string"), **{"x-kubernetes-list-type": "set"}),
        "passwordSecret": s("object", required=["name"], properties={"name": s("string")}),
    }, **{"x-kubernetes-validations": [
        {"rule": "!self.superuser || self.login", "message": "a superuser role must be able to log in"},
        {"rule": "self.name != 'postgres'", "message": "the postgres role is managed by the operator",
         "fieldPath": ".name", "reason": "FieldValueForbidden"},
    ]})
    storage = s("object", required=["size"], properties={
        "size": {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
                 "x-kubernetes-int-or-string": True, "description": "Size of each instance's volume."},
        "storageClass": s("string", description="The StorageClass of the volumes."),
        "resizeInUseVolumes": s("boolean", default=True),
        "pvcTemplate": core(schemas, "PersistentVolumeClaimSpec"),
    }, **{"x-kubernetes-validations": [
        {"rule": "!has(oldSelf.storageClass) || self.storageClass == oldSelf.storageClass",
         "message": "storageClass is immutable", "reason": "FieldValueForbidden"},
    ]})
    backup = s("object", properties={
        "schedule": s("string", pattern=r"^(@(hourly|daily|weekly|monthly))|((\S+\s+){4}\S+)$"),
        "retentionPolicy": s("string", pattern="^[1-9][0-9]*[dwm]$"),
        "destinationPath": s("string", minLength=1),
        "endpointURL": s("string"),
        "compression": s("string", enum=["gzip", "bzip2", "snappy"]),
        "immediate": s("boolean"),
        "target": s("string", enum=["primary", "prefer-standby"], default="prefer-standby"),
    }, **{"x-kubernetes-validations": [
        {"rule": "!has(self.endpointURL) || self.endpointURL.startsWith('https://')",
         "messageExpression": "'endpointURL must use https, not ' + self.endpointURL"},
    ]})
    monitoring = s("object", properties={
        "enablePodMonitor": s("boolean", default=False),
        "customQueries": s("array", maxItems=32, items=s("object", required=["name", "key"], properties={
            "name": s("string"), "key": s("string"), "optional": s("boolean")}),
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
        "relabelings": s("array", items=s("object", properties={
            "action": s("string", enum=["replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep"]),
            "sourceLabels": s("array", items=s("string", pattern="^[a-zA-Z_][a-zA-Z0-9_]*$")),
            "separator": s("string"), "targetLabel": s("string"), "regex": s("string"),
            "modulus": s("integer", format="int64"), "replacement": s("string")})),
    })
    postgres = s("object", properties={
        "parameters": s("object", maxProperties=200, additionalProperties=s("string")),
        "sharedPreloadLibraries": s("array", items=s("string"), **{"x-kubernetes-list-type": "set"}),
        "pgHBA": s("array", items=s("string")),
        "syncReplicaElectionConstraint": s("object", required=["enabled"], properties={
            "enabled": s("boolean"),
            "nodeLabelsAntiAffinity": s("array", items=s("string"))}),
        "extensions": s("array", items=s("object", required=["name"], properties={
            "name": s("string"), "version": s("string"), "schema": s("string")}),
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
    }, **{"x-kubernetes-validations": [
        {"rule": "!has(self.parameters) || !('listen_addresses' in self.parameters)",
         "message": "listen_addresses is managed by the operator"},
    ]})
    return s("object", required=["instances", "storage"], description="The desired state of the cluster.", properties={
        "description": s("string"),
        "instances": s("integer", minimum=1, maximum=9, default=3),
        "minSyncReplicas": s("integer", minimum=0, default=0),
        "maxSyncReplicas": s("integer", minimum=0, default=0),
        "imageName": s("string"),
        "imagePullPolicy": s("string", enum=["Always", "Never", "IfNotPresent"]),
        "primaryUpdateStrategy": s("string", enum=["unsupervised", "supervised"], default="unsupervised"),
        "primaryUpdateMethod": s("string", enum=["switchover", "restart"], default="restart"),
        "stopDelay": s("integer", format="int32", default=1800),
        "switchoverDelay": s("integer", format="int32", default=3600),
        "startDelay": s("integer", format="int32", default=3600),
        "postgresql": postgres,
        "storage": storage,
        "walStorage": copy.deepcopy(storage),
        "backup": backup,
        "monitoring": monitoring,
        "managed": s("object", properties={"roles": s("array", items=role, maxItems=100, **{
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})}),
        "template": core(schemas, "PodTemplateSpec"),
        "affinity": core(schemas, "Affinity"),
        "tolerations": s("array", items=core(schemas, "Toleration")),
        "topologySpreadConstraints": s("array", items=core(schemas, "TopologySpreadConstraint")),
        "resources": core(schemas, "ResourceRequirements"),
        "env": s("array", items=core(schemas, "EnvVar")),
        "envFrom": s("array", items=core(schemas, "EnvFromSource")),
        "ephemeralVolumeSource": core(schemas, "EphemeralVolumeSource"),
        "projectedVolumeTemplate": core(schemas, "ProjectedVolumeSource"),
        "serviceAccountTemplate": s("object", required=["metadata"], properties={
            "metadata": s("object", properties={"labels": s("object", additionalProperties=s("string")),
                                                 "annotations": s("object", additionalProperties=s("string"))})}),
        "bootstrapObject": s("object", **{"x-kubernetes-embedded-resource": True,
                                         "x-kubernetes-preserve-unknown-fields": True}),
    }, **{"x-kubernetes-validations": [
        {"rule": "self.minSyncReplicas <= self.maxSyncReplicas",
         "message": "minSyncReplicas must not exceed maxSyncReplicas"},
        {"rule": "self.maxSyncReplicas < self.instances",
         "messageExpression": "'maxSyncReplicas must be below instances (' + string(self.instances) + ')'"},
        {"rule": "!has(oldSelf.walStorage) || has(self.walStorage)", "message": "walStorage cannot be removed",
         "reason": "FieldValueForbidden"},
        {"rule": "!has(self.env) || self.env.all(e, !e.name.startsWith('PG'))",
         "message": "variables starting with PG are reserved"},
    ]})


def status():
    s = lambda t, **kw: dict(type=t, **kw)
    condition = s("object", required=["type", "status", "lastTransitionTime", "reason", "message"], properties={
        "type": s("string", maxLength=316,
                  pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"),
        "status": s("string", enum=["True", "False", "Unknown"]),
        "observedGeneration": s("integer", format="int64", minimum=0),
        "lastTransitionTime": s("string", format="date-time"),
        "reason": s("string", minLength=1, maxLength=1024, pattern="^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
        "message": s("string", maxLength=32768)})
    return s("object", properties={
        "instances": s("integer"), "readyInstances": s("integer"), "phase": s("string"), "phaseReason": s("string"),
        "currentPrimary": s("string"), "targetPrimary": s("string"), "latestGeneratedNode": s("integer"),
        "instancesStatus": s("object", additionalProperties=s("array", items=s("string"))),
        "conditions": s("array", items=condition,
                        **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}),
        "firstRecoverabilityPoint": s("string", format="date-time"),
    })


def main():
    schemas = load(sys.argv[1])
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "databaseclusters.bench.ballast.dev"},
        "spec": {
            "group": "bench.ballast.dev", "scope": "Namespaced",
            "names": {"plural": "databaseclusters", "singular": "databasecluster", "kind": "DatabaseCluster",
                      "listKind": "DatabaseClusterList", "shortNames": ["dbc"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.instances",
                                                         "statusReplicasPath": ".status.instances"}},
                "additionalPrinterColumns": [
                    {"name": "Instances", "type": "integer", "jsonPath": ".status.instances"},
                    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyInstances"},
                    {"name": "Status", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Primary", "type": "string", "jsonPath": ".status.currentPrimary", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object", "description": "A replicated database cluster.", "required": ["metadata", "spec"],
                    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                   "metadata": {"type": "object"}, "spec": spec(schemas), "status": status()}}},
            }],
        },
    }
    header = ("# Generated by tools/gen_large_crd.py from the built-in core/v1 OpenAPI schemas: a\n"
              "# CustomResourceDefinition as large as real operators' ones, for benchmarks and tests.\n")
    text = yaml.safe_dump(crd, sort_keys=False, width=120)
    open("frontend/apiextensions/testdata/large-crd.yaml", "w").write(header + text)
    print(len(text.splitlines()), "lines")


if __name__ == "__main__":
    main()
