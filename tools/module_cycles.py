#!/usr/bin/env python3
"""Finds import cycles between the modules of each crate in the workspace.

A module is one source file (`a/b.rs` or `a/b/mod.rs` is `a::b`). Module A depends on module B
when A's code names B's items by path: `use crate::b::X`, `crate::b::X` in an expression,
`super::X`, `self::X`, or `child::X` for a child module. A name that a module only re-exports (`pub use c::X` in `b`) counts as
the module that defines it, so `crate::b::X` is an edge to `b::c`. A parent's `mod child;` is not
an edge (declaring is not depending); a module's inline test module (`#[cfg(test)] mod tests`)
counts as the module itself. Dependencies on other crates are cargo's to check.

Usage: tools/module_cycles.py [CRATE_SRC_DIR ...]   (default: every crate's `src/` in the
workspace). Prints every cycle (one strongly connected component per line) and exits 1 if there
is any.

Example: `registry/mod.rs` holding `pub struct ResourceKind` and `pub use kinds::KINDS;`, with
`registry/kinds/mod.rs` saying `use super::ResourceKind;`, is the cycle
`registry -> registry::kinds -> registry`; moving `ResourceKind` into `registry/kind.rs` breaks it.
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_of(src, path):
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def strip_comments_and_strings(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)  # char literals, such as '"'
    text = re.sub(r'(?<![A-Za-z0-9_])r(#*)"(?:.|\n)*?"\1', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"//[^\n]*", "", text)
    return text


def expand_use_tree(tree):
    """`a::{b, c::{d, e as f}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        parts = []
        depth, start = 0, 0
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            brace = part.find("{")
            if brace >= 0 and part.endswith("}"):
                walk(prefix + part[:brace], part[brace + 1 : -1])
            else:
                out.append((prefix + part).rstrip(":"))

    walk("", tree)
    return out


def analyse(src):
    files = {}
    for root, _dirs, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                files[module_of(src, path)] = strip_comments_and_strings(open(path, encoding="utf-8").read())
    modules = set(files)

    def split_tests(text):
        m = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+" + IDENT + r"\s*\{", text)
        return (text, "") if m is None else (text[: m.start()], text[m.start() :])

    # Re-exports: module -> {name: module the name comes from}.
    reexports = {m: {} for m in modules}
    uses = {m: [] for m in modules}
    for mod, text in files.items():
        body, tests = split_tests(text)
        for part, base in ((body, mod), (tests, mod + ("tests",))):
            for m in re.finditer(r"(pub(?:\([a-z:]+\))?\s+)?use\s+([^;]+);", part):
                for path in expand_use_tree(m.group(2)):
                    segs = path.split("::")
                    if m.group(1):
                        # A re-export is not a use: names through it count as their definer.
                        reexports[mod].setdefault(segs[-1], (base, segs))
                    else:
                        uses[mod].append((base, segs))
            no_use = re.sub(r"(pub(?:\([a-z:]+\))?\s+)?use\s+([^;]+);", "", part)
            # A visibility (`pub(in crate::shard)`) names a module without depending on it.
            no_use = re.sub(r"pub\(in\s+[^)]*\)", "pub", no_use)
            for m in re.finditer(r"(?<![A-Za-z0-9_:$])((?:crate|super|self)(?:::" + IDENT + r")+)", no_use):
                uses[mod].append((base, m.group(1).split("::")))
            # A child module named by a relative path (`kinds::ALL`).
            for m in re.finditer(r"(?<![A-Za-z0-9_:$])(" + IDENT + r")::", no_use):
                if mod + (m.group(1),) in modules:
                    uses[mod].append((mod, ["self", m.group(1)]))

    def absolute(base, segs):
        """Resolves a path written in module `base` to absolute segments, or None if external."""
        cur = list(base)
        i = 0
        if segs[0] == "crate":
            cur, i = [], 1
        elif segs[0] in ("super", "self"):
            while i < len(segs) and segs[i] in ("super", "self"):
                if segs[i] == "super":
                    cur = cur[:-1]
                i += 1
        else:
            # A path relative to the module: only a child module counts.
            if tuple(cur + [segs[0]]) not in modules:
                return None
        return cur + segs[i:]

    def target(abs_segs, seen=()):
        """The module that defines what `abs_segs` names."""
        best = ()
        for n in range(len(abs_segs), -1, -1):
            if tuple(abs_segs[:n]) in modules:
                best = tuple(abs_segs[:n])
                rest = abs_segs[n:]
                break
        else:
            return None
        if rest and rest[0] in reexports.get(best, {}) and (best, rest[0]) not in seen:
            base, segs = reexports[best][rest[0]]
            inner = absolute(base if base[-1:] != ("tests",) else best, segs)
            if inner is None:
                return None  # re-exported from another crate
            t = target(inner + rest[1:], seen + ((best, rest[0]),))
            if t is not None:
                return t
        return best

    edges = {m: set() for m in modules}
    for mod, refs in uses.items():
        for base, segs in refs:
            # In a file's inline test module, `super` is the file's module.
            abs_segs = absolute(base, segs)
            if abs_segs is None:
                continue
            t = target(abs_segs)
            if t is not None and t != mod:
                edges[mod].add(t)
    return edges


def cycles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def name(m):
    return "::".join(m) or "crate"


def workspace_srcs(root):
    srcs = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("target", ".git", "node_modules") and not d.startswith("target")]
        if "Cargo.toml" in names and os.path.isdir(os.path.join(dirpath, "src")):
            srcs.append(os.path.join(dirpath, "src"))
    return sorted(srcs)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    srcs = sys.argv[1:] or workspace_srcs(root)
    found = 0
    for src in srcs:
        edges = analyse(src)
        for comp in cycles(edges):
            found += 1
            members = set(comp)
            detail = "; ".join(
                f"{name(m)} -> {', '.join(name(t) for t in sorted(edges[m] & members))}" for m in comp
            )
            print(f"{os.path.relpath(src, root)}: cycle among {len(comp)} modules: {detail}")
    if found:
        sys.exit(1)
    print(f"no import cycles in {len(srcs)} crates")


if __name__ == "__main__":
    main()
