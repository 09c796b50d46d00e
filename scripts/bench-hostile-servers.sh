#!/usr/bin/env bash
# Peak memory of the controller against servers that never stop sending
# (issue 39: an endless git ref advertisement; a tag list that pages for
# ever): a benchmark, before and after.
#
# Cases (CASES, default all five):
#   refs-v1       a git server speaking protocol v1 whose info/refs lists
#                 new branches without end
#   refs-v2       a v2 git server whose ls-refs answer never ends
#   acks          a v2 git server whose negotiation (acknowledgments) never
#                 ends            (all three: tests/support_git/hostile_pack.py)
#   tags-endless  a registry whose tags/list pages never end: 600,000 new
#                 tags a page, `Link: rel=next` to a new URL
#   tags-loop     1,000 new tags a page, the `Link` naming the same URL
#                 again (both: tests/support_registry/endless_tags.py; the
#                 GitRepository is a real git server, git http-backend)
#
# For each case and each binary (BEFORE_BIN, an older build such as main's,
# then the one under test), one fresh `settings-image controller` (the
# kube-apiserver of scripts/kube.sh, Flux's GitRepository CRD written as
# source-controller writes it, default flags). Its resident set is read
# from /proc every 0.2 s (VmHWM: the kernel's peak) until the SettingsImage
# reports the failure, or the controller passes CAP_MIB (default 1024,
# twice the 512Mi limit config/manager gives it) and is killed, or 60 s
# pass. Printed: the peak, how long it took, and what the SettingsImage said.
#
# Usage: scripts/bench-hostile-servers.sh
#   SETTINGS_IMAGE_BIN=PATH  the binary (default: cargo build --release)
#   BEFORE_BIN=PATH          an older build to measure first (optional)
#   CAP_MIB=N                the memory at which a controller is killed
#   CASES="refs-v1 tags-loop"  a subset
# Needs: git python3 etcd curl (and what scripts/kube.sh needs).
set -euo pipefail
cd "$(dirname "$0")/.."
cases=(${CASES:-refs-v1 refs-v2 acks tags-endless tags-loop})
cap_mib="${CAP_MIB:-1024}"

. scripts/bench-lib.sh bench-hostile-servers
bench_need git python3 etcd curl
bench_bin "${SETTINGS_IMAGE_BIN:-}"
bins=()
[ -n "${BEFORE_BIN:-}" ] && bins+=("before=$BEFORE_BIN")
bins+=("after=$bin")

bench_work
# The port a helper prints on its first line, once it is there.
port_of() { for _ in $(seq 200); do [ -s "$1" ] && { head -1 "$1"; return; }; sleep 0.05; done; echo "bench-hostile-servers: $1 never got a port" >&2; exit 1; }

# --- the API server, Flux's GitRepository CRD, ours
bench_kube_up

# --- a real git server with one commit (for the tag-list cases)
mkdir -p "$work/srv"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
git init -q --bare -b main "$work/srv/settings.git"
git clone -q "$work/srv/settings.git" "$work/up" 2>/dev/null
mkdir -p "$work/up/app" && echo "a: 1" > "$work/up/app/a.yaml"
git -C "$work/up" add -A && git -C "$work/up" commit -q -m settings && git -C "$work/up" push -q origin HEAD:main
real_commit="$(git -C "$work/up" rev-parse HEAD)"
python3 tests/support_git/serve.py --root "$work/srv" --log "$work/git.log" > "$work/git.port" &
pids+=($!)
real_git="http://127.0.0.1:$(port_of "$work/git.port")/settings.git"

# The Ready condition of SettingsImage app in $1: "STATUS REASON: MESSAGE".
ready() {
  kubectl get settingsimage app -n "$1" -o json 2>/dev/null | python3 -c '
import json, sys
c = [c for c in json.load(sys.stdin).get("status", {}).get("conditions", []) if c["type"] == "Ready"]
print("%s %s: %s" % (c[0]["status"], c[0]["reason"], c[0]["message"]) if c else "")' || true
}

