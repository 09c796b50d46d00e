#!/usr/bin/env bash
# Peak memory of a push, measured where it belongs: a benchmark, not a test.
#
# Pushes a one-file folder and a folder holding a 40 MiB random file to a
# loopback CNCF distribution registry (chunked, then --monolithic), and
# copies the big image with skopeo (the peer) from the OCI layout
# settings-image builds. Peaks are the children's max RSS (getrusage).
# Reports the big/small ratio and settings-image/skopeo for the big image.
#
# Usage: scripts/bench-memory.sh   (SETTINGS_IMAGE_BIN=path to skip the release build)
# Target: a 40 MiB layer adds less than 16 MiB over a tiny push (the layer
# is streamed, never held in memory). Exits 1 when it does not.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh bench-memory
bench_need docker-registry skopeo python3
# SETTINGS_IMAGE_BIN names another build (e.g. target/debug/settings-image).
bench_bin "${SETTINGS_IMAGE_BIN:-}"

bench_work
port="$(free_port)"
bench_registry "127.0.0.1:$port"
host="127.0.0.1:$port"

mkdir -p "$work/small" "$work/big" "$work/docker"
echo "a: 1" > "$work/small/a.yaml"
head -c $((40 * 1024 * 1024)) /dev/urandom > "$work/big/big.bin"

# peak_kib CMD...: runs CMD (quietly) and prints its max RSS in KiB.
peak_kib() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
export DOCKER_CONFIG="$work/docker"
small=$(peak_kib "$bin" push --path "$work/small" --repository "$host/mem/small" --tag v)
chunked=$(peak_kib "$bin" push --path "$work/big" --repository "$host/mem/chunked" --tag v)
mono=$(peak_kib "$bin" push --path "$work/big" --repository "$host/mem/mono" --tag v --monolithic)
"$bin" build --path "$work/big" --output "$work/layout" --tag v >/dev/null
peer=$(peak_kib skopeo copy --quiet --dest-tls-verify=false "oci:$work/layout:v" "docker://$host/mem/skopeo:v")

ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
echo "peak RSS (KiB): tiny push $small, 40 MiB chunked $chunked, 40 MiB monolithic $mono, skopeo copy $peer"
echo "ratios: chunked/tiny $(ratio "$chunked" "$small"), monolithic/tiny $(ratio "$mono" "$small"), chunked/skopeo $(ratio "$chunked" "$peer")"
fail=0
for m in chunked mono; do
  v=${!m}
  if [ "$v" -ge $((small + 16 * 1024)) ]; then
    echo "bench-memory: the $m push of a 40 MiB layer peaked at $v KiB, a tiny push at $small KiB" >&2
    fail=1
  fi
done
exit "$fail"
