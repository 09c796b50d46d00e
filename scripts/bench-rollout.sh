#!/usr/bin/env bash
# From a settings commit to the new content read inside the running pod,
# on a whole node (scripts/flux.sh up --node: Kubernetes v1.36.3 with
# controller-manager, scheduler, kubelet, containerd 2.4.2, runc 1.5.3, and
# Flux's controllers), the node's own TLS registry, and git http-backend
# (push enabled) for the settings and cluster repositories. Each round:
#
#   commit -> `settings-image push` (release binary) -> image in the
#   registry                                                    | ours
#   -> ImageRepository scan -> ImagePolicy -> ImageUpdateAutomation
#   -> commit in the cluster repository -> source-controller fetch
#   -> kustomize-controller applies the Deployment              | Flux's
#   -> controller-manager's new ReplicaSet -> scheduler -> kubelet pulls
#   and mounts the image volume, starts the container -> the container
#   prints the new file                                         | Kubernetes'
#
# Flux is asked at once where a webhook Receiver would ask it
# (`reconcile.fluxcd.io/requestedAt` on the ImageRepository after the
# push, and on the cluster GitRepository after Flux's commit); the
# ImagePolicy, the automation and the Kustomization follow by their
# watches. Without Receivers add up to the ImageRepository's and the
# GitRepository's intervals. Times are taken by polling every 20 ms (the
# registry's tag list, the cluster repository's ref, the API server with
# curl, the pod's log through the API server): each figure carries up to
# 20 ms of polling. Round 0 warms up (first scans, first pulls of the
# workload image) and is not counted. Medians (min-max) over ROUNDS.
#
# Usage: scripts/bench-rollout.sh [ROUNDS]   (default 5; SETTINGS_IMAGE_BIN=PATH
# uses that binary instead of building target/release). Needs root (the node).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
. scripts/bench-lib.sh bench-rollout
bench_need git python3 curl jq
bench_bin "${SETTINGS_IMAGE_BIN:-}"

bench_work /tmp/si-rollout.XXXXXX

# --- the node and Flux
bench_flux_up --node
ns=bench
kubectl create namespace "$ns" >/dev/null
# The node's own registry: `push` and Flux trust its CA.
reg="$REGISTRY"
export SSL_CERT_FILE="$REGISTRY_CA"
kubectl -n "$ns" create secret generic registry-ca --from-file=ca.crt="$REGISTRY_CA" >/dev/null

# --- git: the settings and cluster repositories behind git http-backend
bench_git_repos settings cluster

# A 50-file folder; the Deployment's container prints file1.yaml.
mkdir -p "$work/settings/configs/shop"
for i in $(seq 50); do printf 'key%d: value %d\n' "$i" "$i" > "$work/settings/configs/shop/file$i.yaml"; done
git -C "$work/settings" add -A; git -C "$work/settings" commit -qm start; git -C "$work/settings" push -q origin main
"$bin" flux --repository "$reg/settings-shop" --prefix main --namespace "$ns" --interval 10m \
  --git-source cluster --git-path ./clusters/prod --cert-secret-ref registry-ca > "$work/flux-objects.yaml"
mkdir -p "$work/cluster/clusters/prod"
cat > "$work/cluster/clusters/prod/shop.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  selector:
    matchLabels: {app: shop}
  template:
    metadata:
      labels: {app: shop}
    spec:
      terminationGracePeriodSeconds: 1
      volumes:
        - name: settings
          image:
            reference: $reg/settings-shop:main-0-0000000 # {"\$imagepolicy": "$ns:settings-shop"}
      containers:
        - name: app
          image: $BUSYBOX_IMAGE
          command: ["sh", "-c", "cat /etc/settings/file1.yaml; trap 'exit 0' TERM; sleep 86400 & wait"]
          volumeMounts:
            - name: settings
              mountPath: /etc/settings
EOF
git -C "$work/cluster" add -A; git -C "$work/cluster" commit -qm start; git -C "$work/cluster" push -q origin main
kubectl apply -f - >/dev/null <<EOF
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: cluster, namespace: $ns}
spec: {interval: 10m, url: "$git_url/cluster.git", ref: {branch: main}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: $ns}
spec:
  interval: 10m
  sourceRef: {kind: GitRepository, name: cluster}
  path: ./clusters/prod
  prune: false
  targetNamespace: $ns