rows=()
n=0
for case in "${cases[@]}"; do
  for pair in "${bins[@]}"; do
    which="${pair%%=*}"; b="${pair#*=}"
    n=$((n + 1)); ns="bench-$n"
    kubectl create namespace "$ns" >/dev/null
    # The hostile server, fresh for each run.
    case "$case" in
      refs-v1|refs-v2|acks)
        mode=endless-v1-refs; [ "$case" = refs-v2 ] && mode=endless-ls-refs; [ "$case" = acks ] && mode=endless-acks
        python3 tests/support_git/hostile_pack.py --mode "$mode" --log "$work/hostile-$n.log" \
          > "$work/hostile-$n.port" 2> "$work/hostile-$n.err" &
        server=$!
        url="http://127.0.0.1:$(port_of "$work/hostile-$n.port")/settings.git"
        commit="$(printf '1%.0s' $(seq 40))"
        repository="127.0.0.1:9/app"
        ;;
      tags-endless|tags-loop)
        per_page=600000; [ "$case" = tags-loop ] && per_page=1000
        python3 tests/support_registry/endless_tags.py --mode "${case#tags-}" --tags-per-page "$per_page" \
          > "$work/registry-$n.port" 2> "$work/registry-$n.err" &
        server=$!
        url="$real_git"; commit="$real_commit"
        repository="127.0.0.1:$(port_of "$work/registry-$n.port")/app"
        ;;
      *) echo "bench-hostile-servers: unknown case $case" >&2; exit 1 ;;
    esac
    pids+=("$server")
    cat <<EOF | kubectl apply -f - >/dev/null
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: settings, namespace: $ns}
spec: {interval: 1h, url: "$url", ref: {branch: main}}
---
apiVersion: settings-image.configbutler.io/v1alpha1
kind: SettingsImage
metadata: {name: app, namespace: $ns}
spec:
  sourceRef: {kind: GitRepository, name: settings}
  path: app
  repository: $repository
  provenance: false
EOF
    kubectl patch gitrepository settings -n "$ns" --subresource=status --type=merge \
      -p "{\"status\":{\"artifact\":{\"revision\":\"main@sha1:$commit\",\"digest\":\"sha256:$(printf '0%.0s' $(seq 64))\",\"path\":\"x\",\"url\":\"http://source-controller/x\",\"lastUpdateTime\":\"2026-01-01T00:00:00Z\"}}}" >/dev/null
    "$b" controller --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-bind-address 0 \
      --health-probe-bind-address 0 --cache-dir "$work/cache-$n" 2> "$work/controller-$n.log" &
    ctl=$!
    pids+=("$ctl")
    started=$(date +%s.%N)
    peak=0; outcome="still growing after 60 s"
    deadline=$((SECONDS + 60)); i=0
    while [ "$SECONDS" -lt "$deadline" ]; do
      i=$((i + 1))
      kb="$(awk '/^VmHWM/ {print $2}' "/proc/$ctl/status" 2>/dev/null || echo "")"
      [ -n "$kb" ] || { outcome="the controller exited: $(tail -1 "$work/controller-$n.log")"; break; }
      peak=$kb
      if [ "$kb" -gt $((cap_mib * 1024)) ]; then
        kill -KILL "$ctl" 2>/dev/null || true
        outcome="passed $cap_mib MiB: killed"
        break
      fi
      if [ $((i % 5)) -eq 0 ]; then
        state="$(ready "$ns")"
        case "$state" in
          "False GitOperationFailed"*|"False RegistryOperationFailed"*|"False GitAuthentication"*|"True"*) outcome="$state"; break ;;
        esac
      fi
      sleep 0.2
    done
    seconds="$(echo "$(date +%s.%N) - $started" | bc)"
    kill -TERM "$ctl" 2>/dev/null || true; wait "$ctl" 2>/dev/null || true
    kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true
    rm -rf "$work/cache-$n"
    rows+=("$(printf '| %s | %s | %.1f MiB | %.1f s | %s |' "$case" "$which" "$(echo "$peak / 1024" | bc -l)" "$seconds" "${outcome:0:220}")")
    echo "${rows[-1]}"
  done
done

echo
echo "Peak resident set of the controller (VmHWM), each case a fresh process; killed past $cap_mib MiB:"
echo "| case | binary | peak | time | the SettingsImage's Ready condition |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
