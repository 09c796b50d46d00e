#!/usr/bin/env python3
"""Lists the longest functions of src/ (production code: `#[cfg(test)]` code and
`*_tests.rs` files are not read), longest first.

Usage: python3 scripts/long-functions.py [N]   (N rows, default 15)

A function's length is its lines from `fn` to its closing brace, comments and
blank lines included, as a reader meets it. It reads the source as text, with
the same reader as scripts/module-cycles.py.
"""

import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("cycles", os.path.join(HERE, "module-cycles.py"))
cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cycles)

FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")


def main():
    most = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    root = os.path.join(HERE, "..", "src")
    rows = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".rs") or name.endswith("_tests.rs") or name == "tests.rs":
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            # Comments are blanked but newlines kept, so line numbers hold.
            lines = cycles.production_text(text).split("\n")
            for i, line in enumerate(lines):
                m = FN.match(line)
                if not m:
                    continue
                depth, started, end = 0, False, None
                for j in range(i, len(lines)):
                    depth += lines[j].count("{") - lines[j].count("}")
                    started = started or "{" in lines[j]
                    if started and depth <= 0:
                        end = j
                        break
                    if not started and lines[j].rstrip().endswith(";"):
                        break
                if end is not None:
                    rows.append((end - i + 1, os.path.relpath(path, os.path.join(root, "..")), i + 1, m.group(6)))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    for length, path, line, name in rows[:most]:
        print(f"{length:4} {path}:{line} {name}")


if __name__ == "__main__":
    main()
