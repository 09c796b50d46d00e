#!/usr/bin/env bash
# End-to-end push benchmark against a loopback CNCF distribution registry.
#
# scripts/bench-push.sh [ROUNDS]
#   For a 50-file settings folder, each round changes one file (so every
#   push is a first push of new content) and times:
#     settings-image push
#     buildah bud (FROM scratch + COPY, --isolation chroot, vfs) + buildah push
#     umoci init/new/insert + skopeo copy
#   and then counts the registry requests a re-push of unchanged content
#   makes (from the registry's access log; GET /v2/ is the authentication
#   probe). Targets: settings-image <= 0.5x umoci+skopeo, <= 0.2x buildah,
#   and a re-push in <= 3 requests after authentication. Exits 1 when one
#   is missed.
#
# scripts/bench-push.sh --latency [ROUNDS]
#   The same folder in a git repository, pushed through a loopback proxy
#   that holds every byte from client to registry for LATENCY_MS (default
#   50) ms, as a runner sees ghcr.io: each request costs at least that. For
#   each row, a first push (a new commit into a new repository) and a
#   re-push of it, wall time and requests after authentication:
#     plain     --tag latest                             (provenance on)
#     stamped   --timestamp-tag main --branch-tag main   (provenance on)
#     noprov    --tag latest --no-provenance
#     next      as stamped, the next commit into a repository that has
#               the earlier ones (what CI does on every change)
#   With BASELINE_BIN set, that binary runs too, alternating with ours
#   round by round, and the ratios (ours / baseline) of the medians are
#   printed. Reports only; the request-count test (tests/requests.rs) is
#   what fails when a count grows.
#
# scripts/bench-push.sh --peers [ROUNDS]
#   settings-image push beside the Go tools people push artifacts with
#   (tests/go/oci, on PATH through scripts/deps.sh), against the same
#   loopback registry, directly and then behind the LATENCY_MS (default
#   50) ms proxy. Each round changes one file of the 50-file folder (a
#   plain folder: no provenance, as the peers attach none), then each peer,
#   in an order that rotates round by round, pushes it into a new
#   repository (first push) and again, unchanged (re-push):
#     ours          settings-image push --tag latest
#     oras          oras push of the folder: oras makes the tar+gzip layer
#                   itself; its default manifest (image spec 1.1: the empty
#                   config, artifactType application/vnd.unknown.artifact.v1)
#     crane-append  tar+gzip of the folder (GNU tar sorted, mtime 0, owner
#                   0, gzip -n), then crane append --oci-empty-base of it
#     crane-push    settings-image build into a new OCI layout, then crane
#                   push of it (the bytes ours pushes, crane's transport)
#   Wall time medians, requests per push after authentication (the last
#   round's), and the ratios peer / ours. Then whether each peer is byte
#   reproducible: the unchanged folder pushed twice into two new
#   repositories, every file's mtime moved and the clock in another second
#   in between (as a checkout on another runner), same manifest digest?
#
# Default ROUNDS: 5; medians are reported. BENCH_BIN=PATH times
# that binary instead of building target/release/settings-image.
set -euo pipefail
cd "$(dirname "$0")/.."
latency=""
peers=""
if [ "${1:-}" = "--latency" ]; then
  latency="${LATENCY_MS:-50}"
  shift
elif [ "${1:-}" = "--peers" ]; then
  peers=1
  latency="${LATENCY_MS:-50}"
  shift
fi
rounds="${1:-5}"

need=(docker-registry python3 git curl)
[ -n "$latency" ] || need+=(buildah umoci skopeo)
[ -z "$peers" ] || need+=(oras crane tar gzip)
. scripts/bench-lib.sh bench-push
bench_need "${need[@]}"
bench_bin "${BENCH_BIN:-}"
baseline="${BASELINE_BIN:-}"

work="$(mktemp -d)"
pids=()
# Stops a process we started: TERM, then KILL if it is still there after
# 5 s; never waits unbounded.
stop() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  set +e
  for p in "${pids[@]}"; do stop "$p"; done
  if [ -z "$latency" ] && [ -z "$peers" ]; then
    # buildah's vfs storage holds root-owned layers; remove it through buildah.
    buildah --root "$work/bstore" --runroot "$work/brun" --storage-driver vfs rmi -a -f >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT


port="$(free_port)"
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
pids+=($!)
wait_port 127.0.0.1 "$port"
host="127.0.0.1:$port"

