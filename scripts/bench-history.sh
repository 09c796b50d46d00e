#!/usr/bin/env bash
# Benchmark: which commit last changed each settings folder, against git.
#
# A history of 21,000+ commits is generated with `git fast-import` from a
# fixed seed: main with feature branches merged every ~25 commits (some
# merges bring a settings change from the side branch), ~200 code files, 50
# settings folders configs/app00..app49 of which app40..app49 last changed
# in the first 300 commits (the slow case: the walk crosses nearly all
# history). The pack is then rewritten the way a server sends it
# (`git repack -adf`). Reported as ratios measured in the same run:
#
#   1. one folder (configs/app49, changed near the start):
#      `settings-image tag --path configs/app49` vs `git log -1 -- configs/app49`,
#      without a commit-graph, then with one (`git commit-graph write
#      --reachable`, no changed-path Bloom filters: gix cannot read them; git
#      with them is printed for information),
#   2. all 50 folders in one walk (`settings-image tag --path ... x50`) vs
#      50 runs of `git log -1 -- DIR`
#      (both with the commit-graph, and without),
#   3. peak RSS of the 50-folder walk (/usr/bin/time -v).
#
# Caches are warm: each command runs once first, then they alternate and the
# median of RUNS runs (default 5) is kept. Every answer is checked against
# git's before anything is timed.
#
# usage: bash scripts/bench-history.sh [WORK_DIR]   (default: a temp dir, removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/time ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
  else
    echo "bench-history.sh: /usr/bin/time is missing: apt-get install time" >&2
    exit 1
  fi
fi

if [ -n "${SETTINGS_IMAGE_BIN:-}" ]; then
  bin="$SETTINGS_IMAGE_BIN"   # a binary built elsewhere (must be a release build to mean anything)
else
  cargo build --release --locked --quiet
  bin="$PWD/target/release/settings-image"
fi

