#!/usr/bin/env bash
# Peak memory with one large file, where it belongs: a benchmark.
#
# A settings folder holding one file (plus a small YAML file) of each SIZE
# (default 64M 512M 2G), zeros (256 KiB in git at 2 GiB) and random (as
# large in git as on disk), published two ways:
#
#   push        `settings-image push --source commit` in the checkout, to a
#               loopback CNCF distribution registry;
#   controller  `settings-image controller` (the kube-apiserver of
#               scripts/kube.sh, Flux's GitRepository CRD written as
#               source-controller writes it) publishing the commit: the git
#               fetch from a smart-HTTP server (git http-backend behind
#               tests/support_git/serve.py) into a fresh mirror cache, the
#               build and the push. One controller process per case, run
#               with --fetch-max-bytes and --fetch-max-object-bytes of
#               3 GiB (the defaults refuse a file above 100 MiB) and
#               stopped with SIGTERM once the SettingsImage is Ready for
#               the commit.
#
# Each figure is GNU time -v's "Maximum resident set size" of that one
# process (the kernel's peak resident set, file pages included). The peer
# for scale: `git` itself (`git cat-file blob` of the file, streamed to
# /dev/null).
#
# Usage: scripts/bench-large-files.sh [SIZE...]     (SIZE as head -c takes it)
#   SETTINGS_IMAGE_BIN=PATH  the binary (default: cargo build --release)
#   BEFORE_BIN=PATH          an older build: `push` measured with it too
#                            (the controller of an older build needs the
#                            same flags; it is not run)
# Needs: docker-registry git python3 etcd curl, GNU time (and what scripts/kube.sh needs).
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root=$PWD
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64M 512M 2G)

. scripts/bench-lib.sh bench-large-files
bench_need docker-registry git python3 etcd curl
gnu_time=/usr/bin/time
"$gnu_time" -v true 2>&1 | grep -q "Maximum resident set size" || { echo "bench-large-files: GNU time (/usr/bin/time) is missing: run scripts/deps.sh" >&2; exit 1; }
bench_bin "${SETTINGS_IMAGE_BIN:-}"
before="${BEFORE_BIN:-}"

bench_work
# GNU time's peak resident set (KiB) in report $1, as MiB with one decimal.
peak_mib() { awk -F: '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$1"; }

# --- the API server, Flux's GitRepository CRD, ours
bench_kube_up
kubectl create namespace bench >/dev/null

# --- the registry
reg_port="$(free_port)"
bench_registry "127.0.0.1:$reg_port" --delete
reg="127.0.0.1:$reg_port"
for _ in $(seq 200); do curl -sf "http://$reg/v2/" >/dev/null && break; sleep 0.05; done

# --- the git server
mkdir -p "$work/srv"
python3 tests/support_git/serve.py --root "$work/srv" --log "$work/git.log" > "$work/git.port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/git.port" ] && break; sleep 0.05; done
git_base="http://127.0.0.1:$(head -1 "$work/git.port")"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

# ready REVISION: the SettingsImage `big` is Ready for REVISION (prints the
# Ready condition's status and message otherwise).
ready() {
  kubectl get settingsimage big -n bench -o json | python3 -c '
import json, sys
s = json.load(sys.stdin).get("status", {})
ready = [c for c in s.get("conditions", []) if c["type"] == "Ready"]
ok = s.get("lastHandledRevision") == sys.argv[1] and ready and ready[0]["status"] == "True"
print("ok" if ok else (ready[0]["status"] + ": " + ready[0].get("message", "") if ready else "none"))' "$1"
}

