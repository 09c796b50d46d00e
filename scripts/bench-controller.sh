#!/usr/bin/env bash
# The controller's speed and memory against real things: the kube-apiserver
# of scripts/kube.sh (v1.36.3, etcd), Flux's GitRepository CRD, a loopback CNCF
# distribution registry and a smart-HTTP git server (git http-backend behind
# tests/support_git/serve.py).
#
# 1. Latency: a 50-file settings folder; each round commits a change to one
#    file, pushes it to the git server, writes the GitRepository's
#    status.artifact.revision as source-controller does (one PATCH to the
#    API server), and times until the new timestamp tag is in the registry
#    (polled every 10 ms through the registry's API). p50 and p90 of ROUNDS.
#    Goal: p50 <= 1 s. For scale: a GitHub-hosted runner's job takes tens of
#    seconds before the first step runs (queue, VM, checkout).
# 2. Memory: the controller's resident set (VmRSS) idle with one
#    SettingsImage, then with 100 SettingsImages (each its own repository,
#    all published), then after each of REVISIONS new revisions (default 5)
#    that all of them publish; and the peak (VmHWM).
#
# Usage: scripts/bench-controller.sh [ROUNDS]   (default 20; SETTINGS_IMAGE_BIN=PATH
# uses that binary instead of building target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-20}"
# REVISIONS: how many new revisions all 101 SettingsImages publish, one
# after another, for the memory figures (default 5).
revisions="${REVISIONS:-5}"

. scripts/bench-lib.sh bench-controller
bench_need docker-registry git python3 etcd curl
# SETTINGS_IMAGE_BIN: a release binary built elsewhere (else one is built).
bench_bin "${SETTINGS_IMAGE_BIN:-}"

bench_work

# --- the API server, Flux's GitRepository CRD, ours
bench_kube_up
kubectl create namespace bench >/dev/null

# --- the registry
reg_port="$(free_port)"
bench_registry "127.0.0.1:$reg_port"
reg="127.0.0.1:$reg_port"

