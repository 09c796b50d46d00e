#!/usr/bin/env bash
# Benchmark: `settings-image build` against the shell pipeline that computes
# the same kind of digest:
#   tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c DIR | gzip -6 -n | sha256sum
# on a generated folder of 10,000 files / 100 MiB (mostly YAML and JSON text,
# in a few subfolders, generated from a fixed seed so every run sees the same
# bytes). Caches are warm: each command runs once first; then the two
# alternate (the machine may be shared) and the median of 5 runs each is
# taken (RUNS=n to change). Prints the time ratio (ours / pipeline) and our peak RSS,
# and the peak RSS for a folder 10x smaller, to show memory stays flat.
#
# Memory per file: the peak RSS of a build of 1,000 and of 100,000 small
# files (services/teamNN/appNNN/settings-NNNNNN.yaml, 25 bytes each), the
# growth per file between them, and the pipeline's peak for the 100,000
# (the largest of its processes). Target: under 16 MiB at 100,000 files;
# exits 1 when it is not.
#
# usage: bash scripts/bench-build.sh [WORK_DIR]   (default: a temp dir, removed at the end;
#   SETTINGS_IMAGE_BIN=path measures another build)
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/bench-lib.sh bench-build
bench_gnu_time
# SETTINGS_IMAGE_BIN: a binary built elsewhere (a release build, to mean anything).
bench_bin "${SETTINGS_IMAGE_BIN:-}"
bench_work_in "${1:-}"