rows=()
for size in "${sizes[@]}"; do
  for content in zeros random; do
    case_name="$(echo "$size-$content" | tr 'A-Z' 'a-z')"
    src=/dev/zero; [ "$content" = random ] && src=/dev/urandom
    # The repository: one commit, the folder configs/big.
    git init -q --bare -b main "$work/srv/$case_name.git"
    git clone -q "$work/srv/$case_name.git" "$work/up" 2>/dev/null
    mkdir -p "$work/up/configs/big"
    head -c "$size" "$src" > "$work/up/configs/big/big.bin"
    echo "port: 8080" > "$work/up/configs/big/app.yaml"
    git -C "$work/up" add -A
    git -C "$work/up" commit -q -m "one large file"
    git -C "$work/up" push -q origin HEAD:main
    commit="$(git -C "$work/up" rev-parse HEAD)"
    bytes="$(stat -c %s "$work/up/configs/big/big.bin")"
    in_git="$(du -sk "$work/srv/$case_name.git/objects" | cut -f1)"

    # The peer: git streaming the blob out.
    "$gnu_time" -v -o "$work/time.git" git -C "$work/up" cat-file blob "HEAD:configs/big/big.bin" > /dev/null
    git_peak="$(peak_mib "$work/time.git")"

    # push --source commit, in the checkout.
    (cd "$work/up" && "$gnu_time" -v -o "$work/time.push" "$bin" push --path configs/big --source commit \
      --repository "$reg/push-$case_name" --tag big --no-provenance > "$work/push.out" 2>&1) \
      || { cat "$work/push.out" >&2; exit 1; }
    push_peak="$(peak_mib "$work/time.push")"
    before_peak="-"
    if [ -n "$before" ]; then
      (cd "$work/up" && "$gnu_time" -v -o "$work/time.before" "$before" push --path configs/big --source commit \
        --repository "$reg/before-$case_name" --tag big --no-provenance > "$work/before.out" 2>&1) \
        || { cat "$work/before.out" >&2; exit 1; }
      before_peak="$(peak_mib "$work/time.before")"
    fi

    # The controller: a fresh one, a fresh mirror cache.
    "$gnu_time" -v -o "$work/time.controller" "$bin" controller --kubeconfig "$KUBECONFIG" --namespace bench \
      --metrics-bind-address 0 --health-probe-bind-address 0 --cache-dir "$work/cache" \
      --fetch-max-bytes $((3 << 30)) --fetch-max-object-bytes $((3 << 30)) 2> "$work/controller.log" &
    time_pid=$!
    # GNU time's child, the controller: what SIGTERM goes to (GNU time
    # reports once it exits).
    ctl_pid=""
    for _ in $(seq 200); do ctl_pid="$(pgrep -P "$time_pid" || true)"; [ -n "$ctl_pid" ] && break; sleep 0.05; done
    [ -n "$ctl_pid" ] || { echo "bench-large-files: the controller did not start" >&2; exit 1; }
    pids+=("$ctl_pid")
    cat <<EOF | kubectl apply -f - >/dev/null
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: big, namespace: bench}
spec: {interval: 1h, url: "$git_base/$case_name.git", ref: {branch: main}}
---
apiVersion: settings-image.configbutler.io/v1alpha1
kind: SettingsImage
metadata: {name: big, namespace: bench}
spec:
  sourceRef: {kind: GitRepository, name: big}
  path: configs/big
  repository: $reg/controller-$case_name
  timestampTag: main
  provenance: false
EOF
    kubectl patch gitrepository big -n bench --subresource=status --type=merge \
      -p "{\"status\":{\"artifact\":{\"revision\":\"main@sha1:$commit\",\"digest\":\"sha256:$(printf '0%.0s' $(seq 64))\",\"path\":\"x\",\"url\":\"http://source-controller/x\",\"lastUpdateTime\":\"2026-01-01T00:00:00Z\"}}}" >/dev/null
    state=""
    for _ in $(seq 3600); do
      state="$(ready "main@sha1:$commit")"
      [ "$state" = ok ] && break
      kill -0 "$ctl_pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -TERM "$ctl_pid" 2>/dev/null || true
    wait "$time_pid" 2>/dev/null || true
    if [ "$state" != ok ]; then
      echo "bench-large-files: the controller did not publish $case_name: $state" >&2
      tail -5 "$work/controller.log" >&2
      exit 1
    fi
    ctl_peak="$(peak_mib "$work/time.controller")"
    kubectl delete settingsimage big -n bench --wait=true >/dev/null
    kubectl delete gitrepository big -n bench --wait=true >/dev/null

    in_git_shown="$in_git KiB"; [ "$in_git" -ge 10240 ] && in_git_shown="$(( in_git >> 10 )) MiB"
    rows+=("$(printf '| %s | %s | %s MiB | %s | %s | %s | %s |' "$size" "$content" "$(( bytes >> 20 ))" "$in_git_shown" "$push_peak" "$ctl_peak" "$git_peak")")
    [ -n "$before" ] && rows[-1]+=" $before_peak |"
    echo "${rows[-1]}"
    # Free the disk before the next case.
    rm -rf "$work/up" "$work/cache" "$work/srv/$case_name.git" "$work/registry/docker/registry/v2/blobs"
  done
done

echo
echo "Peak resident set (MiB, GNU time -v) of one process, one file of each size in configs/big:"
header="| size | content | file | in git | push --source commit | controller (fetch + build + push) | git cat-file (peer) |"
[ -n "$before" ] && header+=" push, BEFORE_BIN |"
echo "$header"
echo "$header" | sed 's/[^|]/-/g; s/--*/---/g'
printf '%s\n' "${rows[@]}"
