#!/usr/bin/env bash
# End-to-end push benchmark against a loopback CNCF distribution registry.
#
# For a 50-file settings folder, each round changes one file (so every push
# is a first push of new content) and times:
#   settings-image push
#   buildah bud (FROM scratch + COPY, --isolation chroot, vfs) + buildah push
#   umoci init/new/insert + skopeo copy
# and then counts the registry requests a re-push of unchanged content makes
# (from the registry's access log; GET /v2/ is the authentication probe).
#
# Usage: scripts/bench-push.sh [ROUNDS]   (default 5; medians are reported)
# Targets: settings-image <= 0.5x umoci+skopeo, <= 0.2x buildah, and a
# re-push in <= 3 requests after authentication. Exits 1 when one is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"

for t in docker-registry buildah umoci skopeo; do
  command -v "$t" >/dev/null || { echo "bench-push: $t is missing: run scripts/deps.sh" >&2; exit 1; }
done
cargo build --release --quiet
bin="$PWD/target/release/settings-image"

work="$(mktemp -d)"
reg_pid=""
cleanup() {
  [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null && wait "$reg_pid" 2>/dev/null
  # buildah's vfs storage holds root-owned layers; remove it through buildah.
  buildah --root "$work/bstore" --runroot "$work/brun" --storage-driver vfs rmi -a -f >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cat > "$work/config.yml" <<EOF
version: 0.1
log:
  level: error
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $work/data
http:
  addr: 127.0.0.1:$port
EOF
docker-registry serve "$work/config.yml" > "$work/access.log" 2> "$work/registry.err" &
reg_pid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
host="127.0.0.1:$port"

src="$work/settings"
mkdir -p "$src/conf.d"
for i in $(seq -w 1 50); do
  if [ $((10#$i % 5)) = 0 ]; then f="$src/conf.d/part-$i.yaml"; else f="$src/setting-$i.yaml"; fi
  {
    echo "# settings file $i"
    for j in $(seq 1 40); do echo "key_${i}_${j}: value-$i-$j-$(printf '%08x' $((10#$i * 7919 + j)))"; done
  } > "$f"
done
printf 'FROM scratch\nCOPY . /\n' > "$work/Dockerfile"

now() { date +%s%N; }
B=(buildah --root "$work/bstore" --runroot "$work/brun" --storage-driver vfs)

declare -a t_si t_bu t_um
for r in $(seq 1 "$rounds"); do
  echo "round $r: changed $(date +%s%N)" > "$src/setting-01.yaml"

  s=$(now)
  "$bin" push --path "$src" --repository "$host/bench/si" --tag latest >/dev/null
  t_si+=($(( $(now) - s )))

  s=$(now)
  "${B[@]}" bud --quiet --isolation chroot -f "$work/Dockerfile" -t "localhost/bench-bu:$r" "$src" >/dev/null
  "${B[@]}" push --quiet --tls-verify=false "localhost/bench-bu:$r" "docker://$host/bench/buildah:latest" >/dev/null
  t_bu+=($(( $(now) - s )))

  s=$(now)
  rm -rf "$work/layout"
  umoci init --layout "$work/layout"
  umoci new --image "$work/layout:latest"
  umoci insert --image "$work/layout:latest" "$src" /
  skopeo copy --quiet --dest-tls-verify=false "oci:$work/layout:latest" "docker://$host/bench/umoci:latest"
  t_um+=($(( $(now) - s )))
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f", n/1e6}'; }
m_si=$(median "${t_si[@]}"); m_bu=$(median "${t_bu[@]}"); m_um=$(median "${t_um[@]}")

# Re-push of unchanged content: requests in the access log.
before=$(grep -c '"[A-Z]* /v2/' "$work/access.log" || true)
out=$("$bin" push --path "$src" --repository "$host/bench/si" --tag latest --json)
sleep 0.2
after_log=$(tail -n +"$((before + 1))" "$work/access.log" | grep '"[A-Z]* /v2/' || true)
total=$(printf '%s\n' "$after_log" | grep -c . || true)
auth=$(printf '%s\n' "$after_log" | grep -c '"GET /v2/ ' || true)
after_auth=$((total - auth))
pushed=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["pushed"], d["uploaded_blobs"])')

r_um=$(awk -v a="$m_si" -v b="$m_um" 'BEGIN {printf "%.3f", a/b}')
r_bu=$(awk -v a="$m_si" -v b="$m_bu" 'BEGIN {printf "%.3f", a/b}')
cat <<EOF
settings-image push bench: 50 files, $rounds rounds of a first push of changed content, medians
  settings-image push            $(ms "$m_si") ms
  umoci init/new/insert + skopeo $(ms "$m_um") ms
  buildah bud + buildah push     $(ms "$m_bu") ms
  ratio vs umoci+skopeo          $r_um (target <= 0.5)
  ratio vs buildah               $r_bu (target <= 0.2)
  re-push (pushed, blobs)        $pushed
  re-push registry requests      $total total, $auth authentication (GET /v2/), $after_auth after authentication (target <= 3)
re-push requests:
$(printf '%s\n' "$after_log" | sed -E 's/.*"([A-Z]+ [^ ]+) HTTP[^"]*" ([0-9]+).*/  \1 -> \2/')
EOF
ok=1
awk -v r="$r_um" 'BEGIN {exit !(r <= 0.5)}' || ok=0
awk -v r="$r_bu" 'BEGIN {exit !(r <= 0.2)}' || ok=0
[ "$after_auth" -le 3 ] || ok=0
[ "$ok" = 1 ] || { echo "bench-push: a target was missed" >&2; exit 1; }