# generate DIR FILES BYTES SEED: a deterministic settings tree.
generate() {
  python3 - "$@" <<'PY'
import json, os, random, sys
root, files, total, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
words = ("service name port host timeout retries enabled replicas region zone "
         "database pool cache ttl limit feature flag owner team tier image tag "
         "memory cpu request path url secret ref level debug info warn error").split()
dirs = ["", "services", "services/payments", "services/catalog", "regions/eu",
        "regions/us", "features", "teams/alpha", "teams/beta", "policies"]
def value():
    k = rng.random()
    if k < 0.3: return rng.randint(0, 100000)
    if k < 0.45: return rng.choice([True, False])
    if k < 0.6: return "%s-%s-%d" % (rng.choice(words), rng.choice(words), rng.randint(0, 999))
    if k < 0.75: return "%08x%08x" % (rng.getrandbits(32), rng.getrandbits(32))
    return " ".join(rng.choice(words) for _ in range(rng.randint(2, 8)))
def yaml_doc(size):
    out, n = [], 0
    while n < size:
        block = "%s_%d:\n" % (rng.choice(words), rng.randint(0, 99))
        for _ in range(rng.randint(3, 10)):
            block += "  %s: %s\n" % (rng.choice(words), json.dumps(value()))
        out.append(block); n += len(block)
    return "".join(out).encode()
def json_doc(size):
    items, n = [], 0
    while n < size:
        item = {rng.choice(words): value() for _ in range(rng.randint(3, 8))}
        s = json.dumps(item, indent=2); items.append(item); n += len(s) + 2
    return (json.dumps(items, indent=2) + "\n").encode()
mean = total / files
written = 0
for i in range(files):
    # Sizes vary around the mean; the last file takes up the rest.
    size = int(mean * rng.uniform(0.2, 1.8)) if i < files - 1 else max(total - written, 1)
    d = dirs[i % len(dirs)]
    if rng.random() < 0.65:
        name, data = "settings-%05d.yaml" % i, yaml_doc(size)[:size]
    elif rng.random() < 0.9:
        name, data = "settings-%05d.json" % i, json_doc(size)[:size]
    else:  # a few opaque blobs (certificates, compiled policies)
        name, data = "blob-%05d.bin" % i, rng.randbytes(size)
    path = os.path.join(root, d, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    written += len(data)
PY
}


# seconds CMD...: wall-clock seconds of one run.
seconds() {
  local s e
  s=$(now); "$@" >/dev/null; e=$(now)
  awk -v s="$s" -v e="$e" 'BEGIN { print e - s }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

ours() {
  rm -rf "$work/out"
  "$bin" build --source worktree --path "$1" --output "$work/out" --tag bench --json
}
pipeline() {
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$1" -c . | gzip -6 -n | sha256sum
}
# peak_rss DIR: our peak resident set size in KiB.
peak_rss() {
  rm -rf "$work/out"
  /usr/bin/time -f '%M' -o "$work/rss" "$bin" build --source worktree --path "$1" --output "$work/out" >/dev/null
  cat "$work/rss"
}

big="$work/big" small="$work/small"
[ -d "$big" ] || generate "$big" 10000 $((100 * 1024 * 1024)) 1
[ -d "$small" ] || generate "$small" 1000 $((10 * 1024 * 1024)) 2
count() { echo "$(find "$1" -type f | wc -l) files, $(find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }') bytes"; }
echo "folder: $(count "$big") (small: $(count "$small"))"

# Warm up both, then alternate them so both see the same machine load
# (the machine may be shared); the median of RUNS runs each is kept.
runs=${RUNS:-5}
ours "$big" >/dev/null
pipeline "$big" >/dev/null
a=() b=()
for _ in $(seq "$runs"); do
  a+=("$(seconds ours "$big")")
  b+=("$(seconds pipeline "$big")")
done
t_ours=$(median "${a[@]}")
t_pipe=$(median "${b[@]}")
ratio=$(awk -v a="$t_ours" -v b="$t_pipe" 'BEGIN { print a / b }')
layer=$(ours "$big" | python3 -c 'import json,sys; r=json.load(sys.stdin)["layer"]; print(r["size"], r["uncompressed_size"])')
rss_big=$(peak_rss "$big")
rss_small=$(peak_rss "$small")
printf 'ours:      %.3f s (median of %s, warm), layer %s bytes compressed / %s tar\n' "$t_ours" "$runs" ${layer}
printf 'pipeline:  %.3f s (median of %s, warm)\n' "$t_pipe" "$runs"
printf 'ratio:     %.2f (ours / pipeline; target <= 1.00)\n' "$ratio"
printf 'peak RSS:  %s KiB (100 MiB folder), %s KiB (10 MiB folder)\n' "$rss_big" "$rss_small"

# many N DIR: N small files in a deterministic tree.
many() {
  python3 - "$@" <<'PY'
import os, sys
n, root = int(sys.argv[1]), sys.argv[2]
for i in range(n):
    d = os.path.join(root, "services/team%02d/app%03d" % (i % 20, (i // 20) % 50))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "settings-%06d.yaml" % i), "w") as f:
        f.write("key: %d\nname: v-%06d\n" % (i * 7919 % 100003, i))
PY
}
[ -d "$work/f1k" ] || many 1000 "$work/f1k"
[ -d "$work/f100k" ] || many 100000 "$work/f100k"
rss_1k=$(peak_rss "$work/f1k")
rss_100k=$(peak_rss "$work/f100k")
rss_pipe=$(/usr/bin/time -f '%M' -o "$work/rss" bash -c "$(declare -f pipeline); pipeline '$work/f100k'" >/dev/null && cat "$work/rss")
per_file=$(awk -v a="$rss_1k" -v b="$rss_100k" 'BEGIN { printf "%.0f", (b - a) * 1024 / 99000 }')
printf 'per file:  %s KiB at 1,000 files, %s KiB at 100,000 (%s bytes per file); pipeline %s KiB at 100,000 (target < 16384 KiB)\n' \
  "$rss_1k" "$rss_100k" "$per_file" "$rss_pipe"
if [ "$rss_100k" -ge 16384 ]; then
  echo "bench-build: peak RSS at 100,000 files is $rss_100k KiB, not under 16 MiB" >&2
  exit 1
fi