# The 50-file folder.
make_folder() {
  mkdir -p "$1/conf.d"
  for i in $(seq -w 1 50); do
    if [ $((10#$i % 5)) = 0 ]; then f="$1/conf.d/part-$i.yaml"; else f="$1/setting-$i.yaml"; fi
    {
      echo "# settings file $i"
      for j in $(seq 1 40); do echo "key_${i}_${j}: value-$i-$j-$(printf '%08x' $((10#$i * 7919 + j)))"; done
    } > "$f"
  done
}

now() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f", n/1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

# Registry requests logged after line $1 of the access log, without the
# authentication probe (GET /v2/).
requests_since() {
  tail -n +"$(($1 + 1))" "$work/access.log" | grep '"[A-Z]* /v2/' | grep -vc '"GET /v2/ ' || true
}
log_lines() { wc -l < "$work/access.log"; }

if [ -n "$latency" ]; then
  # The proxy: every chunk the client sends is passed on LATENCY_MS after
  # it arrived, in order; answers come back at once.
  pport="$(free_port)"
  cat > "$work/latency.py" <<'EOF'
import asyncio, sys

listen, upstream, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000


async def delayed(reader, writer):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def read():
        while True:
            data = await reader.read(65536)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                return

    task = asyncio.ensure_future(read())
    try:
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not data:
                break
            writer.write(data)
            await writer.drain()
    finally:
        task.cancel()
        writer.close()


async def straight(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def handle(client_r, client_w):
    try:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream)
    except OSError:
        client_w.close()
        return
    await asyncio.gather(delayed(client_r, up_w), straight(up_r, client_w), return_exceptions=True)


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


asyncio.run(main())
EOF
  python3 "$work/latency.py" "$pport" "$port" "$latency" 2> "$work/proxy.err" &
  pids+=($!)
  wait_port 127.0.0.1 "$pport"
  via="127.0.0.1:$pport"
fi

if [ -n "$peers" ]; then
  src="$work/settings"
  make_folder "$src"
  names=(ours oras crane-append crane-push)
  # Pushes the folder as peer $1 to $2 (HOST/NAME), tag latest.
  push_as() {
    case "$1" in
      ours) "$bin" push --path "$src" --repository "$2" --tag latest ;;
      oras) (cd "$work" && oras push --plain-http "$2:latest" settings) ;;
      crane-append)
        tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$src" -cf - . | gzip -n > "$work/layer.tar.gz"
        crane append --insecure --oci-empty-base -f "$work/layer.tar.gz" -t "$2:latest"
        ;;
      crane-push)
        rm -rf "$work/layout"
        "$bin" build --path "$src" --output "$work/layout" --tag latest
        crane push --insecure "$work/layout" "$2:latest"
        ;;
    esac
  }
  # One push: wall time (ns) into $took, requests into $asked.
  timed() {
    local before s
    before=$(log_lines)
    s=$(now)
    push_as "$1" "$2" >/dev/null 2> "$work/push.err" ||
      { echo "bench-push: $1 push to $2 failed:" >&2; cat "$work/push.err" >&2; exit 1; }
    took=$(($(now) - s))
    asked=$(requests_since "$before")
  }
  digest_at() {
    curl -fsSI -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
      -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
      "http://$host/v2/$1/manifests/latest" | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'
  }
  declare -A first re nfirst nre
  for via_name in direct latency; do
    h="$host"
    [ "$via_name" = latency ] && h="$via"
    for r in $(seq 1 "$rounds"); do
      echo "round $r $via_name: changed" > "$src/setting-01.yaml"
      n=${#names[@]}
      for k in $(seq 0 $((n - 1))); do
        peer=${names[$(((k + r) % n))]}
        repo="$h/bench/$peer-$via_name-r$r"
        timed "$peer" "$repo"
        first[$via_name.$peer]+="$took "
        nfirst[$via_name.$peer]="$asked"
        timed "$peer" "$repo"
        re[$via_name.$peer]+="$took "
        nre[$via_name.$peer]="$asked"
      done
    done
  done
  echo "push peers: 50 files, $rounds rounds each, peers in rotating order; medians (requests after authentication); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "  ours: $bin; oras $(oras version | sed -n 's/^Version: *//p'), crane $(crane version)"
  for via_name in direct latency; do
    [ "$via_name" = direct ] && echo "  direct (loopback)" || echo "  behind ${latency} ms per request"
    for peer in "${names[@]}"; do
      # shellcheck disable=SC2086 # lists of numbers
      mf=$(median ${first[$via_name.$peer]}) && mr=$(median ${re[$via_name.$peer]})
      eval "m_f_${via_name}_${peer//-/_}=$mf m_r_${via_name}_${peer//-/_}=$mr"
      eval "of=\$m_f_${via_name}_ours or=\$m_r_${via_name}_ours"
      # shellcheck disable=SC2154 # set by eval
      printf '    %-13s first push %8s ms (%2s requests, %5sx ours)   re-push %8s ms (%2s requests, %5sx ours)\n' \
        "$peer" "$(ms "$mf")" "${nfirst[$via_name.$peer]}" "$(ratio "$mf" "$of")" \
        "$(ms "$mr")" "${nre[$via_name.$peer]}" "$(ratio "$mr" "$or")"
    done
  done
  echo "  byte reproducible (the same folder pushed twice, mtimes moved, another second):"
  for peer in "${names[@]}"; do
    push_as "$peer" "$host/bench/repro-$peer-a" >/dev/null 2>&1
    a=$(digest_at "bench/repro-$peer-a")
    t=$(date +%s)
    find "$src" -type f -exec touch -d "@$((t + 3600))" {} +
    while [ "$(date +%s)" = "$t" ]; do sleep 0.05; done
    push_as "$peer" "$host/bench/repro-$peer-b" >/dev/null 2>&1
    b=$(digest_at "bench/repro-$peer-b")
    [ -n "$a" ] && [ -n "$b" ] || { echo "bench-push: no digest for $peer ($a, $b)" >&2; exit 1; }
    printf '    %-13s %s  (%s, %s)\n' "$peer" "$([ "$a" = "$b" ] && echo yes || echo no)" "${a:7:12}" "${b:7:12}"
  done
  exit 0
fi

if [ -n "$latency" ]; then

  src="$work/git"
  mkdir -p "$src/configs/shop"
  make_folder "$src/configs/shop"
  g() { git -C "$src" -c user.name=bench -c user.email=bench@example.com "$@"; }
  g init -q -b main
  commit_at() {
    g add -A
    GIT_AUTHOR_DATE="@$1 +0000" GIT_COMMITTER_DATE="@$1 +0000" g commit -q -m "change at $1"
  }
  commit_at 1700000000

  rows=(plain stamped noprov next)
  row_args() {
    case "$1" in
      plain) echo "--tag latest" ;;
      stamped | next) echo "--timestamp-tag main --branch-tag main" ;;
      noprov) echo "--tag latest --no-provenance" ;;
    esac
  }
  names=(ours)
  bins=("$bin")
  if [ -n "$baseline" ]; then
    names+=(baseline)
    bins+=("$baseline")
  fi
  # One push: its wall time (ns) into $took, its requests into $asked.
  push_once() {
    local b="$1" repo="$2" row="$3" before s
    before=$(log_lines)
    s=$(now)
    # shellcheck disable=SC2046 # the row's flags are words
    "$b" push --path "$src/configs/shop" --repository "$via/$repo" $(row_args "$row") >/dev/null 2> "$work/push.err" ||
      { echo "bench-push: $b push $row failed:" >&2; cat "$work/push.err" >&2; exit 1; }
    took=$(($(now) - s))
    asked=$(requests_since "$before")
  }
  # The repositories the next row pushes into hold the first commit.
  for i in "${!bins[@]}"; do push_once "${bins[$i]}" "bench/${names[$i]}-next" next; done
  declare -A first re nfirst nre
  for r in $(seq 1 "$rounds"); do
    echo "round $r: changed" > "$src/configs/shop/setting-01.yaml"
    commit_at $((1700000000 + r * 100))
    order=("${!bins[@]}")
    if [ $((r % 2)) = 0 ] && [ "${#bins[@]}" = 2 ]; then order=(1 0); fi
    for i in "${order[@]}"; do
      n="${names[$i]}"
      for row in "${rows[@]}"; do
        repo="bench/$n-$row-r$r"
        [ "$row" = next ] && repo="bench/$n-next"
        push_once "${bins[$i]}" "$repo" "$row"
        first[$n.$row]+="$took "
        nfirst[$n.$row]="$asked"
        push_once "${bins[$i]}" "$repo" "$row"
        re[$n.$row]+="$took "
        nre[$n.$row]="$asked"
      done
    done
  done
  echo "settings-image push behind ${latency} ms per request: 50 files, $rounds rounds, medians (requests after authentication)"
  for n in "${names[@]}"; do
    echo "  $n: $([ "$n" = ours ] && echo "$bin" || echo "$baseline")"
    for row in "${rows[@]}"; do
      # shellcheck disable=SC2086 # lists of numbers
      mf=$(median ${first[$n.$row]}) && mr=$(median ${re[$n.$row]})
      printf '    %-8s first push %8s ms (%2s requests)   re-push %8s ms (%2s requests)\n' \
        "$row" "$(ms "$mf")" "${nfirst[$n.$row]}" "$(ms "$mr")" "${nre[$n.$row]}"
      eval "m_${n}_${row}_f=$mf m_${n}_${row}_r=$mr"
    done
  done
  if [ -n "$baseline" ]; then
    echo "  ours / baseline (medians):"
    for row in "${rows[@]}"; do
      eval "af=\$m_ours_${row}_f ar=\$m_ours_${row}_r bf=\$m_baseline_${row}_f br=\$m_baseline_${row}_r"
      # shellcheck disable=SC2154 # set by eval
      printf '    %-8s first push %s   re-push %s\n' "$row" "$(ratio "$af" "$bf")" "$(ratio "$ar" "$br")"
    done
  fi
  exit 0
fi

src="$work/settings"
make_folder "$src"
printf 'FROM scratch\nCOPY . /\n' > "$work/Dockerfile"

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

m_si=$(median "${t_si[@]}"); m_bu=$(median "${t_bu[@]}"); m_um=$(median "${t_um[@]}")

# Re-push of unchanged content: requests in the access log.
before=$(grep -c '"[A-Z]* /v2/' "$work/access.log" || true)
out=$("$bin" push --path "$src" --repository "$host/bench/si" --tag latest --json)
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
