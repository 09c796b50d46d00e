#!/usr/bin/env bash
# Benchmark: which commit last changed each settings folder, against git.
#
# Two histories, both generated with `git fast-import` from a fixed seed:
#
# A. "synthetic" (small trees): 21,000+ commits, main with feature branches
#    merged every ~25 commits (some merges bring a settings change from the
#    side branch), ~200 code files, 50 settings folders configs/app00..app49
#    of which app40..app49 last changed in the first 300 commits (the slow
#    case: the walk crosses nearly all history). The pack is rewritten with
#    `git repack -adf`.
#
# B. "clone" (a real project's shape, as CI gets it): 10,000 commits of a
#    monorepo, services/svc-000..svc-299 each holding code nested 4-6 deep
#    (src/pkgN/[internal/]file) and five settings folders
#    services/<svc>/config/<env> (1,500 folders; overlays one level deeper),
#    plus libs/, docs/ and top-level files; `services/` is a tree of 300
#    entries that most commits change. Commits carry an author and messages
#    of a few words to a paragraph; feature branches are merged as in A.
#    The folder measured, services/svc-123/config/prod, last changed 3,500
#    commits before HEAD (its service's code changes after that). The pack
#    is the one a server sends: the generated repository plays the server,
#    is repacked once as a server's gc does (`git repack -adf`, git's
#    default window 10 and depth 50, so deltas cross paths and history as
#    in a real pack, not only fast-import's previous-version deltas), then
#    cloned with `git clone --no-local --no-checkout`, which goes through
#    upload-pack/pack-objects (deltas reused, objects in the order a fetch
#    sends them) and index-pack: one pack, no commit-graph, exactly what
#    actions/checkout with fetch-depth 0 receives.
#
# Reported as ratios measured in the same run:
#
#   A1. one folder (configs/app49, changed near the start):
#      `settings-image tag --path configs/app49` vs `git log -1 -- configs/app49`,
#      (a) without a commit-graph, (b) with one holding changed-path Bloom
#      filters (`git commit-graph write --reachable --changed-paths`; both
#      git and settings-image read them), (c) with one without filters
#      (`--no-changed-paths`, informative),
#   A2. all 50 folders in one walk (`settings-image tag --path ... x50`) vs
#      50 runs of `git log -1 -- DIR`
#      (without a commit-graph, and with the one with filters),
#   A3. peak RSS of the 50-folder walk (/usr/bin/time -v),
#   B1. one folder of the clone vs `git log -1 --format=%H -- DIR`, without
#      a commit-graph (goal <= 1.00, aim 0.80), and (informative) with one
#      holding changed-path filters.
#
# Caches are warm: each command runs once first, then they alternate and the
# median of RUNS runs (default 5) is kept, wall time and CPU time (user +
# sys of the processes started, from bash's `times`). Every answer is checked against
# git's before anything is timed.
#
# usage: bash scripts/bench-history.sh [WORK_DIR]   (default: a temp dir, removed at the end)
#   SHAPES="synthetic clone" (default) picks the histories; a WORK_DIR keeps
#   the generated repositories for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/bench-lib.sh bench-history
bench_gnu_time
# SETTINGS_IMAGE_BIN: a binary built elsewhere (a release build, to mean anything).
bench_bin "${SETTINGS_IMAGE_BIN:-}"
bench_work_in "${1:-}"
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

# The clone-shaped history (B): fast-import stream on stdout.
generate_clone() {
  python3 - <<'PY'
import random, sys
rng = random.Random(22)
out = sys.stdout
WORDS = "the settings service config deploy update fix bump version release rollout handler cache request".split()
NAMES = ["user", "order", "payment", "profile", "auth", "session", "billing", "search"]
t = 1_600_000_000
mark = 0
def commit(ref, changes, parents, msg):
    global t, mark
    mark += 1
    t += 60
    msg += "\n\n" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 150)))
    out.write("commit %s\nmark :%d\n" % (ref, mark))
    out.write("author A U Thor-%d <author%d@example.com> %d +0000\n" % (mark % 37, mark % 37, t - 3600))
    out.write("committer C O Mitter <c@example.com> %d +0000\n" % t)
    out.write("data %d\n%s\n" % (len(msg), msg))
    for i, p in enumerate(parents):
        out.write("%s :%d\n" % ("from" if i == 0 else "merge", p))
    for path, data in changes:
        out.write("M 100644 inline %s\ndata %d\n%s\n" % (path, len(data), data))
    out.write("\n")
    return mark
