#!/usr/bin/env bash
# Stages what the Dockerfile copies into target/action-image/: a static
# settings-image binary per platform, in <arch>/settings-image (amd64,
# arm64), and the CA bundle. glibc is linked statically
# (`-C target-feature=+crt-static` on the gnu target; musl cannot be fetched
# everywhere this builds).
#
#   scripts/action-image.sh [RUST_TARGET...]
#       The shipped binary: the release profile, stripped, for each target
#       (default x86_64-unknown-linux-gnu). The release workflow runs this
#       before `docker build`; RUSTFLAGS with an explicit --target reach only
#       the target's crates, never build scripts or proc macros.
#   scripts/action-image.sh --test-profile
#       The test command's: the same binary from the test profile, linked
#       statically (`cargo rustc` adds crt-static to the binary's final
#       link only, so every dependency is the test build's own and nothing
#       is compiled twice), stripped. tests/action.rs builds the Dockerfile
#       from it and runs the image under podman.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/action-image
target_dir=${CARGO_TARGET_DIR:-target}
bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if [ ! -s "$bundle" ]; then
  echo "scripts/action-image.sh: no CA bundle at $bundle: install ca-certificates (scripts/deps.sh does)" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
if [ "${1:-}" = --test-profile ]; then
  [ "$(uname -m)" = x86_64 ] || { echo "scripts/action-image.sh: --test-profile builds for x86_64 hosts" >&2; exit 2; }
  cargo rustc --locked --bin settings-image -- -C target-feature=+crt-static -C strip=symbols
  mkdir -p "$out/amd64"
  cp "$target_dir/debug/settings-image" "$out/amd64/settings-image"
  echo test > "$out/profile"
else
  targets=("$@")
  [ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-gnu)
  for t in "${targets[@]}"; do
    case "$t" in
      x86_64-*-linux-gnu) arch=amd64 ;;
      aarch64-*-linux-gnu) arch=arm64 ;;
      *) echo "scripts/action-image.sh: $t is not a linux-gnu target this image is built for" >&2; exit 2 ;;
    esac
    RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$t" \
      --config 'profile.release.strip="symbols"'
    mkdir -p "$out/$arch"
    cp "$target_dir/$t/release/settings-image" "$out/$arch/settings-image"
  done
  echo release > "$out/profile"
fi
cp "$bundle" "$out/ca-certificates.crt"
ls -l "$out"/*/settings-image
