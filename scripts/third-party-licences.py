#!/usr/bin/env python3
"""Writes the licence notices of every crate linked into the binary.

    scripts/third-party-licences.py RUST_TARGET > THIRD-PARTY-LICENSES.txt

The static binary carries the code of the crates it depends on, and most of
their licences (MIT, BSD, Apache-2.0's NOTICE) ask that their notices travel
with it. `scripts/dist.sh` puts this file in each release archive.

Which crates: those `cargo tree -e normal,no-proc-macro --target
RUST_TARGET` lists (cargo's own feature resolution: what is compiled into
the binary, without build scripts, proc macros and dev-dependencies), each
found in `cargo metadata` for its source folder. For each, in name order:
its name, version and `license` expression, and the licence files in the
crate's source (LICENSE*, LICENCE*, COPYING*, NOTICE*, UNLICENSE*, and the
manifest's `license-file`); each distinct text is written once, after the
list, and named by the crates that ship it. A crate that ships no such file
gets a line saying so, never an invented text.
"""

import json
import pathlib
import subprocess
import sys

PATTERNS = ("LICENSE", "LICENCE", "COPYING", "NOTICE", "UNLICENSE")


def cargo(*args: str) -> str:
    return subprocess.run(
        ["cargo", *args, "--locked", "--offline"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: scripts/third-party-licences.py RUST_TARGET", file=sys.stderr)
        return 2
    target = sys.argv[1]
    meta = json.loads(cargo("metadata", "--format-version", "1", "--filter-platform", target))
    by_name = {(p["name"], p["version"]): p for p in meta["packages"]}
    tree = cargo(
        "tree", "-e", "normal,no-proc-macro", "--target", target,
        "--prefix", "none", "-f", "{p}",
    )
    linked = set()
    for line in tree.splitlines():
        name, _, rest = line.partition(" v")
        version = rest.split(" ", 1)[0]
        if name and name != "settings-image":
            linked.add((name, version))
    missing = sorted(k for k in linked if k not in by_name)
    if missing:
        print(f"scripts/third-party-licences.py: not in cargo metadata: {missing}", file=sys.stderr)
        return 1

    texts: dict[str, list[str]] = {}
    out = sys.stdout
    out.write(
        f"Third-party software in settings-image ({target}): the {len(linked)} crates "
        "compiled into the binary, their licences, and the licence texts they ship.\n\n"
    )
    for key in sorted(linked):
        p = by_name[key]
        folder = pathlib.Path(p["manifest_path"]).parent
        files = sorted(
            f for f in folder.iterdir() if f.is_file() and f.name.upper().startswith(PATTERNS)
        )
        if p.get("license_file"):
            declared = (folder / p["license_file"]).resolve()
            if declared.is_file() and declared not in [f.resolve() for f in files]:
                files.append(declared)
        out.write(f"{p['name']} {p['version']}: {p.get('license') or '(licence not declared)'}")
        if p.get("repository"):
            out.write(f", {p['repository']}")
        out.write("\n")
        if not files:
            out.write("  (the crate's source ships no licence file)\n")
        for f in files:
            text = f.read_text(encoding="utf-8", errors="replace").strip() + "\n"
            owners = texts.setdefault(text, [])
            if not owners or owners[-1] != f"{p['name']} {p['version']}":
                owners.append(f"{p['name']} {p['version']}")
            out.write(f"  {f.name}: text {list(texts).index(text) + 1}\n")
    for i, (text, owners) in enumerate(texts.items(), 1):
        out.write("\n" + "=" * 78 + "\n")
        out.write(f"text {i}, shipped by: {', '.join(owners)}\n\n")
        out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