if [ $# -ge 1 ]; then
  work="$1"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
export HOME="$work" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
unset GITHUB_TOKEN GITHUB_REPOSITORY GH_TOKEN
repo="$work/repo"

generate() {
  python3 - <<'PY'
import random, sys
rng = random.Random(15)
out = sys.stdout
t = 1_500_000_000
mark = 0
def commit(ref, changes, parents, msg):
    global t, mark
    mark += 1
    t += 60
    out.write("commit %s\nmark :%d\ncommitter C O Mitter <c@example.com> %d +0000\n" % (ref, mark, t))
    out.write("data %d\n%s\n" % (len(msg), msg))
    for i, p in enumerate(parents):
        out.write("%s :%d\n" % ("from" if i == 0 else "merge", p))
    for path, data in changes:
        out.write("M 100644 inline %s\ndata %d\n%s\n" % (path, len(data), data))
    out.write("\n")
    return mark
code = ["src/mod%02d/file%02d.rs" % (m, f) for m in range(20) for f in range(10)]
docs = ["docs/page%02d.md" % i for i in range(20)]
folders = ["configs/app%02d" % i for i in range(50)]
def settings(folder):
    return [("%s/%s" % (folder, n), "%s: %d\n" % (n, rng.randrange(1 << 30)))
            for n in rng.sample(["app.yaml", "db.yaml", "flags.json"], rng.randint(1, 2))]
def edit(paths):
    return [(p, "// %d\n" % rng.randrange(1 << 30)) for p in rng.sample(paths, rng.randint(1, 3))]
# The first commit holds everything.
first = [(p, "// 0\n") for p in code + docs + ["README.md"]]
for f in folders:
    first += [("%s/%s" % (f, n), "%s: 0\n" % n) for n in ["app.yaml", "db.yaml", "flags.json"]]
tip = commit("refs/heads/main", first, [], "initial")
n = 1
while n < 21000:
    # Early on every folder changes; later only app00..app39.
    live = folders if n < 300 else folders[:40]
    if rng.random() < 0.04:
        # A feature branch of 1-3 commits, main moves on with docs only,
        # then a merge bringing the branch's changes.
        side, changed = tip, {}
        for _ in range(rng.randint(1, 3)):
            ch = settings(rng.choice(live)) if rng.random() < 0.2 else edit(code)
            changed.update(ch)
            side = commit("refs/heads/feature", ch, [side], "feature work %d" % n)
            n += 1
        for _ in range(rng.randint(0, 2)):
            tip = commit("refs/heads/main", edit(docs), [tip], "docs %d" % n)
            n += 1
        tip = commit("refs/heads/main", sorted(changed.items()), [tip, side], "merge feature %d" % n)
        n += 1
        continue
    r = rng.random()
    ch = settings(rng.choice(live)) if r < 0.06 else edit(docs) if r < 0.16 else edit(code)
    tip = commit("refs/heads/main", ch, [tip], "change %d" % n)
    n += 1
PY
}

now() { date +%s.%N; }
seconds() {
  local s e
  s=$(now); "$@" >/dev/null; e=$(now)
  awk -v s="$s" -v e="$e" 'BEGIN { print e - s }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

if [ ! -d "$repo/.git" ]; then
  git init -q -b main "$repo"
  generate | git -C "$repo" fast-import --quiet --force
  git -C "$repo" repack -adfq
fi
rm -f "$repo/.git/objects/info/commit-graph"
rm -rf "$repo/.git/objects/info/commit-graphs"
commits=$(git -C "$repo" rev-list --count HEAD)
merges=$(git -C "$repo" rev-list --count --merges HEAD)
echo "history: $commits commits ($merges merges), 50 settings folders, pack $(du -sh "$repo/.git/objects/pack" | cut -f1)"

folders=()
for i in $(seq -w 0 49); do folders+=("configs/app$i"); done
one=configs/app49
echo "one folder: $one, last changed by commit $(git -C "$repo" rev-list --count "$(git -C "$repo" log -1 --format=%H -- $one)") of $commits"

ours_one() { (cd "$repo" && "$bin" tag --path "$one" --prefix main --json); }
git_one() { git -C "$repo" log -1 --format='%H %ct' -- "$one"; }
paths=()
for f in "${folders[@]}"; do paths+=(--path "$f"); done
ours_all() { (cd "$repo" && "$bin" tag "${paths[@]}" --prefix main --json); }
# The same answers as lines `FOLDER COMMIT TIME`, for the comparison with git.
ours_all_lines() {
  ours_all | python3 -c 'import json,sys; [print(r["path"], r["commit"], r["timestamp"]) for r in json.load(sys.stdin)]'
}
git_all() { for f in "${folders[@]}"; do git -C "$repo" log -1 --format="$f %H %ct" -- "$f"; done; }

# The answers must be git's before anything is timed.
check() {
  local want got
  want=$(git_one | cut -d' ' -f1)
  got=$(ours_one | python3 -c 'import json,sys; print(json.load(sys.stdin)["commit"])')
  [ "$want" = "$got" ] || { echo "MISMATCH $one: git $want, ours $got" >&2; exit 1; }
  diff <(git_all) <(ours_all_lines) >&2 || { echo "MISMATCH for the 50 folders ($1)" >&2; exit 1; }
}

runs=${RUNS:-5}
# time_pair A B: median seconds of A and of B, alternating, after a warm-up.
time_pair() {
  local a=() b=()
  "$1" >/dev/null; "$2" >/dev/null
  for _ in $(seq "$runs"); do
    a+=("$(seconds "$1")")
    b+=("$(seconds "$2")")
  done
  echo "$(median "${a[@]}") $(median "${b[@]}")"
}

check "no commit-graph"
read -r o1 g1 < <(time_pair ours_one git_one)
read -r oa ga < <(time_pair ours_all git_all)

git -C "$repo" commit-graph write --reachable --no-changed-paths
check "commit-graph"
read -r o1g g1g < <(time_pair ours_one git_one)
read -r oag gag < <(time_pair ours_all git_all)
rss=$(cd "$repo" && /usr/bin/time -v "$bin" tag "${paths[@]}" --prefix main 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ { print $2 }')
rss_git=$(/usr/bin/time -v git -C "$repo" log -1 --format=%H -- "$one" 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ { print $2 }')

# For information: git with changed-path Bloom filters (gix cannot read them).
git -C "$repo" commit-graph write --reachable --changed-paths
read -r o1b g1b < <(time_pair ours_one git_one)
read -r oab gab < <(time_pair ours_all git_all)

printf 'one folder, no commit-graph:   ours %.3f s, git log %.3f s, ratio %s (goal <= 1.00)\n' "$o1" "$g1" "$(ratio "$o1" "$g1")"
printf 'one folder, commit-graph:      ours %.3f s, git log %.3f s, ratio %s (goal <= 0.50)\n' "$o1g" "$g1g" "$(ratio "$o1g" "$g1g")"
printf '50 folders, no commit-graph:   ours %.3f s, 50 x git log %.3f s, ratio %s\n' "$oa" "$ga" "$(ratio "$oa" "$ga")"
printf '50 folders, commit-graph:      ours %.3f s, 50 x git log %.3f s, ratio %s (goal <= 0.10)\n' "$oag" "$gag" "$(ratio "$oag" "$gag")"
printf 'peak RSS, 50-folder walk:      %s KiB (git log -1 on one folder: %s KiB)\n' "$rss" "$rss_git"
printf 'info, git with Bloom filters:  one folder ours %.3f s vs git %.3f s (%s); 50 folders %.3f s vs %.3f s (%s)\n' \
  "$o1b" "$g1b" "$(ratio "$o1b" "$g1b")" "$oab" "$gab" "$(ratio "$oab" "$gab")"
echo "(medians of $runs warm runs each, alternating)"
