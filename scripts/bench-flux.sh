#!/usr/bin/env bash
# From a settings commit to Flux's commit in the cluster repository, with
# Flux's own controllers (scripts/flux.sh up), a TLS distribution registry
# on this machine's routable address and git http-backend (push enabled)
# for the settings and cluster repositories. Two paths, ROUNDS each:
#
#   push:       commit -> `settings-image push` (release binary) -> image in
#               the registry  | ours
#               -> ImageRepository scan -> ImagePolicy -> ImageUpdateAutomation
#               -> commit in the cluster repository                 | Flux's
#   controller: commit -> source-controller fetch (GitRepository reconcile
#               requested, as a webhook Receiver does)              | Flux's
#               -> `settings-image controller` publishes -> image in the
#               registry                                            | ours
#               -> scan -> policy -> automation -> commit            | Flux's
#
# Flux is asked at once (`reconcile.fluxcd.io/requestedAt` on the
# ImageRepository, as `flux reconcile image repository` does); the
# ImagePolicy and ImageUpdateAutomation follow by their watches. In a
# cluster without a Receiver, add up to the ImageRepository's interval.
# Times are taken by polling every 20 ms (the registry's tag list, the API
# server with curl, the cluster repository's ref): each figure carries up to
# 20 ms of polling; the request itself (`kubectl annotate`, 50-200 ms) is in
# Flux's part. Round 0 warms up (first scans, the mirror's clone) and is not
# counted. Medians (min-max) over ROUNDS.
#
# Usage: scripts/bench-flux.sh [ROUNDS]   (default 5; SETTINGS_IMAGE_BIN=PATH
# uses that binary instead of building target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
. scripts/bench-lib.sh bench-flux
bench_need docker-registry git python3 curl jq openssl ip
bench_bin "${SETTINGS_IMAGE_BIN:-}"

bench_work

# --- Flux
bench_flux_up
kubectl apply --server-side -f config/crd/settings-image.configbutler.io_settingsimages.yaml >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/settingsimages.settings-image.configbutler.io >/dev/null
ns=bench
kubectl create namespace "$ns" >/dev/null

# --- the registry: TLS, a CA of its own, the routable address
ip=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
[ -n "$ip" ] || { echo "bench-flux: no IPv4 address of global scope" >&2; exit 1; }
(
  cd "$work"
  openssl ecparam -name prime256v1 -genkey -noout -out ca.key
  openssl req -x509 -new -key ca.key -sha256 -days 2 -subj '/CN=bench CA' -out ca.crt
  openssl ecparam -name prime256v1 -genkey -noout -out reg.key
  openssl req -new -key reg.key -subj "/CN=$ip" -out reg.csr
  printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$ip" > reg.ext
  openssl x509 -req -in reg.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 -extfile reg.ext -out reg.crt
) 2>/dev/null
reg_port=$(python3 -c "import socket; s=socket.socket(); s.bind(('$ip',0)); print(s.getsockname()[1])")
bench_registry "$ip:$reg_port" --tls "$work/reg.crt" "$work/reg.key"
reg="$ip:$reg_port"
export SSL_CERT_FILE="$work/ca.crt"
for _ in $(seq 100); do curl -fsS --cacert "$work/ca.crt" "https://$reg/v2/" >/dev/null 2>&1 && break; sleep 0.1; done
kubectl -n "$ns" create secret generic registry-ca --from-file=ca.crt="$work/ca.crt" >/dev/null

# --- git: the settings and cluster repositories behind git http-backend
bench_git_repos settings cluster

# 50 files in each folder; one image per path.
for d in push ctl; do
  mkdir -p "$work/settings/configs/$d"
  for i in $(seq 50); do printf 'key%d: value %d\n' "$i" "$i" > "$work/settings/configs/$d/file$i.yaml"; done
done
git -C "$work/settings" add -A; git -C "$work/settings" commit -qm start; git -C "$work/settings" push -q origin main

# The Flux objects as generated, one ImagePolicy per image; the cluster
# repository's Deployments carry their markers.
mkdir -p "$work/cluster/clusters/prod"
for d in push ctl; do
  "$bin" flux --repository "$reg/settings-$d" --prefix main --namespace "$ns" --interval 10m \
    --git-source cluster --git-path ./clusters/prod --cert-secret-ref registry-ca \
    $([ "$d" = ctl ] && echo --no-automation) > "$work/flux-$d.yaml"
  cat > "$work/cluster/clusters/prod/$d.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $d
spec:
  selector:
    matchLabels: {app: $d}
  template:
    metadata:
      labels: {app: $d}
    spec:
      volumes:
        - name: settings
          image:
            reference: $reg/settings-$d:main-0-0000000 # {"\$imagepolicy": "$ns:settings-$d"}
      containers:
        - name: app
          image: registry.example.com/app:1