# services/<svc>/{Dockerfile,...,src/pkgN/[internal/]file,config/<env>/...}
services = ["svc-%03d" % i for i in range(300)]
envs = ["dev", "qa", "staging", "prod", "prod-eu"]
code, cfg = {}, {}
for s in services:
    r = random.Random(s)
    files = ["services/%s/%s" % (s, n) for n in ("Dockerfile", "README.md", "go.mod", "Makefile")]
    for p in range(r.randint(2, 6)):
        base = "services/%s/src/pkg%d" % (s, p)
        files += ["%s/%s_%s_%02d.go" % (base, r.choice(NAMES), r.choice(["handler", "service", "repository", "model"]), f)
                  for f in range(r.randint(3, 15))]
        if r.random() < 0.4:
            files += ["%s/internal/%s_%02d.go" % (base, r.choice(NAMES), f) for f in range(r.randint(2, 8))]
    code[s] = files
    for e in envs:
        f = "services/%s/config/%s" % (s, e)
        names = ["values.yaml", "kustomization.yaml"] + r.sample(["flags.json", "hpa.yaml", "secrets.enc.yaml"], r.randint(0, 2))
        if r.random() < 0.3:
            names += ["overlays/patch.yaml"]
        cfg[f] = ["%s/%s" % (f, n) for n in names]
folders = sorted(cfg)
target = "services/svc-123/config/prod"
lib = ["libs/%s/%s/file%02d.go" % (a, b, f) for a in ("auth", "db", "http", "log", "metrics", "queue")
       for b in ("core", "client", "server", "testing") for f in range(20)]
docs = ["docs/%s/page%03d.md" % (s, i) for s in ("guide", "ops", "adr") for i in range(60)]
top = ["README.md", "LICENSE", "Makefile", "go.work", ".gitignore", ".editorconfig", "CODEOWNERS",
       ".github/workflows/ci.yml", ".github/workflows/release.yml", "scripts/build.sh",
       "tools/gen/main.go", "SECURITY.md", "CONTRIBUTING.md"]
def blob(p):
    return "// %s %d\n%s" % (p, rng.randrange(1 << 30), "x" * rng.randrange(100, 400))
def edit(paths, k=3):
    return [(p, blob(p)) for p in rng.sample(paths, rng.randint(1, k))]
first = [(p, blob(p)) for p in lib + docs + top]
for s in services:
    first += [(p, blob(p)) for p in code[s]]
for f in folders:
    first += [(p, blob(p)) for p in cfg[f]]
TOTAL = 10000
LAST = TOTAL - 3500  # the measured folder's last change
tip = commit("refs/heads/main", first, [], "initial")
n = 1
others = [f for f in folders if f != target]
def change():
    r = rng.random()
    if r < 0.25:
        f = target if n < LAST and rng.random() < 0.01 else rng.choice(others)
        return edit(cfg[f], 2)
    if r < 0.80: return edit(code[rng.choice(services)])
    if r < 0.90: return edit(lib)
    if r < 0.97: return edit(docs)
    return edit(top)
while n < TOTAL:
    if n == LAST:
        tip = commit("refs/heads/main", edit(cfg[target], 2), [tip], "change %d (target)" % n)
        n += 1
        continue
    if rng.random() < 0.04 and not (LAST - 5 <= n < LAST):
        side, changed = tip, {}
        for _ in range(rng.randint(1, 3)):
            ch = change()
            changed.update(ch)
            side = commit("refs/heads/feature", ch, [side], "feature work %d" % n)
            n += 1
        for _ in range(rng.randint(0, 2)):
            tip = commit("refs/heads/main", edit(docs), [tip], "docs %d" % n)
            n += 1
        tip = commit("refs/heads/main", sorted(changed.items()), [tip, side], "merge feature %d" % n)
        n += 1
        continue
    tip = commit("refs/heads/main", change(), [tip], "change %d" % n)
    n += 1
PY
}

# seconds CMD...: "WALL CPU" of one run. CPU is the user + sys time of the
# processes it starts: bash's `times` (children, millisecond resolution),
# run in this shell (not in a `$( )` subshell) just before and after, with
# nothing else started in between.
seconds() {
  local s e
  s=$(now)
  times >"$work/.t0"
  "$@" >/dev/null
  times >"$work/.t1"
  e=$(now)
  cat "$work/.t0" "$work/.t1" | awk -v s="$s" -v e="$e" '
    NR == 2 || NR == 4 {
      c = 0
      for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); c += t[1] * 60 + t[2] }
      v[NR] = c
    }
    END { print e - s, v[4] - v[2] }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

runs=${RUNS:-5}
shapes=" ${SHAPES:-synthetic clone} "
# time_pair A B: "WALL_A CPU_A WALL_B CPU_B", medians over alternating runs
# after a warm-up.
time_pair() {
  local aw=() ac=() bw=() bc=() w c
  "$1" >/dev/null; "$2" >/dev/null
  for _ in $(seq "$runs"); do
    read -r w c < <(seconds "$1"); aw+=("$w"); ac+=("$c")
    read -r w c < <(seconds "$2"); bw+=("$w"); bc+=("$c")
  done
  echo "$(median "${aw[@]}") $(median "${ac[@]}") $(median "${bw[@]}") $(median "${bc[@]}")"
}
line() { # LABEL OURS_WALL OURS_CPU GIT_WALL GIT_CPU GOAL
  printf '%-34s ours %.3f s (cpu %.3f), git %.3f s (cpu %.3f): wall %s, cpu %s%s\n' "$1" "$2" "$3" "$4" "$5" \
    "$(ratio "$2" "$4")" "$(ratio "$3" "$5")" "$6"
}
no_graph() {
  rm -f "$1/.git/objects/info/commit-graph"
  rm -rf "$1/.git/objects/info/commit-graphs"
}

