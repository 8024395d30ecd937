#!/usr/bin/env python3
"""Writes frontend/apimachinery/src/schema/generated.rs: the object schema of every built-in kind the
frontend serves (field numbers, protobuf types, JSON names, strategic-merge-patch tags).

Inputs are two crates' sources, so the tables follow the upstream types exactly:
  * k8s-pb (prost structs generated from kube's generated.proto files): field numbers and
    types from the #[prost(...)] attributes, and the +patchMergeKey / +patchStrategy markers
    the upstream Go comments carry into the doc comments;
  * k8s-openapi (serde structs generated from kube's OpenAPI): the JSON name of each field,
    from the string arms of each struct's Deserialize impl.
A prost field and a k8s-openapi field are the same field when their names agree ignoring case,
underscores and punctuation (prost spells podIPs `pod_i_ps`, k8s-openapi `pod_ips`).

Usage (from the repository root; `cargo fetch` first so both crates are in the registry):
  python3 tools/schema_gen.py ~/.cargo/registry/src/*/k8s-pb-0.9.0/src \
      ~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_33 > frontend/apimachinery/src/schema/generated.rs
"""

import os
import re
import sys

# Served (group, version) -> the module of both crates that holds its types.
GROUPS = {
    ("", "v1"): "api/core/v1",
    ("apps", "v1"): "api/apps/v1",
    ("batch", "v1"): "api/batch/v1",
    ("autoscaling", "v1"): "api/autoscaling/v1",
    ("autoscaling", "v2"): "api/autoscaling/v2",
    ("rbac.authorization.k8s.io", "v1"): "api/rbac/v1",
    ("coordination.k8s.io", "v1"): "api/coordination/v1",
    ("events.k8s.io", "v1"): "api/events/v1",
    ("networking.k8s.io", "v1"): "api/networking/v1",
    ("policy", "v1"): "api/policy/v1",
    ("discovery.k8s.io", "v1"): "api/discovery/v1",
    ("storage.k8s.io", "v1"): "api/storage/v1",
    ("scheduling.k8s.io", "v1"): "api/scheduling/v1",
    ("node.k8s.io", "v1"): "api/node/v1",
    ("certificates.k8s.io", "v1"): "api/certificates/v1",
    ("admissionregistration.k8s.io", "v1"): "api/admissionregistration/v1",
    ("apiregistration.k8s.io", "v1"): "kube_aggregator/pkg/apis/apiregistration/v1",
    ("apiextensions.k8s.io", "v1"): "apiextensions_apiserver/pkg/apis/apiextensions/v1",
    ("flowcontrol.apiserver.k8s.io", "v1"): "api/flowcontrol/v1",
    ("authorization.k8s.io", "v1"): "api/authorization/v1",
    ("authentication.k8s.io", "v1"): "api/authentication/v1",
}

# Messages whose JSON form is not an object: the decoder has a FieldType for each.
SPECIAL = {
    "apimachinery/pkg/util/intstr/IntOrString": "T::IntOrString",
    "apimachinery/pkg/api/resource/Quantity": "T::Quantity",
    "apimachinery/pkg/apis/meta/v1/Time": "T::Time",
    "apimachinery/pkg/apis/meta/v1/MicroTime": "T::MicroTime",
    "apimachinery/pkg/apis/meta/v1/Duration": "T::Duration",
    "apimachinery/pkg/apis/meta/v1/FieldsV1": "T::RawJson",
    "apimachinery/pkg/runtime/RawExtension": "T::RawJson",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1/JSON": "T::RawJson",
    "api/authentication/v1/ExtraValue": "T::StringList",
    "api/authorization/v1/ExtraValue": "T::StringList",
    "api/certificates/v1/ExtraValue": "T::StringList",
    "apimachinery/pkg/apis/meta/v1/Verbs": "T::StringList",
}
# Messages that are one of two JSON shapes; the value is the FieldType constructor.
EITHER = {
    "apiextensions_apiserver/pkg/apis/apiextensions/v1/JSONSchemaPropsOrArray": "T::SchemaOrArray",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1/JSONSchemaPropsOrBool": "T::SchemaOrBool",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1/JSONSchemaPropsOrStringArray": "T::SchemaOrStringArray",
}
PROPS = "apiextensions_apiserver/pkg/apis/apiextensions/v1/JsonSchemaProps"
# prost renames some types (JSON -> Json); match paths ignoring case.
SPECIAL = {k.lower(): v for k, v in SPECIAL.items()}
EITHER = {k.lower(): v for k, v in EITHER.items()}

