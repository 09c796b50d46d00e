# The start-up and shut-down the scripts/bench-*.sh share. Sourced, from
# the repository root, after `set -euo pipefail`:
#
#   . scripts/bench-lib.sh NAME      (NAME: the bench's name, for messages)
#
# bench_need TOOL...         exits 1 naming the first tool not installed
# bench_gnu_time             /usr/bin/time (GNU time), installed as root
# bench_bin [PATH]           $bin: PATH (a binary built elsewhere) when
#                            given and not empty, else a release build
# bench_work [TEMPLATE]      $work (mktemp -d [TEMPLATE]) and pids=(); at
#                            exit every process in $pids is stopped, each
#                            bench_at_exit command run, $work removed
# bench_work_in [DIR]        bench_work, or with DIR: $work=DIR, kept
# bench_at_exit CMD...       a command for the exit (output discarded)
# free_port                  a free loopback port
# wait_port HOST PORT        returns once HOST:PORT accepts a connection
# now, ms A B                the clock (s.ns), milliseconds from A to B
# bench_registry ADDR [--delete] [--tls CERT KEY]
#                            a CNCF distribution registry on ADDR
#                            (HOST:PORT), storage in $work/registry, its
#                            errors in $work/registry.log (no access log)
# bench_kube_up              scripts/kube.sh's API server in $work/kube
#                            (down at exit) with Flux's GitRepository CRD
#                            and ours; KUBECONFIG exported, kubectl()
# bench_flux_up [--node]     scripts/flux.sh's Flux in $work/flux (down at
#                            exit); $flux_cache, KUBECONFIG, kubectl(),
#                            $certs and api PATH (GET as the admin)
# bench_git_repos NAME...    bare repositories $work/srv/NAME.git (pushes
#                            allowed) behind git http-backend, each cloned
#                            to $work/NAME on main; git's config in
#                            $work/gitconfig; $git_url the server's URL

bench_name="$1"

bench_need() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "$bench_name: $t is missing: run scripts/deps.sh" >&2; exit 1; }
  done
}

bench_gnu_time() {
  [ -x /usr/bin/time ] && return 0
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
  else
    echo "$bench_name: /usr/bin/time is missing: apt-get install time" >&2
    exit 1
  fi
}

bench_bin() {
  if [ -n "${1:-}" ]; then
    bin="$1"
  else
    cargo build --release --locked --quiet
    bin="$PWD/target/release/settings-image"
  fi
}

bench_work() {
  work="$(mktemp -d "$@")"
  bench_keep=""
  pids=()
  bench_exit=()
  trap bench_cleanup EXIT
}

bench_work_in() {
  if [ -z "${1:-}" ]; then
    bench_work
    return
  fi
  bench_work
  rm -rf "$work"
  work="$1"
  bench_keep=1
  mkdir -p "$work"
}

bench_at_exit() {
  bench_exit+=("$*")
}

bench_cleanup() {
  local p c
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for c in "${bench_exit[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
  [ -n "$bench_keep" ] || rm -rf "$work"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$bench_name: nothing listens on $1:$2" >&2
  exit 1
}

now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%d", (b-a)*1000}'; }

bench_registry() {
  local addr="$1" storage="" tls=""
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --delete) storage=$'  delete:\n    enabled: true\n'; shift ;;
      --tls) tls=$'  tls:\n    certificate: '"$2"$'\n    key: '"$3"$'\n'; shift 3 ;;
      *) echo "bench_registry: no option $1 (--delete, --tls CERT KEY)" >&2; exit 2 ;;
    esac
  done
  printf 'version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n%shttp:\n  addr: %s\n%s' \
    "$work/registry" "$storage" "$addr" "$tls" > "$work/registry.yml"
  docker-registry serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
  pids+=($!)
  wait_port "${addr%:*}" "${addr##*:}"
}

kubectl() { "$KUBECTL" "$@"; }

bench_kube_up() {
  bench_at_exit bash scripts/kube.sh down "$work/kube"
  eval "$(bash scripts/kube.sh up "$work/kube")"
  export KUBECONFIG="$KUBECONFIG_OUT"
  kubectl apply --server-side -f tests/fixtures/flux-crds/source.toolkit.fluxcd.io_gitrepositories.yaml >/dev/null
  kubectl apply --server-side -f config/crd/settings-image.configbutler.io_settingsimages.yaml >/dev/null
  kubectl wait --for=condition=Established --timeout=60s crd/gitrepositories.source.toolkit.fluxcd.io crd/settingsimages.settings-image.configbutler.io >/dev/null
}

bench_flux_up() {
  bench_at_exit bash scripts/flux.sh down "$work/flux"
  flux_cache=$(bash scripts/flux.sh build)
  eval "$(bash scripts/flux.sh up "$work/flux" "$@")"
  export KUBECONFIG
  certs="$KUBE_STATE_DIR/certs"
}

api() { curl -fsS --cacert "$certs/ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" "$APISERVER_URL$1"; }

bench_git_repos() {
  local r
  export GIT_CONFIG_GLOBAL="$work/gitconfig" GIT_CONFIG_NOSYSTEM=1
  mkdir -p "$work/srv"
  git config --global user.name bench; git config --global user.email bench@example.com
  for r in "$@"; do
    git init -q --bare -b main "$work/srv/$r.git"
    git -C "$work/srv/$r.git" config http.receivepack true
    git clone -q "$work/srv/$r.git" "$work/$r" 2>/dev/null
    git -C "$work/$r" checkout -q -B main
  done
  python3 tests/support_git/serve.py --root "$work/srv" --log "$work/git.log" > "$work/git.port" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/git.port" ] && break; sleep 0.1; done
  git_url="http://127.0.0.1:$(cat "$work/git.port")"
}
