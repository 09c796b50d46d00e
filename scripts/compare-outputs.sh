#!/usr/bin/env bash
# Runs two builds of settings-image through the same set of runs and
# compares what each printed, byte for byte: stdout, stderr and the exit
# code of `build`, `push`, `tag` and `plan` (one folder, several folders,
# a re-push, the error paths the tests exercise), and of the action
# (`settings-image action`: its stdout of workflow commands, exit code,
# `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY`).
#
#   scripts/compare-outputs.sh OLD_BIN NEW_BIN [OUT_DIR]
#
# For a refactor that must not change what a user sees: build the old
# binary first (e.g. `git worktree add /tmp/old COMMIT && cargo build` in
# it, or copy target/debug/settings-image away before the change). Each
# binary gets the same scratch repository (fixed commit times), a fresh
# docker-registry (Debian's `docker-registry`, as the tests use) on the
# same port, and the same folders, so any difference is the binary's.
# Exits 0 when every run printed the same, 1 otherwise, after listing the
# runs that differ and a unified diff of each (OUT_DIR keeps both sides;
# default a temporary folder).
set -euo pipefail

die() { echo "compare-outputs.sh: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: scripts/compare-outputs.sh OLD_BIN NEW_BIN [OUT_DIR]"
OLD=$(readlink -f "$1"); NEW=$(readlink -f "$2")
[ -x "$OLD" ] || die "$1 is not an executable"
[ -x "$NEW" ] || die "$2 is not an executable"
command -v docker-registry >/dev/null || die "docker-registry is missing (bash scripts/deps.sh installs it)"
command -v git >/dev/null || die "git is missing"
OUT=${3:-$(mktemp -d /tmp/compare-outputs.XXXXXX)}
rm -rf "$OUT/old" "$OUT/new"
mkdir -p "$OUT"
# Every path a run prints is under $WORK, the same for both binaries.
WORK=/tmp/compare-outputs-work
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
CLOSED=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
REG="127.0.0.1:$PORT"
REG_PID=

stop_registry() {
  if [ -n "$REG_PID" ]; then kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; fi
  REG_PID=
}
trap 'stop_registry; rm -rf "$WORK"' EXIT

start_registry() {
  mkdir -p "$WORK/registry"
  cat >"$WORK/registry/config.yml" <<EOF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $WORK/registry/data
  delete:
    enabled: true
http:
  addr: $REG
EOF
  docker-registry serve "$WORK/registry/config.yml" >"$WORK/registry/log" 2>&1 &
  REG_PID=$!
  for _ in $(seq 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return; fi
    sleep 0.05
  done
  die "docker-registry did not listen on $REG"
}

# The scratch repository: three folders (one with capitals), committed at
# fixed times, plus an untracked one and a folder outside git.
make_repo() {
  local r=$WORK/repo
  mkdir -p "$r/configs/shop" "$r/configs/billing" "$r/configs/Cart"
  git -C "$r" init -q -b main
  git -C "$r" config user.email t@example.com
  git -C "$r" config user.name t
  printf 'name: shop\n' >"$r/configs/shop/app.yaml"
  printf 'name: billing\n' >"$r/configs/billing/app.yaml"
  printf 'name: cart\n' >"$r/configs/Cart/app.yaml"
  git -C "$r" add -A
  GIT_COMMITTER_DATE='@1700000000 +0000' GIT_AUTHOR_DATE='@1700000000 +0000' git -C "$r" commit -q -m one
  printf 'name: shop\nreplicas: 2\n' >"$r/configs/shop/app.yaml"
  git -C "$r" add -A
  GIT_COMMITTER_DATE='@1700000100 +0000' GIT_AUTHOR_DATE='@1700000100 +0000' git -C "$r" commit -q -m two
  git -C "$r" remote add origin https://github.com/acme/settings.git
  mkdir -p "$r/drafts/new" "$WORK/outside"
  printf 'name: draft\n' >"$r/drafts/new/app.yaml"
  printf 'a: 1\n' >"$WORK/outside/a.yaml"
  # A file in the folder that is not committed, for --source worktree.
  mkdir -p "$WORK/wt"
  cp -a "$r/." "$WORK/wt/"
  printf 'name: shop\nreplicas: 3\n' >"$WORK/wt/configs/shop/app.yaml"
  # An event payload for the action (a push of main).
  printf '{"ref":"refs/heads/main","forced":false,"before":"%040d"}\n' 0 >"$WORK/push.json"
  # A pull request whose head is the first commit (an older one).
  printf '{"pull_request":{"head":{"sha":"%s"}}}\n' "$(git -C "$r" rev-parse HEAD~1)" >"$WORK/pull_request.json"
}

CASE=0
# cli NAME ARGS...: one CLI run in the repository.
cli() {
  local name=$1; shift
  local d="$OUT/$SIDE/$(printf '%03d' $CASE)-$name"; CASE=$((CASE + 1))
  mkdir -p "$d"
  local rc=0
  (cd "$DIR" && env -i HOME="$WORK/home" PATH=/usr/bin:/bin LANG=C.UTF-8 $EXTRA_ENV "$BIN" "$@" \
    </dev/null >"$d/stdout" 2>"$d/stderr") || rc=$?
  echo "$rc" >"$d/exit"
}

# action NAME INPUT=VALUE...: one action run in the repository as the
# runner runs it (the workspace the working directory).
action() {
  local name=$1; shift
  local d="$OUT/$SIDE/$(printf '%03d' $CASE)-action-$name"; CASE=$((CASE + 1))
  mkdir -p "$d"
  : >"$WORK/output"; : >"$WORK/summary"
  local inputs=() kv
  for kv in "$@"; do
    local k=${kv%%=*} v=${kv#*=}
    inputs+=("INPUT_$(echo "$k" | tr 'a-z' 'A-Z')=$v")
  done
  local rc=0
  (cd "$DIR" && env -i HOME="$WORK/home" PATH=/usr/bin:/bin LANG=C.UTF-8 \
    GITHUB_ACTIONS=true GITHUB_WORKSPACE="$DIR" GITHUB_OUTPUT="$WORK/output" \
    GITHUB_STEP_SUMMARY="$WORK/summary" GITHUB_EVENT_NAME="${EVENT:-push}" GITHUB_EVENT_PATH="$WORK/${EVENT:-push}.json" \
    GITHUB_REF=refs/heads/main GITHUB_REPOSITORY=acme/settings GITHUB_SERVER_URL=https://github.com \
    GITHUB_RUN_ID=7 GITHUB_RUN_ATTEMPT=1 GITHUB_API_URL=http://127.0.0.1:9 \
    "${inputs[@]}" "$BIN" action </dev/null >"$WORK/stdout" 2>"$d/stderr") || rc=$?
  echo "$rc" >"$d/exit"
  # A dry run builds into a temporary folder of a random name.
  sed -E 's#/tmp/\.tmp[A-Za-z0-9]{6}#/tmp/.tmpRANDOM#g' "$WORK/stdout" >"$d/stdout"
  # The heredoc delimiters are random per run.
  sed -E 's/ghadelimiter_[0-9a-f]+/ghadelimiter_RANDOM/' "$WORK/output" >"$d/GITHUB_OUTPUT"
  cp "$WORK/summary" "$d/GITHUB_STEP_SUMMARY"
}

runs() {
  DIR=$WORK/repo EXTRA_ENV=
  local R=$REG/acme
  # build: one folder, several, errors.
  cli build-one build --path configs/shop --output "$WORK/out/one" --timestamp-tag main
  cli build-one-json build --path configs/shop --output "$WORK/out/one" --timestamp-tag main --json
  cli build-several build --path 'configs/*' --output "$WORK/out/{name}" --timestamp-tag main
  cli build-several-json build --path configs/shop --path configs/billing --output "$WORK/out/{path}" --tag v1 --json
  cli build-missing build --path configs/missing --output "$WORK/out/x" --timestamp-tag main
  cli build-untracked build --path drafts/new --output "$WORK/out/x" --timestamp-tag main
  cli build-outside-git build --path "$WORK/outside" --output "$WORK/out/x" --timestamp-tag main
  cli build-bad-tag build --path configs/shop --output "$WORK/out/x" --tag 'bad tag'
  cli build-branch-tag build --path configs/shop --output "$WORK/out/x" --timestamp-tag main --branch-tag main 
  cli build-bad-prefix build --path configs/shop --output "$WORK/out/x" --timestamp-tag '-'
  cli build-layout-inside build --path configs/shop --output configs/shop/layout --tag v1 --source worktree
  cli build-same-output build --path 'configs/*' --output "$WORK/out/same" --tag v1
  cli build-glob-none build --path 'nothing/*' --output "$WORK/out/{name}" --tag v1
  cli build-twice build --path 'configs/*' --path configs/shop --output "$WORK/out/{name}" --tag v1
  cli build-empty-path build --path '' --output "$WORK/out/x" --tag v1
  cli build-several-failing build --path configs/shop --path drafts/new --output "$WORK/out/{name}" --timestamp-tag main
  cli build-tag-shaped build --path configs/shop --output "$WORK/out/ts" --tag main-1700000000-abcdef0
  cli build-bad-source-url build --path configs/shop --output "$WORK/out/x" --tag v1 --source-url 'ftp://x'
  # push: one folder, a re-push, several, errors.
  cli push-one push --path configs/shop --repository "$R/shop" --timestamp-tag main --branch-tag latest
  cli push-again push --path configs/shop --repository "$R/shop" --timestamp-tag main --branch-tag latest
  cli push-again-json push --path configs/shop --repository "$R/shop" --timestamp-tag main --json
  cli push-no-provenance push --path configs/billing --repository "$R/billing-np" --tag v1 --no-provenance
  cli push-several push --path 'configs/*' --repository "$R/s/{name}" --timestamp-tag main
  cli push-several-again-json push --path 'configs/*' --repository "$R/s/{name}" --timestamp-tag main --json
  cli push-several-failing push --path 'configs/*' --path drafts/new --repository "$R/f/{path}" --timestamp-tag main --json
  cli push-several-same push --path 'configs/*' --repository "$R/same" --timestamp-tag main
  cli push-several-upper push --path configs/shop --path configs/billing --repository "$REG/Acme/{name}" --timestamp-tag main
  cli push-upper push --path configs/shop --repository "$REG/Acme/shop" --timestamp-tag main
  cli push-with-tag push --path configs/shop --repository "$R/shop:v1" --timestamp-tag main
  cli push-scheme push --path configs/shop --repository "http://$R/shop" --timestamp-tag main
  cli push-allow-rewind push --path configs/shop --repository "$R/shop" --timestamp-tag main --allow-rewind
  cli push-branch-no-ts push --path configs/shop --repository "$R/shop" --tag v1 --branch-tag main
  cli push-branch-is-ts push --path configs/shop --repository "$R/shop" --timestamp-tag main --branch-tag main-1700000000-abcdef0
  cli push-forced-bad push --path configs/shop --repository "$R/shop" --timestamp-tag main --branch-tag latest --force-pushed-from HEAD
  cli push-closed push --path configs/shop --repository "127.0.0.1:$CLOSED/acme/shop" --timestamp-tag main
  cli push-login-bad push --path configs/shop --repository "$R/shop" --timestamp-tag main --login vault
  cli push-login-ecr push --path configs/shop --repository "$R/shop" --timestamp-tag main --login ecr
  cli push-login-github push --path configs/shop --repository "$R/shop" --timestamp-tag main --login github
  cli push-login-password push --path configs/shop --repository "$R/shop" --timestamp-tag main --login password
  cli push-fact-elsewhere push --path configs/shop --repository "$R/shop" --timestamp-tag main --aws-role-arn arn:aws:iam::1:role/r
  cli push-facts-several push --path configs/shop --repository "$R/shop" --timestamp-tag main --aws-role-arn arn:aws:iam::1:role/r --azure-client-id c
  cli push-fact-no-value push --path configs/shop --repository "$R/shop" --timestamp-tag main --aws-region
  EXTRA_ENV="SETTINGS_IMAGE_USERNAME=u" cli push-half-user push --path configs/shop --repository "$R/shop" --timestamp-tag main
  EXTRA_ENV="SETTINGS_IMAGE_PUSH_TIMEOUT=15m" cli push-bad-deadline push --path configs/shop --repository "$R/shop" --timestamp-tag main
  EXTRA_ENV=
  cli push-missing push --path configs/missing --repository "$R/shop" --timestamp-tag main
  cli push-untracked push --path drafts/new --repository "$R/shop" --timestamp-tag main
  cli push-outside-git push --path "$WORK/outside" --repository "$R/outside" --timestamp-tag main
  cli push-outside-git-tag push --path "$WORK/outside" --repository "$R/outside" --tag v1
  # An older commit after a newer one: an anomaly and a branch tag kept;
  # a force-push that dropped the newer one, without and with a rewind.
  local newer older; newer=$(git -C "$WORK/repo" rev-parse HEAD); older=$(git -C "$WORK/repo" rev-parse HEAD~1)
  cli push-older push --path configs/shop --repository "$R/shop" --timestamp-tag main --branch-tag latest --revision "$older"
  cli push-older-json push --path configs/shop --repository "$R/shop" --timestamp-tag main --branch-tag latest --revision "$older" --json
  cli push-forced push --path configs/shop --repository "$R/shop" --timestamp-tag main --branch-tag latest --revision "$older" --force-pushed-from "$newer"
  cli push-forced-rewind push --path configs/shop --repository "$R/shop2" --timestamp-tag main --branch-tag latest
  cli push-forced-rewind2 push --path configs/shop --repository "$R/shop2" --timestamp-tag main --branch-tag latest --revision "$older" --allow-rewind
  cli push-several-older push --path 'configs/*' --repository "$R/s/{name}" --timestamp-tag main --branch-tag latest --revision "$older"
  # The reading commands and promote: their words live in show/. (A
  # promotion that writes is left out: its record holds the wall clock.)
  cli inspect-one inspect "$R/shop:latest"
  cli inspect-one-json inspect "$R/shop:latest" --json
  cli diff-one diff "$R/shop:latest" --path configs/shop --revision "$newer"
  cli diff-one-json diff "$R/shop:latest" --path configs/shop --revision "$newer" --json
  cli promote-explain promote --repository "$R/shop" --from main --to prod --explain --at 2026-12-01T10:00:00Z
  cli promote-no-reason promote --repository "$R/shop" --from main --to prod --force
  cli promote-reason-only promote --repository "$R/shop" --from main --to prod --reason why
  # tag and plan: one folder, several.
  cli tag-one tag --path configs/shop --prefix main
  cli tag-one-json tag --path configs/shop --prefix main --json
  cli tag-several tag --path 'configs/*' --prefix main
  cli tag-several-json tag --path 'configs/*' --path drafts/new --prefix main --json
  cli tag-bad-prefix tag --path configs/shop --prefix 'feat/x'
  cli plan plan --path 'configs/*' --repository "$R/s/{name}" --timestamp-tag main
  cli plan-json plan --path 'configs/*' --repository "$R/p/{name}" --timestamp-tag main --json
  cli plan-same plan --path 'configs/*' --repository "$R/same" --timestamp-tag main
  # From a worktree that differs from its commit: warnings, and a
  # timestamp tag that already names other content.
  DIR=$WORK/wt
  cli push-worktree push --path configs/shop --repository "$R/shop" --timestamp-tag main --source worktree
  cli push-worktree-json push --path configs/shop --repository "$R/wt" --tag v1 --source worktree --json
  cli build-worktree build --path configs/shop --output "$WORK/out/wt" --tag v1 --source worktree
  # The action: one folder, a re-push, a dry run, several, the plan, errors.
  DIR=$WORK/repo
  action one path=configs/shop repository="$R/act" timestamp-tag=main branch-tag=latest github-token=ghs_x
  action again path=configs/shop repository="$R/act" timestamp-tag=main branch-tag=latest github-token=ghs_x
  action dry-run path=configs/billing repository="$R/act-dry" timestamp-tag=main push=false
  action several path='configs/*' repository="$R/act/{name}" timestamp-tag=main
  action several-again path='configs/*' repository="$R/act/{name}" timestamp-tag=main
  action several-lines "path=configs/shop
configs/billing" repository="$R/act2/{path}" timestamp-tag=main
  action several-failing "path=configs/*
drafts/new" repository="$R/actf/{name}" timestamp-tag=main
  action several-dry-run path='configs/*' repository="$R/act/{name}" timestamp-tag=main push=false
  action plan path='configs/*' repository="$R/actp/{name}" timestamp-tag=main plan=true
  action plan-no-prefix path='configs/*' repository="$R/actp/{name}" tags=v1 plan=true
  EVENT=pull_request action older path=configs/shop repository="$R/act" timestamp-tag=main branch-tag=latest
  EVENT=pull_request action several-older path='configs/*' repository="$R/act/{name}" timestamp-tag=main branch-tag=latest
  action upper path=configs/shop repository="$REG/Acme/act-upper" timestamp-tag=main
  action several-upper path='configs/*' repository="$REG/Acme/{name}" timestamp-tag=main
  action no-path repository="$R/act" timestamp-tag=main
  action no-repository path=configs/shop timestamp-tag=main
  action no-tag path=configs/shop repository="$R/act"
  action bad-bool path=configs/shop repository="$R/act" timestamp-tag=main summary=yes
  action leaves-workspace path=../x repository="$R/act" timestamp-tag=main
  action missing path=configs/missing repository="$R/act" timestamp-tag=main
  action untracked path=drafts/new repository="$R/act" timestamp-tag=main
  action bad-annotation path=configs/shop repository="$R/act" timestamp-tag=main annotations=nokey
  action bad-jobs path='configs/*' repository="$R/act/{name}" timestamp-tag=main jobs=0
  action bad-mode path=configs/shop repository="$R/act" timestamp-tag=main mode=explode
  action bad-source path=configs/shop repository="$R/act" timestamp-tag=main source=disk
  action allow-rewind path=configs/shop repository="$R/act" timestamp-tag=main allow-rewind=true
  action with-tag path=configs/shop repository="$R/act:v1" timestamp-tag=main
  action login-bad path=configs/shop repository="$R/act" timestamp-tag=main login=vault
  action login-password path=configs/shop repository="$R/act" timestamp-tag=main login=password
  action login-password-no-user path=configs/shop repository="$R/act" timestamp-tag=main password=p
  action login-ecr path=configs/shop repository="$R/act" timestamp-tag=main login=ecr
  action login-github-elsewhere path=configs/shop repository="$R/act" timestamp-tag=main login=github github-token=ghs_x
  action login-github-no-token path=configs/shop repository=ghcr.io/acme/act timestamp-tag=main login=github
  action fact-elsewhere path=configs/shop repository="$R/act" timestamp-tag=main aws-role-arn=arn:aws:iam::1:role/r
  action facts-several path=configs/shop repository="$R/act" timestamp-tag=main aws-role-arn=arn:aws:iam::1:role/r azure-client-id=c
  action closed path=configs/shop repository="127.0.0.1:$CLOSED/acme/act" timestamp-tag=main
  action same-repository path='configs/*' repository="$R/act-same" timestamp-tag=main
  DIR=$WORK/wt
  action worktree path=configs/shop repository="$R/act-wt" tags=v1 source=worktree
}

for SIDE in old new; do
  rm -rf "$WORK"; mkdir -p "$WORK/home" "$WORK/out"
  make_repo
  start_registry
  # One name for both: clap's usage lines print it.
  mkdir -p "$WORK/bin"; BIN=$WORK/bin/settings-image
  if [ "$SIDE" = old ]; then cp "$OLD" "$BIN"; else cp "$NEW" "$BIN"; fi
  CASE=0
  runs
  stop_registry
done

differ=0
for d in "$OUT"/old/*/; do
  n=$(basename "$d")
  for f in "$d"*; do
    b=$(basename "$f")
    if ! cmp -s "$f" "$OUT/new/$n/$b"; then
      differ=$((differ + 1))
      echo "=== $n/$b"
      diff -u --label "old/$n/$b" --label "new/$n/$b" "$f" "$OUT/new/$n/$b" || true
    fi
  done
done
runs=$(find "$OUT/old" -mindepth 1 -maxdepth 1 -type d | wc -l)
if [ "$differ" -eq 0 ]; then
  echo "compare-outputs.sh: $runs runs, every output the same ($OUT)"
else
  echo "compare-outputs.sh: $runs runs, $differ outputs differ ($OUT)"
  exit 1
fi