EOF
kubectl apply -f "$work/flux-objects.yaml" >/dev/null

request() { kubectl -n "$ns" annotate --overwrite "$1" "reconcile.fluxcd.io/requestedAt=$(now)" >/dev/null; }
wait_until() {
  local deadline=$(( $(date +%s) + 300 ))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || {
      echo "bench-rollout: timed out waiting for: $*" >&2
      kubectl -n "$ns" get deploy,rs,pods -o wide >&2 || true
      tail -5 "$FLUX_DIR"/*-controller.log >&2
      exit 1
    }
    sleep 0.02
  done
}
# Flux's commit: the Deployment's file names the tag.
committed() { git --git-dir "$work/srv/cluster.git" show "main:clusters/prod/shop.yaml" 2>/dev/null | grep -q "$1@sha256:"; }
# Applied: the Deployment in the API server names it.
applied() {
  api "/apis/apps/v1/namespaces/$ns/deployments/shop" \
    | jq -e --arg t ":$1@" '.spec.template.spec.volumes[0].image.reference | contains($t)' >/dev/null
}
# Read inside the pod: a Running pod of the Deployment printed the round's line.
read_in_pod() {
  local pod
  for pod in $(api "/api/v1/namespaces/$ns/pods?labelSelector=app%3Dshop" \
      | jq -r '.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null) | .metadata.name'); do
    api "/api/v1/namespaces/$ns/pods/$pod/log" 2>/dev/null | grep -qx "key1: round $1" && return 0
  done
  return 1
}

declare -a ours flux_commit flux_apply kube total
for round in $(seq 0 "$rounds"); do
  # Each round in its own second: a tag with a higher number.
  sleep 1
  t0=$(now)
  printf 'key1: round %s\n' "$round" > "$work/settings/configs/shop/file1.yaml"
  git -C "$work/settings" commit -qam "round $round"
  git -C "$work/settings" push -q origin main
  tag="main-$(git -C "$work/settings" log -1 --format='%ct-%h' --abbrev=7)"
  (cd "$work/settings" && "$bin" push --path configs/shop --repository "$reg/settings-shop" \
    --timestamp-tag main >/dev/null)
  t1=$(now)
  request imagerepository/settings-shop
  wait_until committed "$tag"
  t2=$(now)
  request gitrepository/cluster
  wait_until applied "$tag"
  t3=$(now)
  wait_until read_in_pod "$round"
  t4=$(now)
  if [ "$round" -gt 0 ]; then
    ours+=("$(ms "$t0" "$t1")"); flux_commit+=("$(ms "$t1" "$t2")"); flux_apply+=("$(ms "$t2" "$t3")")
    kube+=("$(ms "$t3" "$t4")"); total+=("$(ms "$t0" "$t4")")
  fi
done

stat() {  # median (min-max) of the arguments, in ms
  printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{m=(NR%2)?a[(NR+1)/2]:int((a[NR/2]+a[NR/2+1])/2); printf "%d ms (%d-%d)", m, a[1], a[NR]}'
}
echo "bench-rollout: $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); Kubernetes $KUBE_VERSION, containerd $CONTAINERD_VERSION, runc $RUNC_VERSION; Flux: $(paste -sd' ' "$flux_cache/versions")"
printf '%-62s %s\n' "ours: commit -> image in the registry (settings-image push)" "$(stat "${ours[@]}")"
printf '%-62s %s\n' "Flux: image -> commit in the cluster repository" "$(stat "${flux_commit[@]}")"
printf '%-62s %s\n' "Flux: commit -> Deployment applied (fetch, kustomize)" "$(stat "${flux_apply[@]}")"
printf '%-62s %s\n' "Kubernetes: applied -> new pod running, printing the file" "$(stat "${kube[@]}")"
printf '%-62s %s\n' "total: settings commit -> new content read in the pod" "$(stat "${total[@]}")"
