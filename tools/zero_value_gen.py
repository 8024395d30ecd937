#!/usr/bin/env python3
"""Writes frontend/apimachinery/src/schema/zero_values.rs: for each message of generated.rs, what
the Go type's zero value holds once kube turns it into JSON (its unstructured converter): the
fields that are value structs (never omitted, so present as `{}`, their own zero values within)
and the slices, maps and pointers without `omitempty` (present as `null`). Server-side apply
compares a create against that zero value, so it decides which structs a create marks with `.`.

Inputs are the Go sources of k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver and
k8s.io/kube-aggregator at the release the built-in kinds follow (v0.33.x), each a directory.

Usage (from the repository root):
  python3 tools/zero_value_gen.py API APIMACHINERY APIEXTENSIONS AGGREGATOR \
      > frontend/apimachinery/src/schema/zero_values.rs
"""

import os
import re
import sys

GENERATED = "frontend/apimachinery/src/schema/generated.rs"

# Types that are structs in Go but not objects in JSON (custom marshalling): their zero value
# is a scalar or null, never `{}`.
SCALAR_STRUCTS = {
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Time"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "MicroTime"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Duration"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "FieldsV1"),
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"),
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"),
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension"),
    ("k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", "JSON"),
    ("k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", "JSONSchemaPropsOrArray"),
    ("k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", "JSONSchemaPropsOrBool"),
    ("k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", "JSONSchemaPropsOrStringArray"),
}


def packages(api, apimachinery, apiextensions, aggregator):
    """Import path -> (source directory, message name prefix in generated.rs)."""
    out = {}
    for group in sorted(os.listdir(api)):
        gdir = os.path.join(api, group)
        if not os.path.isdir(gdir):
            continue
        for version in sorted(os.listdir(gdir)):
            d = os.path.join(gdir, version)
            if os.path.isfile(os.path.join(d, "types.go")):
                out[f"k8s.io/api/{group}/{version}"] = (d, f"API_{group.upper()}_{version.upper()}_")
    out["k8s.io/apimachinery/pkg/apis/meta/v1"] = (
        os.path.join(apimachinery, "pkg/apis/meta/v1"),
        "APIMACHINERY_PKG_APIS_META_V1_",
    )
    out["k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"] = (
        os.path.join(apiextensions, "pkg/apis/apiextensions/v1"),
        "APIEXTENSIONS_APISERVER_PKG_APIS_APIEXTENSIONS_V1_",
    )
    out["k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"] = (
        os.path.join(aggregator, "pkg/apis/apiregistration/v1"),
        "KUBE_AGGREGATOR_PKG_APIS_APIREGISTRATION_V1_",
    )
    return out


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def parse_package(directory, import_path):
    """Returns ({struct name: [(go type, json tag)]}, {other type names}) of one package."""
    structs, others = {}, set()
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_generated"):
            continue
        raw = open(os.path.join(directory, name)).read()
        imports = {}
        for alias, path in re.findall(r'^\s*(\w+)?\s*"(k8s\.io/[^"]+)"', raw, flags=re.M):
            imports[alias or path.rsplit("/", 1)[1]] = path
        text = strip_comments(raw)
        for m in re.finditer(r"^type (\w+) (struct\s*\{|[^\n]+)", text, flags=re.M):
            type_name, rest = m.group(1), m.group(2)
            if not rest.startswith("struct"):
                others.add(type_name)
                continue
            start = m.end()
            depth, i = 1, start
            while depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            fields = []
            for line in text[start : i - 1].split("\n"):
                fm = re.match(r"\s*(?:(\w+)\s+)?([\w\.\*\[\]]+(?:\[[\w\.]+\][\w\.\*\[\]]+)?)\s+`([^`]*)`", line)
                if not fm:
                    continue
                tag = re.search(r'json:"([^"]*)"', fm.group(3))
                if not tag:
                    continue
                fields.append((fm.group(2), tag.group(1), bool(fm.group(1))))
            structs[type_name] = (fields, imports)
    return structs, others


def main():
    pkgs = packages(*sys.argv[1:5])
    parsed = {path: parse_package(d, path) for path, (d, _) in pkgs.items()}
    generated = set(re.findall(r"^pub static (\w+): Message", open(GENERATED).read(), flags=re.M))

    def resolve(go_type, imports, here):
        """(import path, type name) of a bare or qualified type name."""
        if "." in go_type:
            alias, name = go_type.split(".", 1)
            return imports.get(alias), name
        return here, go_type

    rows = []
    for path, (structs, _) in sorted(parsed.items()):
        prefix = pkgs[path][1]
        for name, (fields, imports) in sorted(structs.items()):
            message = prefix + name.upper()
            if message not in generated:
                continue
            values, nulls = [], []
            for go_type, tag, named in fields:
                json_name, *options = tag.split(",")
                if json_name in ("", "-"):
                    continue
                omitempty = "omitempty" in options
                if go_type.startswith(("*", "[]", "map[")):
                    if not omitempty:
                        nulls.append(json_name)
                    continue
                pkg, type_name = resolve(go_type, imports, path)
                if pkg not in parsed or (pkg, type_name) in SCALAR_STRUCTS:
                    continue
                if type_name in parsed[pkg][0]:
                    values.append(json_name)
                elif type_name in parsed[pkg][1] and not omitempty:
                    # A named slice or map type (ResourceList): Go writes its nil as `null`.
                    underlying = re.search(
                        rf"^type {type_name} (\S+)",
                        strip_comments(
                            "".join(
                                open(os.path.join(pkgs[pkg][0], f)).read()
                                for f in sorted(os.listdir(pkgs[pkg][0]))
                                if f.endswith(".go") and not f.endswith("_test.go")
                            )
                        ),
                        flags=re.M,
                    )
                    if underlying and underlying.group(1).startswith(("[]", "map[")):
                        nulls.append(json_name)
            if values or nulls:
                rows.append((message, values, nulls))

    print("//! Generated by tools/zero_value_gen.py from the Go types of k8s.io/api, k8s.io/apimachinery,")
    print("//! k8s.io/apiextensions-apiserver and k8s.io/kube-aggregator v0.33. Do not edit.")
    print()
    print("use super::generated::*;")
    print("use crate::protobuf::Message;")
    print()
    print("/// Per message, what its Go type's zero value holds in JSON: the value-struct fields (`{}`)")
    print("/// and the slices, maps and pointers Go writes as `null` (no `omitempty`).")
    print("pub static ZERO_VALUES: &[(&Message, &[&str], &[&str])] = &[")
    for message, values, nulls in rows:
        v = ", ".join(f'"{x}"' for x in values)
        n = ", ".join(f'"{x}"' for x in nulls)
        print(f"    (&{message}, &[{v}], &[{n}]),")
    print("];")


if __name__ == "__main__":
    main()
