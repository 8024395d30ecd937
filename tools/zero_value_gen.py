#!/usr/bin/env python3
"""Writes frontend/apimachinery/src/schema/zero_values.rs: for each message of generated.rs, what
the Go type's zero value holds once kube turns it into JSON (its unstructured converter): the
fields that are value structs (never omitted, so present as `{}`, their own zero values within)
and the slices, maps and pointers without `omitempty` (present as `null`). Server-side apply
compares a create against that zero value, so it decides which structs a create marks with `.`.

A second table lists, per message, the number and boolean fields that are not pointers and carry
`omitempty`. gogo-protobuf writes such a field even when it is zero, while kube's JSON of the
same Go object leaves it out; so the protobuf decoder drops a zero of these fields, and keeps
the zero of a pointer (`*int32`: set on purpose) or of a field without `omitempty` (kube's JSON
prints it).

A third table lists, per message, the number and boolean fields that are neither pointers nor
`omitempty`: the zero value of the Go type holds their zero (`desiredReplicas: 0`), so a create
that writes that zero does not own the field, as kube's field manager compares it with the zero
value.

A fourth table lists, per message, the string fields that are neither pointers nor `omitempty`
(`Event.reportingComponent`, `RoleRef.apiGroup`): kube's JSON prints their empty value as `""`,
so the decoder keeps an empty one; an empty string of any other field is dropped, as kube's JSON
omits it (`omitempty`) or the field was never set (a pointer).

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


# Go's number and boolean types: kube's JSON writes their zero as `0` or `false`.
SCALARS = {
    "bool", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64",
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def parse_package(directory, import_path):
    """Returns ({struct name: ([(go type, json tag, named)], imports)}, {other type name:
    underlying type}) of one package."""
    structs, others = {}, {}
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
                others[type_name] = rest.split()[0] if rest.split() else ""
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
    generated_text = open(GENERATED).read()
    generated = set(re.findall(r"^pub static (\w+): Message", generated_text, flags=re.M))
    # Per message, the JSON names of its number and boolean fields in generated.rs: a Go field
    # listed in the second table must be one the decoder reads as such.
    scalar_fields = {}
    for name, body in re.findall(r"^pub static (\w+): Message\s*=(.*?)^\S", generated_text, flags=re.M | re.S):
        scalar_fields[name] = set(re.findall(r'field\(\d+, "([^"]+)", T::(?:Int|Bool|Double)\)', body))

    def resolve(go_type, imports, here):
        """(import path, type name) of a bare or qualified type name."""
        if "." in go_type:
            alias, name = go_type.split(".", 1)
            return imports.get(alias), name
        return here, go_type

    # And the JSON names of its string fields: a Go field in the third table must be one too.
    string_fields = {}
    for name, body in re.findall(r"^pub static (\w+): Message\s*=(.*?)^\S", generated_text, flags=re.M | re.S):
        string_fields[name] = set(re.findall(r'field\(\d+, "([^"]+)", T::String\)', body))

    def scalar_kind(go_type, imports, here, kinds=SCALARS):
        """Whether a non-pointer Go type is one of `kinds` (numbers and booleans unless told),
        through named types."""
        for _ in range(4):
            if go_type in kinds:
                return True
            pkg, name = resolve(go_type, imports, here)
            if pkg not in parsed or name not in parsed[pkg][1]:
                return False
            go_type, here = parsed[pkg][1][name], pkg
        return False

    rows, unset, printed, printed_scalars = [], [], [], []
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
                    if parsed[pkg][1][type_name].startswith(("[]", "map[")):
                        nulls.append(json_name)
            if values or nulls:
                rows.append((message, values, nulls))
            def plain(omitempty, known, kinds=SCALARS, embedded=False):
                """JSON names of the fields that are neither pointers, slices nor maps, of a scalar
                kind (`kinds`, default numbers and booleans), in `known`, with `omitempty` or
                without it as `omitempty` says; embedded fields count only if `embedded`."""
                return [
                    tag.split(",")[0]
                    for go_type, tag, named in fields
                    if (named or embedded)
                    and ("omitempty" in tag.split(",")[1:]) == omitempty
                    and not go_type.startswith(("*", "[]", "map["))
                    and scalar_kind(go_type, imports, path, kinds)
                    and tag.split(",")[0] in known.get(message, ())
                ]

            omitted = plain(True, scalar_fields, embedded=True)
            if omitted:
                unset.append((message, omitted))
            scalars = plain(False, scalar_fields)
            if scalars:
                printed_scalars.append((message, scalars))
            empties = plain(False, string_fields, {"string"})
            if empties:
                printed.append((message, empties))

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
    print()
    print("/// Per message, its number and boolean fields that are not pointers and carry `omitempty`:")
    print("/// protobuf writes their zero, kube's JSON leaves it out.")
    print("pub static UNSET_ZEROS: &[(&Message, &[&str])] = &[")
    for message, names in unset:
        n = ", ".join(f'"{x}"' for x in names)
        print(f"    (&{message}, &[{n}]),")
    print("];")
    print()
    print("/// Per message, its number and boolean fields that are neither pointers nor `omitempty`:")
    print("/// kube's JSON prints their zero, so the Go type's zero value holds it.")
    print("pub static PRINTED_SCALAR_ZEROS: &[(&Message, &[&str])] = &[")
    for message, names in printed_scalars:
        n = ", ".join(f'"{x}"' for x in names)
        print(f"    (&{message}, &[{n}]),")
    print("];")
    print()
    print("/// Per message, its string fields that are neither pointers nor `omitempty`: kube's JSON")
    print("/// prints their empty value as `\"\"`.")
    print("pub static PRINTED_EMPTY_STRINGS: &[(&Message, &[&str])] = &[")
    for message, names in printed:
        n = ", ".join(f'"{x}"' for x in names)
        print(f"    (&{message}, &[{n}]),")
    print("];")


if __name__ == "__main__":
    main()
