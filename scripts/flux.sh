#!/usr/bin/env bash
# Flux's own controllers against a real Kubernetes (scripts/kube.sh), as
# processes on loopback: what the end-to-end tests (tests/flux_observed.rs,
# tests/node.rs) and scripts/bench-flux.sh and scripts/bench-rollout.sh run
# the project against.
#
#   scripts/flux.sh build             build the controllers once (cached), print the cache folder
#   scripts/flux.sh up DIR [--node]   start the cluster (`scripts/kube.sh up DIR/kube`, with
#                                     --node a whole node that runs the Deployments Flux
#                                     applies), install the controllers' CRDs, start the
#                                     controllers; print shell-sourceable variables
#   scripts/flux.sh down DIR          stop what `up DIR` started, by PID
#
# The controllers, pinned by tests/go/flux/go.mod and go.sum (one Flux release
# train, client-go 0.36 and controller-runtime 0.24):
#   source-controller v1.9.1, image-reflector-controller v1.2.0,
#   image-automation-controller v1.2.3, kustomize-controller v1.9.4
# built with `go build` from their published modules into
#   ${SETTINGS_IMAGE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/settings-image}/go/flux-<key>/
# where <key> is the sha256 of go.mod, go.sum and `go version`: a change of
# either builds again, nothing else does. The first build downloads the
# modules (about 200 MB) and compiles Kubernetes' client libraries: about
# 5 minutes on 2 cores; after that `up` starts in seconds.
#
# `up` needs: go (1.26), curl, and what scripts/kube.sh needs. Each
# controller runs with KUBECONFIG (these builds have no --kubeconfig flag:
# controller-runtime reads the variable), leader election off,
# --watch-all-namespaces, metrics and health on free loopback ports, and
# its storage under DIR; SOURCE_CONTROLLER_ARGS (IMAGE_REFLECTOR_CONTROLLER_ARGS,
# ...) adds flags to one. `up` waits until each answers /readyz; one that
# does not prints its log's tail, everything started is stopped, exit 1.
#
# Printed by `up` (and kept in DIR/flux.env): every variable of
# `scripts/kube.sh up` (KUBE_STATE_DIR, APISERVER_URL, KUBECTL, with --node
# REGISTRY, BUSYBOX_IMAGE, ...), then
#   FLUX_DIR KUBECONFIG
#   SOURCE_CONTROLLER_PID SOURCE_CONTROLLER_LOG SOURCE_CONTROLLER_STORAGE (host:port of its artifacts)
#   IMAGE_REFLECTOR_CONTROLLER_PID ..._LOG, IMAGE_AUTOMATION_CONTROLLER_PID ..._LOG,
#   KUSTOMIZE_CONTROLLER_PID ..._LOG, READY_SECONDS
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
MODULE="$REPO/tests/go/flux"
CONTROLLERS=(source-controller image-reflector-controller image-automation-controller kustomize-controller)

die() { echo "scripts/flux.sh: $*" >&2; exit 1; }

# The build itself is scripts/go-tools.sh's (one cache folder per module
# and key, under a lock); this adds the controllers' CRDs and versions.
# shellcheck source=go-tools.sh
. "$HERE/go-tools.sh"