SCALARS = {"string": "T::String", "bytes": "T::Bytes", "bool": "T::Bool", "int32": "T::Int", "int64": "T::Int",
           "double": "T::Double"}

STRUCT_RE = re.compile(r"pub struct (\w+) \{(\}|.*?\n\})", re.S)


def norm(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


def parse_fields(body):
    """(number, attr, ident, rust type, doc) for each prost field of a struct body; types may
    span lines."""
    fields = []
    pos = 0
    attr_re = re.compile(r"#\[prost\(([^)]*)\)\]\s*pub (?:r#)?(\w+):")
    while True:
        m = attr_re.search(body, pos)
        if not m:
            return fields
        depth, i = 0, m.end()
        while i < len(body):
            c = body[i]
            if c == "<":
                depth += 1
            elif c == ">":
                depth -= 1
            elif c == "," and depth == 0:
                break
            i += 1
        ty = re.sub(r"\s+", "", body[m.end():i])
        ty = re.sub(r",>", ">", ty)
        doc_lines = []
        for line in reversed(body[:m.start()].rstrip().split("\n")):
            if line.strip().startswith("///"):
                doc_lines.append(line)
            else:
                break
        attr = m.group(1)
        number = int(re.search(r'tag = "(\d+)"', attr).group(1))
        fields.append((number, attr, m.group(2), ty, "\n".join(reversed(doc_lines))))
        pos = i


def struct_doc(text, start):
    """The doc comment of the struct whose `pub struct` starts at `start` (its attributes
    skipped)."""
    lines = []
    for line in reversed(text[:start].rstrip().split("\n")):
        t = line.strip()
        if t.startswith("///"):
            lines.append(t)
        elif t.startswith("#[") or t.startswith("#!"):
            continue
        else:
            break
    return "\n".join(reversed(lines))


def load_pb(root):
    """(module, name) -> list of (number, attr, ident, rust type, doc); and the set of
    (module, name) marked +structType=atomic."""
    out, atomic = {}, set()
    for dirpath, _, files in os.walk(root):
        if "mod.rs" not in files:
            continue
        module = os.path.relpath(dirpath, root)
        text = open(os.path.join(dirpath, "mod.rs")).read()
        for m in STRUCT_RE.finditer(text):
            out[(module, m.group(1))] = parse_fields(m.group(2))
            if re.search(r"^///\s*\+structType=atomic\s*$", struct_doc(text, m.start()), re.M):
                atomic.add((module, m.group(1)))
    return out, atomic


def load_openapi(root):
    """(module, name) -> {normalized name: JSON name}."""
    out = {}
    arm = re.compile(r'"([^"]+)" => Field::Key_(\w+),')
    for dirpath, _, files in os.walk(root):
        module = os.path.relpath(dirpath, root)
        for f in files:
            if not f.endswith(".rs") or f == "mod.rs":
                continue
            text = open(os.path.join(dirpath, f)).read()
            s = re.search(r"pub struct (\w+)", text)
            if not s:
                continue
            names = {}
            for json_name, key in arm.findall(text):
                names[norm(json_name)] = json_name
                names[norm(key)] = json_name
            out[(module, norm(s.group(1)))] = names
    return out


def resolve(module, rust_type):
    """The (module, name) a prost field type names."""
    inner = re.sub(r"^::core::option::Option<(.*)>$", r"\1", rust_type)
    inner = re.sub(r"^::prost::alloc::boxed::Box<(.*)>$", r"\1", inner)
    inner = re.sub(r"^::prost::alloc::vec::Vec<(.*)>$", r"\1", inner)
    m = re.match(r"^::prost::alloc::collections::BTreeMap<::prost::alloc::string::String,(.*)>$", inner)
    if m:
        inner = m.group(1)
    parts = inner.split("::")
    base = module.split("/")
    while parts and parts[0] == "super":
        parts.pop(0)
        base.pop()
    return "/".join(base + parts[:-1]), parts[-1]


def ident(module, name):
    return re.sub(r"[^A-Z0-9]+", "_", (module + "/" + name).upper()).strip("_")


class Gen:
    def __init__(self, pb, oa, atomic=frozenset()):
        self.pb, self.oa, self.atomic = pb, oa, atomic
        self.done, self.order, self.unmatched = set(), [], []

    def visit(self, key):
        if key in self.done:
            return
        self.done.add(key)
        fields = self.pb[key]
        rows = []
        for number, attr, rust, ty, doc in fields:
            rows.append((number, attr, rust, ty, doc))
            kind = attr.split(",")[0].strip()
            if kind == "message" or (kind == "btree_map" and "message" in attr):
                target = resolve(key[0], ty)
                path = "/".join(target).lower()
                if path in SPECIAL:
                    continue
                if path in EITHER:
                    self.visit((os.path.dirname(PROPS), os.path.basename(PROPS)))
                    continue
                self.visit(target)
        self.order.append(key)

    def module_names(self, module):
        merged, clashes = {}, set()
        for (m, _), names in self.oa.items():
            if m != module:
                continue
            for k, v in names.items():
                if merged.get(k, v) != v:
                    clashes.add(k)
                merged[k] = v
        return {k: v for k, v in merged.items() if k not in clashes}

    def inlined(self, parent_names, target):
        """Whether `target`'s fields appear among the parent's JSON names (a Go embedding).
        Otherwise the field is newer than the served version and is left out."""
        fields = self.pb.get(target, [])
        found = sum(norm(rust) in parent_names for _, _, rust, _, _ in fields)
        return bool(fields) and 2 * found >= len(fields)

    def field_type(self, module, attr, ty):
        kind = attr.split(",")[0].split("=")[0].strip()
        if kind == "btree_map":
            value = re.search(r'btree_map = "string, (\w+)"', attr).group(1)
            if value == "message":
                return "T::Map(&%s)" % self.message_type(resolve(module, ty))
            return "T::Map(&%s)" % SCALARS[value]
        if kind == "message":
            return self.message_type(resolve(module, ty))
        return SCALARS[kind]

    def message_type(self, target):
        path = "/".join(target).lower()
        if path in SPECIAL:
            return SPECIAL[path]
        if path in EITHER:
            return "%s(&%s)" % (EITHER[path], ident(os.path.dirname(PROPS), os.path.basename(PROPS)))
        return "T::Message(&%s)" % ident(*target)

    def merge_markers(self, module, expr, ty, doc):
        """Wraps a field expression in the server-side-apply markers its doc carries: listType
        (with listMapKeys and the +default of key fields the element type declares) and
        mapType."""
        list_type = re.search(r"^\s*///\s*\+listType=(\w+)\s*$", doc, re.M)
        if list_type:
            keys = re.findall(r"^\s*///\s*\+listMapKey=(\w+)\s*$", doc, re.M)
            defaults = []
            if keys and "Vec<" in ty:
                elem = self.pb.get(resolve(module, ty), [])
                for _, _, rust, _, fdoc in elem:
                    d = re.search(r"^\s*///\s*\+default=(\"[^\"]*\"|-?\d+|true|false)\s*$", fdoc, re.M)
                    if d and norm(rust) in [norm(k) for k in keys]:
                        key = [k for k in keys if norm(k) == norm(rust)][0]
                        defaults.append('("%s", r#"%s"#)' % (key, d.group(1)))
            expr = 'listed(%s, "%s", &[%s], &[%s])' % (expr, list_type.group(1),
                                                       ", ".join('"%s"' % k for k in keys), ", ".join(defaults))
        map_type = re.search(r"^\s*///\s*\+mapType=(\w+)\s*$", doc, re.M)
        if map_type:
            expr = 'map_typed(%s, "%s")' % (expr, map_type.group(1))
        return expr

    def emit(self, key):
        module, name = key
        names = self.oa.get((module, norm(name)))
        own = names is not None
        if names is None:
            # Only embedded structs (Rule, EphemeralContainerCommon) lack a JSON type of their
            # own; their names are the module's usual ones.
            names = self.module_names(module)
        lines = ["/// `%s.%s`." % (module.replace("/", "."), name),
                 "pub static %s: Message = Message {" % ident(module, name), "    fields: &["]
        for number, attr, rust, ty, doc in self.pb[key]:
            json_name = names.get(norm(rust))
            ftype = self.field_type(module, attr, ty)
            if json_name is None and ftype.startswith("T::Message(") and own and self.inlined(names, resolve(module, ty)):
                # An embedded Go struct (`json:",inline"`): its fields are the parent's in JSON.
                lines.append("        inline(%d, %s)," % (number, ftype))
                continue
            if json_name is None:
                self.unmatched.append("%s.%s.%s" % (module, name, rust))
                continue
            ctor = "repeated" if ", repeated" in attr else "field"
            expr = '%s(%d, "%s", %s)' % (ctor, number, json_name, ftype)
            strategy = re.search(r"\+patchStrategy=([\w,]+)", doc)
            merge_key = re.search(r"\+patchMergeKey=(\w+)", doc)
            if strategy or merge_key:
                expr = 'tagged(%s, "%s", "%s")' % (expr, strategy.group(1) if strategy else "",
                                                   merge_key.group(1) if merge_key else "")
            expr = self.merge_markers(module, expr, ty, doc)
            lines.append("        %s," % expr)
        lines += ["    ],", "};", ""]
        return "\n".join(lines)


def main():
    pb, atomic = load_pb(sys.argv[1])
    oa = load_openapi(sys.argv[2])
    gen = Gen(pb, oa, atomic)
    roots = []
    for (group, version), module in sorted(GROUPS.items()):
        for (m, name) in sorted(pb):
            if m != module or name.endswith("List"):
                continue
            fields = {rust for _, _, rust, _, _ in pb[(m, name)]}
            if "metadata" in fields:
                roots.append((group, version, name, (m, name)))
                gen.visit((m, name))
    out = ["// @generated by tools/schema_gen.py from the k8s-pb 0.9.0 and k8s-openapi 0.29.0 (v1_33) sources.",
           "// Do not edit; regenerate (see the script's doc).", "",
           "use crate::protobuf::{field, inline, listed, map_typed, repeated, tagged, FieldType as T, Message};", ""]
    out.append("/// The schema of the top-level kind `kind` of `group`/`version`, if it is a built-in one.")
    out.append("pub fn lookup(group: &str, version: &str, kind: &str) -> Option<&'static Message> {")
    out.append("    Some(match (group, version, kind) {")
    for group, version, name, key in roots:
        out.append('        ("%s", "%s", "%s") => &%s,' % (group, version, name, ident(*key)))
    out += ["        _ => return None,", "    })", "}", ""]
    out.append("/// The types marked `+structType=atomic` upstream: server-side apply owns and replaces them whole.")
    out.append("pub static ATOMIC_STRUCTS: &[&Message] = &[")
    for key in sorted(k for k in gen.order if k in atomic):
        out.append("    &%s," % ident(*key))
    out += ["];", ""]
    for key in sorted(gen.order):
        out.append(gen.emit(key))
    sys.stdout.write("\n".join(out))
    for u in gen.unmatched:
        sys.stderr.write("no JSON name: %s\n" % u)


if __name__ == "__main__":
    main()
