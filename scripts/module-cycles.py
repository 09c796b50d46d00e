#!/usr/bin/env python3
"""Lists the import cycles between the modules of src/, and exits 1 if there is one.

Usage: python3 scripts/module-cycles.py [--edges]

Two modules that share a parent (`registry` and `login`, `history::git` and
`history::walk`) are in a cycle when code in each one's subtree names the other,
directly or through other siblings: `use crate::login::..` in registry/ and
`use crate::registry::..` in login/. A child naming its parent's items
(`super::Thing`) is the ordinary direction and is not an edge. Code under
`#[cfg(test)]` is not read, nor a file only a `#[cfg(test)]` `mod NAME;` includes
(`#[path = "NAME_tests.rs"]`, a unit test beside the code): a test may name anything.

It reads the source as text (the paths in `use` lines, and `crate::`, `super::`
and `self::` paths anywhere in code), so it needs nothing but python3.
`--edges` also prints every edge between siblings with the file that makes it.
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_of(rel):
    """src-relative file path -> tuple of module names (crate root is ())."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_literals(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.[^']*|[^'\\\n])'", text[i:]):
            i += re.match(r"'(\\.[^']*|[^'\\\n])'", text[i:]).end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def production_text(text):
    """The file without comments, strings and `#[cfg(test)]` items (blanked, so
    line numbers hold)."""
    text = strip_literals(text)
    out, lines, skip_depth = [], text.split("\n"), None
    depth, pending_test = 0, False
    for line in lines:
        stripped = line.strip()
        if skip_depth is None and stripped.startswith("#[cfg(test)]"):
            pending_test = True
            out.append("")
            continue
        if pending_test and skip_depth is None and stripped.startswith("#["):
            out.append("")
            continue  # another attribute of the test item (`#[path = ..]`)
        if pending_test and skip_depth is None:
            pending_test = False
            if stripped.endswith((";", ",")) and line.count("{") == line.count("}"):
                out.append("")
                continue  # `mod tests;`, a test-only `use`, variant or match arm
            skip_depth = depth
        opens, closes = line.count("{"), line.count("}")
        if skip_depth is not None:
            depth += opens - closes
            if depth <= skip_depth and (opens or closes):
                skip_depth = None
            out.append("")
            continue
        depth += opens - closes
        out.append(line)
    return "\n".join(out)


def test_only_files(files):
    """The src-relative files that a `#[cfg(test)]` `mod NAME;` includes, with
    or without `#[path = ..]` (and, for `NAME/mod.rs`, what is under it)."""
    found = set()
    pattern = r"#\[cfg\(test\)\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"
    for rel, text in files.items():
        folder, stem = os.path.split(rel[:-3])
        for attrs, name in re.findall(pattern, text):
            path = re.search(r'#\[path\s*=\s*"([^"]+)"\]', attrs)
            if path:
                candidates = [os.path.join(folder, path.group(1))]
            else:
                base = folder if stem in ("mod", "lib", "main") else os.path.join(folder, stem)
                candidates = [os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")]
            for c in candidates:
                c = os.path.normpath(c)
                if c in files:
                    found.add(c)
                    if c.endswith(os.sep + "mod.rs"):
                        under = os.path.dirname(c) + os.sep
                        found.update(f for f in files if f.startswith(under))
    return found


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"as\w+$", "", tree)]
    prefix, inner = m.group(1), m.group(2)
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        items.append(cur)
    result = []
    for item in items:
        for sub in expand_use(item):
            result.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return result


def absolute(path, here, is_dir_module):
    """A path as written in `here` -> absolute tuple, or None if not crate-local."""
    parts = [p for p in path.split("::") if p]
    if not parts:
        return None
    base = list(here)
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    elif parts[0] in ("super", "self"):
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                if not base:
                    return None
                base = base[:-1]
            parts = parts[1:]
    else:
        return None
    return tuple(base + parts)


def main():
    files = {}
    for dirpath, _, names in os.walk(ROOT):
        for name in names:
            if name.endswith(".rs"):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, ROOT)
                with open(full, encoding="utf-8") as f:
                    files[rel] = f.read()
    modules = {module_of(rel) for rel in files}
    edges = {}
    tests = test_only_files(files)
    for rel, text in sorted(files.items()):
        if rel in tests:
            continue
        here = module_of(rel)
        code = production_text(text)
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", code, re.S):
            paths.extend(expand_use(m.group(1)))
        paths.extend(re.findall(rf"\b(?:crate|super|self)(?:::{IDENT})+", code))
        for p in paths:
            target = absolute(p, here, True)
            if target is None:
                continue
            while target and target not in modules:
                target = target[:-1]
            if not target or target == here:
                continue
            n = 0
            while n < len(here) and n < len(target) and here[n] == target[n]:
                n += 1
            if n == len(here) or n == len(target):
                continue  # parent and child: not an edge
            a, b = here[: n + 1], target[: n + 1]
            edges.setdefault((a, b), set()).add(rel)
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    name = lambda m: "::".join(m) or "crate"
    if "--edges" in sys.argv:
        for (a, b), where in sorted(edges.items()):
            print(f"{name(a)} -> {name(b)}  ({', '.join(sorted(where))})")
    for comp in sccs:
        print("cycle: " + " <-> ".join(name(m) for m in comp))
        for a in comp:
            for b in comp:
                if (a, b) in edges:
                    print(f"  {name(a)} -> {name(b)}: {', '.join(sorted(edges[(a, b)]))}")
    if sccs:
        print(f"{len(sccs)} import cycle(s) between sibling modules of src/")
        return 1
    print(f"no import cycle between the {len(modules)} modules of src/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