# A. The synthetic history.
if [[ $shapes == *" synthetic "* ]]; then
  if [ ! -d "$repo/.git" ]; then
    git init -q -b main "$repo"
    generate | git -C "$repo" fast-import --quiet --force
    git -C "$repo" repack -adfq
  fi
  no_graph "$repo"
  commits=$(git -C "$repo" rev-list --count HEAD)
  merges=$(git -C "$repo" rev-list --count --merges HEAD)
  echo "A. synthetic history: $commits commits ($merges merges), 50 settings folders, pack $(du -sh "$repo/.git/objects/pack" | cut -f1)"

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

  check "no commit-graph"
  read -r o1 o1c g1 g1c < <(time_pair ours_one git_one)
  read -r oa oac ga gac < <(time_pair ours_all git_all)

  # (c) A commit-graph without changed-path filters (informative).
  git -C "$repo" commit-graph write --reachable --no-changed-paths
  check "commit-graph without filters"
  read -r o1n o1nc g1n g1nc < <(time_pair ours_one git_one)

  # (b) A commit-graph with changed-path Bloom filters (what `git gc` and
  # `git maintenance` write with fetch.writeCommitGraph / --changed-paths):
  # both git and settings-image read them.
  git -C "$repo" commit-graph write --reachable --changed-paths
  check "commit-graph with filters"
  read -r o1g o1gc g1g g1gc < <(time_pair ours_one git_one)
  read -r oag oagc gag gagc < <(time_pair ours_all git_all)
  rss=$(cd "$repo" && /usr/bin/time -v "$bin" tag "${paths[@]}" --prefix main 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ { print $2 }')
  rss_git=$(/usr/bin/time -v git -C "$repo" log -1 --format=%H -- "$one" 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ { print $2 }')

  line "one folder, no commit-graph:" "$o1" "$o1c" "$g1" "$g1c" " (goal <= 1.00)"
  line "one folder, graph with filters:" "$o1g" "$o1gc" "$g1g" "$g1gc" " (goal <= 0.50)"
  line "one folder, graph without filters:" "$o1n" "$o1nc" "$g1n" "$g1nc" " (informative)"
  line "50 folders, no commit-graph:" "$oa" "$oac" "$ga" "$gac" " (50 x git log)"
  line "50 folders, graph with filters:" "$oag" "$oagc" "$gag" "$gagc" " (50 x git log; goal <= 0.10)"
  printf 'peak RSS, 50-folder walk:          %s KiB (git log -1 on one folder: %s KiB)\n' "$rss" "$rss_git"
fi

# B. The clone as CI gets it.
if [[ $shapes == *" clone "* ]]; then
  server="$work/server" clone="$work/clone"
  if [ ! -d "$clone/.git" ]; then
    rm -rf "$server" "$clone"
    git init -q -b main "$server"
    generate_clone | git -C "$server" fast-import --quiet --force
    git -C "$server" repack -adfq
    git clone -q --no-local --no-checkout "$server" "$clone"
  fi
  no_graph "$clone"
  commits=$(git -C "$clone" rev-list --count HEAD)
  merges=$(git -C "$clone" rev-list --count --merges HEAD)
  dirs=$(git -C "$clone" ls-tree -r -d HEAD | wc -l)
  echo "B. clone: $commits commits ($merges merges), $dirs folders, $(ls "$clone"/.git/objects/pack/*.pack | wc -l) pack of $(du -sh "$clone/.git/objects/pack" | cut -f1), no commit-graph"
  cone=services/svc-123/config/prod
  echo "one folder: $cone, last changed $(git -C "$clone" rev-list --count "$(git -C "$clone" log -1 --format=%H -- $cone)"..HEAD) commits before HEAD"
  ours_clone() { (cd "$clone" && "$bin" tag --path "$cone" --prefix main --json); }
  git_clone() { git -C "$clone" log -1 --format=%H -- "$cone"; }
  check_clone() {
    local want got
    want=$(git_clone)
    got=$(ours_clone | python3 -c 'import json,sys; print(json.load(sys.stdin)["commit"])')
    [ "$want" = "$got" ] || { echo "MISMATCH $cone ($1): git $want, ours $got" >&2; exit 1; }
  }
  check_clone "no commit-graph"
  read -r c1 c1c gc1 gc1c < <(time_pair ours_clone git_clone)
  git -C "$clone" commit-graph write --reachable --changed-paths
  check_clone "commit-graph with filters"
  read -r c1g c1gc gc1g gc1gc < <(time_pair ours_clone git_clone)
  no_graph "$clone"
  line "clone, one folder, no graph:" "$c1" "$c1c" "$gc1" "$gc1c" " (goal <= 1.00, aim 0.80)"
  line "clone, one folder, graph+filters:" "$c1g" "$c1gc" "$gc1g" "$gc1gc" " (informative)"
fi
echo "(medians of $runs warm runs each, alternating; cpu = user + sys)"
