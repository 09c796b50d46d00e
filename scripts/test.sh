#!/usr/bin/env bash
# The test command: installs what the tests need, checks formatting and
# lints, builds the action image's binary, then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cargo fmt --check
# No import cycle between the modules of src/ (docs/design.md).
python3 scripts/module-cycles.py
# Flux's controllers for tests/flux_observed.rs, and the cluster they and
# tests/node.rs run on (Kubernetes, containerd, runc: scripts/kube.sh),
# built once into a cache keyed by each module's go.sum (the first time
# about 5 minutes for Flux, 16 for Kubernetes, 3 for containerd and runc on
# 2 cores; nothing after): beside the Rust build, one after the other.
go_log=$(mktemp)
{ bash scripts/flux.sh build && bash scripts/kube.sh build; } >"$go_log" 2>&1 &
go_build=$!
# Clippy's lints with -D warnings, as `cargo clippy --all-targets --locked
# -- -D warnings` gives them, run while the workspace's crates compile for
# the tests: `cargo clippy` is `cargo check` with clippy-driver as the
# workspace's compiler, and here the same driver compiles them for real.
# The dependencies are compiled once, not once checked and once built.
export RUSTC_WORKSPACE_WRAPPER=clippy-driver
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# What the Dockerfile copies: the test profile's binary, linked statically
# (tests/action.rs builds the image from it and runs it under podman).
bash scripts/action-image.sh --test-profile
cargo nextest run --all-targets --locked --no-run
if ! wait "$go_build"; then
  cat "$go_log" >&2
  echo "scripts/test.sh: building Flux's controllers or the cluster failed (scripts/flux.sh build, scripts/kube.sh build)" >&2
  exit 1
fi
rm -f "$go_log"
# Every test of every target, each in its own process, binaries in
# parallel (.config/nextest.toml).
cargo nextest run --all-targets --locked