EOF
done
git -C "$work/cluster" add -A; git -C "$work/cluster" commit -qm start; git -C "$work/cluster" push -q origin main
kubectl apply -f - >/dev/null <<EOF
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: cluster, namespace: $ns}
spec: {interval: 10m, url: "$git_url/cluster.git", ref: {branch: main}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: settings, namespace: $ns}
spec: {interval: 10m, url: "$git_url/settings.git", ref: {branch: main}}
---
apiVersion: settings-image.configbutler.io/v1alpha1
kind: SettingsImage
metadata: {name: ctl, namespace: $ns}
spec:
  sourceRef: {kind: GitRepository, name: settings}
  path: configs/ctl
  repository: $reg/settings-ctl
EOF
# One automation (push's) rewrites the lines of every generated policy.
kubectl apply -f "$work/flux-push.yaml" -f "$work/flux-ctl.yaml" >/dev/null

"$bin" controller --namespace "$ns" --metrics-bind-address=127.0.0.1:"$(free_port)" \
  --health-probe-bind-address=127.0.0.1:"$(free_port)" --cache-dir "$work/mirrors" \
  > "$work/controller.log" 2>&1 &
pids+=($!)

request() { kubectl -n "$ns" annotate --overwrite "$1" "reconcile.fluxcd.io/requestedAt=$(now)" >/dev/null; }
has_tag() { curl -fsS --cacert "$work/ca.crt" "https://$reg/v2/$1/tags/list" 2>/dev/null | jq -e --arg t "$2" '.tags // [] | index($t)' >/dev/null; }
wait_until() { local deadline=$(( $(date +%s) + 300 )); until "$@"; do [ "$(date +%s)" -lt "$deadline" ] || { echo "bench-flux: timed out waiting for: $*" >&2; tail -20 "$FLUX_DIR"/image-*.log >&2; exit 1; }; sleep 0.02; done; }
# Flux's commit for an image: the file of its Deployment names the tag.
committed() { git --git-dir "$work/srv/cluster.git" show "main:clusters/prod/$1.yaml" 2>/dev/null | grep -q "$2@sha256:"; }
fetched() { api "/apis/source.toolkit.fluxcd.io/v1/namespaces/$ns/gitrepositories/settings" | jq -e --arg r "main@sha1:$1" '.status.artifact.revision == $r' >/dev/null; }

# Warm up: each path publishes and rolls out once (first scans, first clone).
commit() {  # folder round -> the tag of the new commit
  printf 'round: %s\n' "$2" > "$work/settings/configs/$1/file1.yaml"
  git -C "$work/settings" commit -qam "$1 $2"
  git -C "$work/settings" push -q origin main
  echo "main-$(git -C "$work/settings" log -1 --format='%ct-%h' --abbrev=7)"
}

declare -a push_ours push_flux push_total ctl_fetch ctl_ours ctl_flux ctl_total
for round in $(seq 0 "$rounds"); do
  # Each round in its own second: a tag with a higher number.
  sleep 1
  t0=$(now)
  tag=$(commit push "$round")
  (cd "$work/settings" && "$bin" push --path configs/push --repository "$reg/settings-push" \
    --timestamp-tag main >/dev/null)
  t1=$(now)
  request imagerepository/settings-push
  wait_until committed push "$tag"
  t2=$(now)
  if [ "$round" -gt 0 ]; then
    push_ours+=("$(ms "$t0" "$t1")"); push_flux+=("$(ms "$t1" "$t2")"); push_total+=("$(ms "$t0" "$t2")")
  fi

  sleep 1
  t0=$(now)
  tag=$(commit ctl "$round")
  commit_id=$(git -C "$work/settings" rev-parse HEAD)
  request gitrepository/settings
  wait_until fetched "$commit_id"
  tf=$(now)
  wait_until has_tag settings-ctl "$tag"
  t1=$(now)
  request imagerepository/settings-ctl
  wait_until committed ctl "$tag"
  t2=$(now)
  if [ "$round" -gt 0 ]; then
    ctl_fetch+=("$(ms "$t0" "$tf")"); ctl_ours+=("$(ms "$tf" "$t1")"); ctl_flux+=("$(ms "$t1" "$t2")"); ctl_total+=("$(ms "$t0" "$t2")")
  fi
done

stat() {  # median (min-max) of the arguments, in ms
  printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{m=(NR%2)?a[(NR+1)/2]:int((a[NR/2]+a[NR/2+1])/2); printf "%d ms (%d-%d)", m, a[1], a[NR]}'
}
echo "bench-flux: $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); Flux: $(paste -sd' ' "$flux_cache/versions")"
printf '%-58s %s\n' "push: commit -> image in the registry (settings-image push)" "$(stat "${push_ours[@]}")"
printf '%-58s %s\n' "push: image -> Flux's commit (scan, policy, automation)" "$(stat "${push_flux[@]}")"
printf '%-58s %s\n' "push: commit -> Flux's commit" "$(stat "${push_total[@]}")"
printf '%-58s %s\n' "controller: commit -> source-controller's artifact" "$(stat "${ctl_fetch[@]}")"
printf '%-58s %s\n' "controller: artifact -> image in the registry (ours)" "$(stat "${ctl_ours[@]}")"
printf '%-58s %s\n' "controller: image -> Flux's commit" "$(stat "${ctl_flux[@]}")"
printf '%-58s %s\n' "controller: commit -> Flux's commit" "$(stat "${ctl_total[@]}")"