flux_finish() {
  local tmp=$1 c mod dir
  mkdir -p "$tmp/crd"
  : > "$tmp/versions"
  for c in "${CONTROLLERS[@]}"; do
    [ -x "$tmp/bin/$c" ] || die "the build made no $c"
    mod="github.com/fluxcd/$c"
    dir=$(cd "$MODULE" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}} {{.Version}}' "$mod")
    echo "$c ${dir##* }" >> "$tmp/versions"
    cp "${dir% *}"/config/crd/bases/*.yaml "$tmp/crd/"
  done
  chmod -R u+w "$tmp/crd"
}

# Builds the controllers and copies their CRDs into the cache, once per key
# (the first time about 5 minutes on 2 cores).
build() {
  go_tools_build "$MODULE" flux_finish
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# The environment variable prefix of a controller: source-controller -> SOURCE_CONTROLLER.
var_of() { echo "$1" | tr 'a-z-' 'A-Z_'; }

down() {
  local dir=$1 c pid i
  [ -d "$dir" ] || die "usage: scripts/flux.sh down DIR (no folder $dir)"
  for c in "${CONTROLLERS[@]}"; do
    [ -f "$dir/$c.pid" ] || continue
    pid=$(cat "$dir/$c.pid")
    # Only while the PID still runs that controller (not a reused PID).
    if [ "$(tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | head -1 | xargs -r basename)" = "$c" ]; then
      kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/$c.pid"
  done
  if [ -d "$dir/kube" ]; then
    bash "$HERE/kube.sh" down "$dir/kube" >/dev/null || true
  fi
}

up() {
  local dir=$1 cache c v port health pid t0 ready deadline
  shift
  command -v curl >/dev/null || die "curl is missing"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  t0=$(date +%s.%N)
  cache=$(build)
  # A killed earlier run of DIR: its controllers go first.
  down "$dir" >/dev/null 2>&1 || true

  # The cluster: its state (certificates, logs, kubeconfig) under DIR/kube.
  local env kubectl
  env=$(bash "$HERE/kube.sh" up "$dir/kube" "$@") || die "the cluster did not start (above; logs in $dir/kube)"
  export KUBECONFIG
  KUBECONFIG=$(sed -n 's/^KUBECONFIG_OUT=//p' <<<"$env")
  kubectl=$(sed -n 's/^KUBECTL=//p' <<<"$env")
  kubectl() { "$kubectl" "$@"; }
  trap 'down "$dir" >/dev/null 2>&1' ERR

  # The controllers' own CRDs, as `flux install` applies them.
  kubectl apply --server-side --force-conflicts -f "$cache/crd/" >/dev/null \
    || die "installing the controllers' CRDs failed"
  kubectl wait --for=condition=Established --timeout=60s -f "$cache/crd/" >/dev/null \
    || die "the controllers' CRDs were not established"
  kubectl create namespace flux-system >/dev/null 2>&1 || true

  {
    grep -v '^READY_SECONDS=' <<<"$env"
    echo "FLUX_DIR=$dir"
    echo "KUBECONFIG=$KUBECONFIG"
  } > "$dir/flux.env"
  local -A HEALTH=()
  for c in "${CONTROLLERS[@]}"; do
    v=$(var_of "$c")
    health=$(free_port)
    HEALTH[$c]=$health
    local args=(
      --metrics-addr="127.0.0.1:$(free_port)"
      --health-addr="127.0.0.1:$health"
      --enable-leader-election=false
      --watch-all-namespaces=true
      --log-encoding=json
      --log-level=debug
    )
    case $c in
      source-controller)
        port=$(free_port)
        mkdir -p "$dir/source-storage"
        args+=(--storage-path="$dir/source-storage" --storage-addr="127.0.0.1:$port"
               --storage-adv-addr="127.0.0.1:$port")
        echo "SOURCE_CONTROLLER_STORAGE=127.0.0.1:$port" >> "$dir/flux.env"
        ;;
      image-reflector-controller)
        mkdir -p "$dir/reflector-storage"
        # Badger's value log is memory mapped; 256 MiB each is the default.
        args+=(--storage-path="$dir/reflector-storage" --storage-value-log-file-size=16777216)
        ;;
    esac
    # SOURCE_CONTROLLER_ARGS etc.: more flags for one controller.
    local more="${v}_ARGS" extra=()
    read -ra extra <<< "${!more:-}"
    args+=("${extra[@]}")
    # setsid: its own session, so the caller's signals and terminal leave it
    # alone; `down` stops it by PID. TMPDIR: git checkouts and builds under DIR.
    mkdir -p "$dir/tmp-$c"
    KUBECONFIG="$KUBECONFIG" RUNTIME_NAMESPACE=flux-system TMPDIR="$dir/tmp-$c" \
      setsid "$cache/bin/$c" "${args[@]}" >"$dir/$c.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" > "$dir/$c.pid"
    echo "${v}_PID=$pid" >> "$dir/flux.env"
    echo "${v}_LOG=$dir/$c.log" >> "$dir/flux.env"
  done

  deadline=$(( $(date +%s) + ${FLUX_READY_TIMEOUT:-120} ))
  for c in "${CONTROLLERS[@]}"; do
    ready=0
    pid=$(cat "$dir/$c.pid")
    while [ "$(date +%s)" -lt "$deadline" ]; do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if curl -fsS --max-time 2 "http://127.0.0.1:${HEALTH[$c]}/readyz" >/dev/null 2>&1; then
        ready=1; break
      fi
      sleep 0.2
    done
    if [ "$ready" != 1 ]; then
      echo "scripts/flux.sh: $c did not become ready ($(kill -0 "$pid" 2>/dev/null && echo "no /readyz within ${FLUX_READY_TIMEOUT:-120} s" || echo exited)); the end of $dir/$c.log:" >&2
      tail -n 30 "$dir/$c.log" >&2 || true
      down "$dir" >/dev/null 2>&1
      exit 1
    fi
  done
  trap - ERR
  echo "READY_SECONDS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')" >> "$dir/flux.env"
  cat "$dir/flux.env"
}

case "${1:-}" in
  build) build ;;
  up) [ -n "${2:-}" ] || die "usage: scripts/flux.sh up DIR [--node]"; up "$2" "${@:3}" ;;
  down) [ -n "${2:-}" ] || die "usage: scripts/flux.sh down DIR"; down "$2" ;;
  *) echo "usage: scripts/flux.sh build | up DIR [--node] | down DIR" >&2; exit 2 ;;
esac