# --- the upstream repository: a 50-file folder, on the git server
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
mkdir -p "$work/srv"
git init -q --bare -b main "$work/srv/settings.git"
git clone -q "$work/srv/settings.git" "$work/up" 2>/dev/null
cd "$work/up"
git checkout -q -b main
mkdir -p configs/shop/conf.d
for i in $(seq -w 1 50); do
  if [ $((10#$i % 5)) = 0 ]; then f="configs/shop/conf.d/part-$i.yaml"; else f="configs/shop/setting-$i.yaml"; fi
  { echo "# setting $i"; for j in $(seq 1 40); do echo "key_$j: value $i-$j lorem ipsum dolor sit amet"; done; } > "$f"
done
git add -A && git commit -q -m initial && git push -q origin main
cd - >/dev/null
python3 tests/support_git/serve.py --root "$work/srv" --log "$work/git.log" > "$work/git.port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/git.port" ] && break; sleep 0.05; done
git_url="http://127.0.0.1:$(head -1 "$work/git.port")/settings.git"

# --- the controller
metrics_port="$(free_port)"
"$bin" controller --kubeconfig "$KUBECONFIG" --namespace bench \
  --metrics-bind-address "127.0.0.1:$metrics_port" --health-probe-bind-address 0 \
  --cache-dir "$work/cache" --concurrency 4 2> "$work/controller.log" &
ctl_pid=$!
pids+=("$ctl_pid")

cat <<EOF | kubectl apply -f - >/dev/null
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: settings, namespace: bench}
spec: {interval: 1m, url: "$git_url", ref: {branch: main}}
---
apiVersion: settings-image.configbutler.io/v1alpha1
kind: SettingsImage
metadata: {name: shop, namespace: bench}
spec:
  sourceRef: {kind: GitRepository, name: settings}
  path: configs/shop
  repository: $reg/shop
EOF

# The timing loop: commit, push, PATCH the revision, poll the registry.
python3 - "$rounds" "$work" "$KUBE_STATE_DIR" "$APISERVER_URL" "$reg" <<'PY'
import http.client, json, os, ssl, subprocess, sys, time
rounds, work, state, api, reg = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
up = os.path.join(work, "up")
ctx = ssl.create_default_context(cafile=os.path.join(state, "certs/ca.crt"))
ctx.load_cert_chain(os.path.join(state, "certs/admin.crt"), os.path.join(state, "certs/admin.key"))
host = api.split("://", 1)[1]

def git(*args):
    return subprocess.run(["git", "-C", up, *args], check=True, capture_output=True, text=True).stdout.strip()

def fetched(commit):
    body = json.dumps({"status": {"artifact": {
        "revision": f"main@sha1:{commit}", "digest": "sha256:" + "0" * 64,
        "path": f"gitrepository/bench/settings/{commit}.tar.gz",
        "url": f"http://source-controller/gitrepository/bench/settings/{commit}.tar.gz",
        "lastUpdateTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}})
    c = http.client.HTTPSConnection(host, context=ctx)
    c.request("PATCH", "/apis/source.toolkit.fluxcd.io/v1/namespaces/bench/gitrepositories/settings/status",
              body, {"Content-Type": "application/merge-patch+json"})
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status

def tags():
    c = http.client.HTTPConnection(reg)
    c.request("GET", "/v2/shop/tags/list")
    r = c.getresponse(); b = r.read()
    return set(json.loads(b).get("tags") or []) if r.status == 200 else set()

def wait_for(tag, limit=120):
    t0 = time.monotonic()
    while tag not in tags():
        if time.monotonic() - t0 > limit:
            sys.exit(f"bench-controller: {tag} never appeared; see {work}/controller.log")
        time.sleep(0.01)

def tag_of(commit):
    ct, full = git("log", "-1", "--format=%ct %H", commit, "--", "configs/shop").split()
    return f"main-{ct}-{full[:7]}"

# Warm-up: the first publish clones the mirror.
head = git("rev-parse", "HEAD")
fetched(head)
wait_for(tag_of(head))
times = []
for i in range(rounds):
    with open(os.path.join(up, "configs/shop/setting-01.yaml"), "a") as f:
        f.write(f"round: {i}\n")
    git("commit", "-qam", f"round {i}")
    git("push", "-q", "origin", "main")
    head = git("rev-parse", "HEAD")
    tag = tag_of(head)
    t0 = time.monotonic()
    fetched(head)
    wait_for(tag)
    times.append(time.monotonic() - t0)
times.sort()
p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
print(f"latency, revision change -> tag in registry ({rounds} rounds, 50 files): "
      f"p50 {p(0.5)*1000:.0f} ms, p90 {p(0.9)*1000:.0f} ms, min {times[0]*1000:.0f} ms, max {times[-1]*1000:.0f} ms")
PY

rss() { awk '/^VmRSS/ {print $2}' "/proc/$ctl_pid/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$ctl_pid/status"; }
sleep 2
idle="$(rss)"

# 100 SettingsImages on the same GitRepository, each its own repository.
for i in $(seq 1 100); do
  cat <<EOF
---
apiVersion: settings-image.configbutler.io/v1alpha1
kind: SettingsImage
metadata: {name: shop-$i, namespace: bench}
spec:
  sourceRef: {kind: GitRepository, name: settings}
  path: configs/shop
  repository: $reg/shop-$i
  provenance: false
EOF
done | kubectl apply -f - >/dev/null
ready_count() {
  kubectl get settingsimages -n bench -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
rev = sys.argv[1]
print(sum(1 for i in items if i.get("status", {}).get("lastHandledRevision") == rev
          and any(c["type"] == "Ready" and c["status"] == "True" for c in i["status"].get("conditions", []))))' "$1"
}
rev="main@sha1:$(git -C "$work/up" rev-parse HEAD)"
t0=$(date +%s.%N)
until [ "$(ready_count "$rev")" -ge 101 ]; do sleep 0.5; done
t1=$(date +%s.%N)
with100="$(rss)"

# New revisions, one after another: all 101 publish each. The resident set
# after each one shows whether memory stays flat as publishes go on.
afters=()
for r in $(seq 1 "$revisions"); do
  cd "$work/up"; echo "last: $r" >> configs/shop/setting-02.yaml; git commit -qam "last $r"; git push -q origin main; cd - >/dev/null
  new="$(git -C "$work/up" rev-parse HEAD)"
  kubectl patch gitrepository settings -n bench --subresource=status --type=merge \
    -p "{\"status\":{\"artifact\":{\"revision\":\"main@sha1:$new\",\"lastUpdateTime\":\"2026-01-01T00:00:0${r: -1}Z\"}}}" >/dev/null
  t2=$(date +%s.%N)
  until [ "$(ready_count "main@sha1:$new")" -ge 101 ]; do sleep 0.5; done
  t3=$(date +%s.%N)
  sleep 1
  afters+=("$(( $(rss) / 1024 ))")
done
echo "memory (VmRSS): idle with 1 SettingsImage $((idle / 1024)) MiB; with 101 published $((with100 / 1024)) MiB; after each of $revisions new revisions all 101 published: ${afters[*]} MiB; peak (VmHWM) $(( $(hwm) / 1024 )) MiB"
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { printf "100 new SettingsImages published in %.1f s; the last new revision for all 101 in %.1f s (--concurrency 4)\n", b - a, d - c }'
