#!/usr/bin/env bash
# Benchmark: the controller's git mirror (history::mirror, gix over smart
# HTTP) against the git CLI, over the same `git http-backend` server
# (tests/support_git/serve.py) on loopback.
#
# A repository of COMMITS commits (default 3000) is generated with
# `git fast-import` from a fixed seed: ~300 code files and 50 settings
# folders configs/app00..app49 of 5 files each, one to three files changed
# per commit. Cases, each the median of RUNS runs (default 5), the two
# commands alternating, wall time of the whole process:
#
#   1. first fetch (a clone): `mirror_fetch` into an empty cache vs
#      `git clone --bare --single-branch --no-tags --branch main`,
#   2. a fetch with nothing new (the controller's common case): the mirror
#      vs `git fetch` of main in that bare clone,
#   3. a fetch of one new commit (made before each run, untimed): the same
#      two, and the pack bytes the server sent for each (from its log),
#   4. informative: fetch + build of configs/app07 (5 files) from the
#      mirror into an OCI layout, nothing new to fetch.
#
# usage: bash scripts/bench-mirror.sh [WORK_DIR]   (default: a temp dir, removed at the end)
#        COMMITS=N RUNS=N PROFILE=release|debug MIRROR_FETCH=BINARY in the environment
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root=$PWD
COMMITS=${COMMITS:-3000}
RUNS=${RUNS:-5}
work=${1:-}
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
else
  mkdir -p "$work"
  trap 'kill "$server_pid" 2>/dev/null || true' EXIT
fi
server_pid=

PROFILE=${PROFILE:-release}   # debug: a quick check of the script itself
if [ -n "${MIRROR_FETCH:-}" ]; then
  mirror_fetch=$MIRROR_FETCH   # an example binary built elsewhere
else
  echo "building the example ($PROFILE)..." >&2
  if [ "$PROFILE" = release ]; then
    cargo build --release --locked --example mirror_fetch -q
  else
    cargo build --locked --example mirror_fetch -q
  fi
  mirror_fetch=$repo_root/target/$PROFILE/examples/mirror_fetch
fi

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=$work
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

echo "generating $COMMITS commits..." >&2
mkdir -p "$work/served"
git init -q --bare -b main "$work/served/settings.git"
python3 - "$COMMITS" <<'EOF' | git -C "$work/served/settings.git" fast-import --quiet
import random, sys
n = int(sys.argv[1])
rng = random.Random(19)
code = [f"src/mod{i:03}/file{i:03}.py" for i in range(300)]
settings = [f"configs/app{a:02}/f{k}.yaml" for a in range(50) for k in range(5)]
def body():
    return "".join(f"key{k}: {rng.getrandbits(64):016x}\n" for k in range(rng.randint(20, 80))).encode()
t = 1_600_000_000
for c in range(n):
    t += 60
    files = [rng.choice(code) for _ in range(rng.randint(1, 3))]
    if c < 300 or rng.random() < 0.3:
        files.append(rng.choice(settings))
    if c == 0:
        files = code + settings
    msg = f"commit {c}\n".encode()
    out = sys.stdout.buffer
    out.write(b"commit refs/heads/main\n")
    out.write(f"committer bench <bench@example.com> {t} +0000\n".encode())
    out.write(f"data {len(msg)}\n".encode() + msg)
    for f in files:
        b = body()
        out.write(f"M 100644 inline {f}\ndata {len(b)}\n".encode() + b + b"\n")
    out.write(b"\n")
EOF
git -C "$work/served/settings.git" repack -adq

log=$work/access.log
python3 tests/support_git/serve.py --root "$work/served" --log "$log" > "$work/port" &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/port")/settings.git"
git clone -q "$work/served/settings.git" "$work/upstream"

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {printf "%.3f\n", a[int((NR+1)/2)]}'; }
timed() { local s e; s=$(now); "$@" > /dev/null; e=$(now); echo "$e - $s" | bc; }
pack_bytes() { python3 -c '
import json, sys
print(sum(json.loads(l)["bytes"] for l in open(sys.argv[1]) if "git-upload-pack" in l and "\"POST\"" in l))' "$log"; }
new_commit() {
  echo "n: $(now)" > "$work/upstream/configs/app07/f0.yaml"
  git -C "$work/upstream" commit -qam "bench" && git -C "$work/upstream" push -q origin main
}

echo "1. clone" >&2
a=(); b=()
for r in $(seq "$RUNS"); do
  rm -rf "$work/cache" "$work/bare"
  a+=("$(timed "$mirror_fetch" "$work/cache" "$url" main)")
  b+=("$(timed git clone -q --bare --single-branch --no-tags --branch main "$url" "$work/bare")")
done
clone_a=$(printf '%s\n' "${a[@]}" | median); clone_b=$(printf '%s\n' "${b[@]}" | median)

echo "2. nothing new" >&2
a=(); b=()
for r in $(seq "$RUNS"); do
  a+=("$(timed "$mirror_fetch" "$work/cache" "$url" main)")
  b+=("$(timed git -C "$work/bare" fetch -q --no-tags origin +refs/heads/main:refs/heads/main)")
done
noop_a=$(printf '%s\n' "${a[@]}" | median); noop_b=$(printf '%s\n' "${b[@]}" | median)

echo "3. one new commit" >&2
a=(); b=(); bytes_a=(); bytes_b=()
for r in $(seq "$RUNS"); do
  new_commit; : > "$log"
  a+=("$(timed "$mirror_fetch" "$work/cache" "$url" main)"); bytes_a+=("$(pack_bytes)")
  new_commit; : > "$log"
  b+=("$(timed git -C "$work/bare" fetch -q --no-tags origin +refs/heads/main:refs/heads/main)"); bytes_b+=("$(pack_bytes)")
done
one_a=$(printf '%s\n' "${a[@]}" | median); one_b=$(printf '%s\n' "${b[@]}" | median)
ba=$(printf '%s\n' "${bytes_a[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
bb=$(printf '%s\n' "${bytes_b[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')

echo "4. fetch + build of configs/app07" >&2
a=()
for r in $(seq "$RUNS"); do
  rm -rf "$work/layout"
  a+=("$(timed "$mirror_fetch" "$work/cache" "$url" main configs/app07 "$work/layout")")
done
build_a=$(printf '%s\n' "${a[@]}" | median)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f\n", a / b}'; }
echo
echo "repository: $COMMITS commits, pack $(du -sh "$work/served/settings.git/objects/pack" | cut -f1); medians of $RUNS runs, wall seconds"
printf '%-34s %10s %10s %8s\n' case mirror git ratio
printf '%-34s %10s %10s %8s\n' "1. clone" "$clone_a" "$clone_b" "$(ratio "$clone_a" "$clone_b")"
printf '%-34s %10s %10s %8s\n' "2. fetch, nothing new" "$noop_a" "$noop_b" "$(ratio "$noop_a" "$noop_b")"
printf '%-34s %10s %10s %8s\n' "3. fetch, one new commit" "$one_a" "$one_b" "$(ratio "$one_a" "$one_b")"
printf '%-34s %10s %10s\n' "   pack bytes sent" "$ba" "$bb"
printf '%-34s %10s\n' "4. fetch + build configs/app07" "$build_a"
