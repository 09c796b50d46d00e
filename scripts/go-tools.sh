#!/usr/bin/env bash
# The Go programs the tests run, built once from a module of the project
# (tests/go/<name>: go.mod + go.sum, its `tool` directive naming them).
#
#   scripts/go-tools.sh build MODULE_DIR   build its tools once (cached), print the cache folder
#
# The modules:
#   tests/go/flux  Flux's controllers (scripts/flux.sh builds it, and adds their CRDs)
#   tests/go/oci   oras (oras.land/oras), crane (github.com/google/go-containerregistry/cmd/crane)
#                  and referrers-registry (go-containerregistry's registry with its
#                  referrers API on; tests/go/oci/referrers-registry/main.go)
#   tests/go/kube        Kubernetes v1.36.3: kube-apiserver, kube-controller-manager,
#                        kube-scheduler, kubelet, kubectl (scripts/kube.sh)
#   tests/go/containerd  containerd v2.4.2, containerd-shim-runc-v2, ctr (scripts/kube.sh --node)
#   tests/go/runc        runc v1.5.3 (scripts/kube.sh --node)
# Each is its own module, so one module's versions never move another's
# (Go resolves the requirements of one module as one set).
#
# The tools go into
#   ${SETTINGS_IMAGE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/settings-image}/go/<name>-<key>/bin/
# where <name> is the module folder's name and <key> the sha256 of go.mod,
# go.sum, go-build.env (when there is one) and `go version`: a change of
# either builds again, nothing else does. A module's go-build.env, read
# before its build, may export CGO_ENABLED and set GO_TAGS (build tags)
# and GO_LDFLAGS (added to -s -w: version stamps). Concurrent callers wait on one lock (flock); the folder appears
# whole (a rename), with `versions` (each tool's module and version) and
# `build-seconds`. Needs go (the version go.mod names) and the Go module
# proxy the first time.
#
# Sourced (scripts/flux.sh does), it defines go_tools_build MODULE_DIR
# [HOOK]: HOOK, a function, runs with the unfinished folder as $1 before it
# is renamed into place, and can add files to it.
set -euo pipefail

go_tools_die() { echo "scripts/go-tools.sh: $*" >&2; exit 1; }

# The cache folder of MODULE_DIR's tools.
go_tools_dir() {
  local module=$1 key
  command -v go >/dev/null || go_tools_die "go is missing: install the Go that $module/go.mod names (go.dev/dl)"
  [ -f "$module/go.mod" ] && [ -f "$module/go.sum" ] || go_tools_die "$module has no go.mod and go.sum"
  key=$( { cat "$module/go.mod" "$module/go.sum"; [ ! -f "$module/go-build.env" ] || cat "$module/go-build.env"; go version; } | sha256sum | cut -c1-16)
  echo "${SETTINGS_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/settings-image}/go/$(basename "$module")-$key"
}

go_tools_build() {
  local module hook out lock tmp f t0
  module="$(cd "$1" && pwd)"
  hook=${2:-}
  out=$(go_tools_dir "$module")
  if [ -f "$out/done" ]; then echo "$out"; return; fi
  mkdir -p "$(dirname "$out")"
  lock="$out.lock"
  exec 9>"$lock"
  flock 9
  if [ ! -f "$out/done" ]; then
    echo "scripts/go-tools.sh: building the tools of $module into $out (once)" >&2
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp/bin"
    t0=$SECONDS
    (cd "$module" && GO_TAGS='' && GO_LDFLAGS='' \
      && { [ ! -f go-build.env ] || . ./go-build.env; } \
      && GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
      go build -trimpath -tags "$GO_TAGS" -ldflags="-s -w $GO_LDFLAGS" -o "$tmp/bin/" tool) \
      || { rm -rf "$tmp"; go_tools_die "go build of $module failed (above)"; }
    : > "$tmp/versions"
    for f in "$tmp"/bin/*; do
      # `mod PATH VERSION`: the module the tool's main package is in.
      echo "$(basename "$f") $(go version -m "$f" | awk '$1 == "mod" { print $2, $3; exit }')" >> "$tmp/versions"
    done
    if [ -n "$hook" ]; then
      "$hook" "$tmp" || { rm -rf "$tmp"; go_tools_die "finishing the build of $module failed (above)"; }
    fi
    echo "$((SECONDS - t0))" > "$tmp/build-seconds"
    touch "$tmp/done"
    rm -rf "$out"
    mv "$tmp" "$out"
    echo "scripts/go-tools.sh: built in $(cat "$out/build-seconds") s" >&2
  fi
  exec 9>&-
  echo "$out"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    build) [ -n "${2:-}" ] || go_tools_die "usage: scripts/go-tools.sh build MODULE_DIR"; go_tools_build "$2" ;;
    *) echo "usage: scripts/go-tools.sh build MODULE_DIR" >&2; exit 2 ;;
  esac
fi
