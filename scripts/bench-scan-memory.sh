#!/usr/bin/env bash
# Peak memory of `verify --scan` (issue 39, failure 8): FILES manifest files
# of MIB MiB each (default 4 of 15) in one folder, then the same bytes piped
# in on standard input (`--scan -`). SHAPE=docs (the default): each file a
# stream of Deployments of about 3 KiB that mount an image volume.
# SHAPE=list: each file one `kind: List` document of small ConfigMaps (the
# shape that took the old scan to gigabytes; the scan now refuses a document
# over 3 MiB, an error row naming the bound, without reading it whole). Measured with GNU time (/usr/bin/time
# -v, "Maximum resident set size"). The references name another repository
# (and --allow-empty passes), so no registry is needed: what is measured is
# the reading. The files are written by Python, not by this project.
#
# Usage: scripts/bench-scan-memory.sh [BINARY...]
#   (default: target/debug/settings-image; FILES and MIB set the size).
#   Compare two builds by passing both binaries. The scan before issue 39
#   kept every file's text and parsed YAML: about 3.4 GB for 4 files of
#   15 MiB, and a few dozen files took a runner down. Now the peak stays
#   flat in the number and size of the files.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(target/debug/settings-image)
files="${FILES:-4}"
mib="${MIB:-15}"
shape="${SHAPE:-docs}"
. scripts/bench-lib.sh bench-scan-memory
bench_need python3 /usr/bin/time

bench_work
mkdir -p "$work/cluster" "$work/settings"
python3 - "$work/cluster" "$files" "$mib" "$shape" <<'PY'
import sys
out, files, mib, shape = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
labels = ", ".join(f"k{i}: value-{i:020d}" for i in range(100))
def doc(n):
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop-{n}
  annotations: {{note: x}}
spec:
  template:
    metadata:
      labels: {{{labels}}}
    spec:
      containers: [{{name: app, image: busybox}}]
      volumes:
        - name: settings
          image:
            reference: ghcr.io/acme/other-{n % 7}:main-1700000000-abcdef0
"""
def item(n):
    return f"  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{n}}}, data: {{a: b}}}}\n"
n = 0
for f in range(files):
    with open(f"{out}/m{f}.yaml", "w") as fh:
        size = 0
        if shape == "list":
            fh.write("apiVersion: v1\nkind: List\nitems:\n")
        while size < mib << 20:
            d = doc(n) if shape == "docs" else item(n)
            fh.write(d)
            size += len(d)
            n += 1
PY
du -sh "$work/cluster" | sed "s/^/bench-scan-memory: $shape, manifests /"

peak() { # BINARY INPUT [STDIN]
  local bin="$1" input="$2" stdin="${3:-/dev/null}" rc=0
  /usr/bin/time -v -o "$work/time" "$bin" verify --scan "$input" \
    --repository ghcr.io/acme/settings-shop --path "$work/settings" --allow-empty --json \
    <"$stdin" >"$work/out" 2>"$work/err" || rc=$?
  local kib
  kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time")
  local rows
  rows=$(python3 -c 'import json,sys
try: print(len(json.load(open(sys.argv[1]))["rows"]))
except Exception: print("-")' "$work/out")
  local errors
  errors=$(python3 -c 'import json,sys
try: print(sum(r["status"] == "error" for r in json.load(open(sys.argv[1]))["rows"]))
except Exception: print("-")' "$work/out")
  printf '%s\t%-6s\texit %s\tpeak %s MiB\trows %s\terrors %s\n' "$bin" "$4" "$rc" "$((kib / 1024))" "$rows" "$errors"
}
for bin in "${bins[@]}"; do
  peak "$bin" "$work/cluster" /dev/null folder
  peak "$bin" - <(cat "$work"/cluster/*.yaml) stdin
done
