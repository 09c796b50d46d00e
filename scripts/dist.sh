#!/usr/bin/env bash
# Builds the release archives a user installs without compiling, into
# target/dist/ (or $DIST_DIR):
#   settings-image-vVERSION-TARGET.tar.gz, one per staged platform, holding
#     settings-image-vVERSION-TARGET/settings-image   the static binary
#     README.md, LICENSE* (when the repository has one), docs/
#     THIRD-PARTY-LICENSES.txt  the licences of the crates compiled into
#                   the binary (scripts/third-party-licences.py)
#     completions/  settings-image.bash, _settings-image (zsh), settings-image.fish
#     man/          settings-image.1 and one page per command (settings-image-push.1, ...)
#   SHA256SUMS     the archives' sha256 (`sha256sum -c --ignore-missing SHA256SUMS`)
# The binaries are scripts/action-image.sh's (the same static, stripped
# binaries the action's image holds); VERSION is Cargo.toml's, which
# `cargo binstall` builds the download URL from (Cargo.toml's
# [package.metadata.binstall]). Archives are reproducible: sorted entries,
# owner 0, every mtime the last commit's time, gzip without a name or time.
#
#   scripts/dist.sh [RUST_TARGET...]
#       Builds the release binaries first (scripts/action-image.sh; default
#       x86_64-unknown-linux-gnu; aarch64-unknown-linux-gnu needs that rust
#       target and Debian's gcc-aarch64-linux-gnu, as release.yml installs).
#   scripts/dist.sh --staged
#       Packages what target/action-image holds now, building nothing: the
#       release workflow after its scripts/action-image.sh, and
#       tests/dist.rs after the test command staged its test-profile binary.
set -euo pipefail
cd "$(dirname "$0")/.."
staged=target/action-image
out=${DIST_DIR:-target/dist}
if [ "${1:-}" = --staged ]; then
  [ $# -eq 1 ] || { echo "scripts/dist.sh: --staged takes no targets" >&2; exit 2; }
  [ -s "$staged/profile" ] || {
    echo "scripts/dist.sh: nothing staged in $staged: run scripts/action-image.sh first" >&2
    exit 1
  }
else
  bash scripts/action-image.sh "$@"
fi

version=$(cargo metadata --no-deps --format-version 1 --offline --locked |
  jq -r '.packages[] | select(.name == "settings-image") | .version')
[ -n "$version" ] || { echo "scripts/dist.sh: no version in Cargo.toml" >&2; exit 1; }
# Every mtime in the archives: the last commit's time (0 outside git).
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}

# Completions and man pages come from a binary this machine runs: they
# describe the same commands on every platform.
host=$staged/$(case "$(uname -m)" in x86_64) echo amd64 ;; aarch64) echo arm64 ;; *) uname -m ;; esac)/settings-image
[ -x "$host" ] || { echo "scripts/dist.sh: no staged binary for this machine ($host)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/completions" "$work/man"
"$host" completions bash >"$work/completions/settings-image.bash"
"$host" completions zsh >"$work/completions/_settings-image"
"$host" completions fish >"$work/completions/settings-image.fish"
"$host" man "$work/man"

shopt -s nullglob
licences=(LICENSE* LICENCE* COPYING*)
shopt -u nullglob
if [ ${#licences[@]} -eq 0 ]; then
  echo "scripts/dist.sh: warning: the repository has no LICENSE file; the archives carry none" >&2
fi

rm -rf "$out"
mkdir -p "$out"
for dir in "$staged"/*/; do
  arch=$(basename "$dir")
  [ -f "$dir/settings-image" ] || continue
  case "$arch" in
    amd64) target=x86_64-unknown-linux-gnu ;;
    arm64) target=aarch64-unknown-linux-gnu ;;
    *) echo "scripts/dist.sh: unknown staged platform $arch" >&2; exit 1 ;;
  esac
  name=settings-image-v$version-$target
  root=$work/$name
  mkdir -p "$root"
  install -m 0755 "$dir/settings-image" "$root/settings-image"
  install -m 0644 README.md "$root/README.md"
  for l in "${licences[@]}"; do install -m 0644 "$l" "$root/$l"; done
  python3 scripts/third-party-licences.py "$target" >"$root/THIRD-PARTY-LICENSES.txt"
  cp -r docs "$root/docs"
  cp -r "$work/completions" "$work/man" "$root/"
  chmod -R u=rwX,go=rX "$root"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    --format=gnu -C "$work" -cf - "$name" | gzip -n >"$out/$name.tar.gz"
done
ls "$out"/*.tar.gz >/dev/null 2>&1 || { echo "scripts/dist.sh: no staged binary in $staged" >&2; exit 1; }
(cd "$out" && sha256sum -- *.tar.gz >SHA256SUMS)
echo "built from $(cat "$staged/profile") binaries:"
ls -l "$out"
