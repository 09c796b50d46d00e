#!/usr/bin/env bash
# A throw-away Kubernetes v1.36.3 on this machine, built by the project
# itself: what the tests, scripts/flux.sh and the benchmarks run against.
#
#   scripts/kube.sh build             build Kubernetes, containerd and runc once
#                                     (cached); print their folders
#   scripts/kube.sh up DIR [--node]   start a cluster with its state in DIR; print
#                                     shell-sourceable variables
#   scripts/kube.sh down DIR          stop what `up DIR` started (twice is fine)
#
# Without --node: etcd (Debian's etcd-server) and kube-apiserver, the way
# controller-runtime's envtest runs them: free loopback ports, a CA of its
# own, an admin client certificate in system:masters, RBAC, the
# ServiceAccount admission plugin off (no token controller runs), etcd's
# data on /dev/shm when it can (etcd 3.4 fsyncs every write).
#
# With --node (as root): a whole single-node cluster, so that a Deployment
# becomes a running pod: plus kube-controller-manager, kube-scheduler,
# containerd, runc and a kubelet, and a registry the node pulls from
# (Debian's docker-registry over TLS, on this machine's own non-loopback
# address, its certificate signed by the cluster's CA; containerd reaches it
# through a hosts.toml in REGISTRY_HOSTS_DIR, where a test adds its own
# registries too). Two images are made from sources the machine has and
# pushed there: the sandbox (pause) image, compiled from the k8s.io/kubernetes
# module's build/pause/linux/pause.c with `gcc -static`, and a workload image
# holding Debian's busybox-static. Nothing is fetched from any other host.
#
# What these machines need, and what the node does about it:
# - cgroup v1: the kubelet refuses it unless `failCgroupV1: false`; the
#   cgroupfs driver (no systemd as PID 1).
# - no CAP_SYS_RESOURCE in the bounding set: runc cannot lower a sandbox's
#   oom_score_adj, so containerd clamps it (`restrict_oom_score_adj`).
# - the kubelet refuses a loopback node IP: this machine's first global
#   IPv4 address, which nothing but this machine's own processes talk to.
# - the kubelet rewrites vm.overcommit_memory, vm.panic_on_oom,
#   kernel.panic, kernel.panic_on_oops and kernel.keys.* machine-wide at
#   start: they are saved before it starts and put back once the node is
#   Ready (under a machine-wide lock, so two clusters starting at once do
#   not save each other's values).
# Two clusters in different DIRs coexist: every port is picked free, and
# the kubelet's cgroup root (/si-<hash of DIR>), the CNI bridge and network
# (si-<hash>), the pod subnet, containerd's root, state and sockets
# (/run/si-<hash>) and the kubelet's root (DIR/kubelet) are the DIR's own.
# `up` first cleans what a killed earlier run of the same DIR left (the
# processes it recorded, mounts under DIR, its cgroups, its bridge).
#
# Tools: tests/go/kube (k8s.io/kubernetes v1.36.3), tests/go/containerd
# (v2.4.2) and tests/go/runc (v1.5.3), each pinned by its go.mod + go.sum and
# built once by scripts/go-tools.sh (cold on 2 cores: Kubernetes about 16
# minutes, containerd 2, runc 1). Debian packages: etcd-server, openssl,
# curl, python3; with --node also docker-registry, containernetworking-plugins,
# gcc + libc6-dev, umoci, skopeo, busybox-static, iproute2, util-linux.
#
# Environment: KUBE_READY_TIMEOUT (seconds, default 120), KUBE_FEATURE_GATES
# (--feature-gates of the API server and the kubelet), KUBE_APISERVER_EXTRA_ARGS
# (word-split).
#
# Printed by `up` (and kept in DIR/env):
#   KUBE_STATE_DIR KUBECONFIG_OUT (the admin kubeconfig) APISERVER_URL ETCD_URL
#   ETCD_PID APISERVER_PID KUBECTL (this build's kubectl) KUBE_VERSION
# with --node also
#   NODE_NAME NODE_IP POD_SUBNET CGROUP_ROOT
#   REGISTRY (host:port) REGISTRY_CA REGISTRY_PID REGISTRY_HOSTS_DIR
#   PAUSE_IMAGE BUSYBOX_IMAGE CONTAINERD_ADDRESS CONTAINERD_VERSION RUNC_VERSION
#   CONTROLLER_MANAGER_PID SCHEDULER_PID CONTAINERD_PID KUBELET_PID
# and last READY_SECONDS. Each component logs to DIR/<name>.log; one that
# exits or never gets ready fails `up`: its log's tail, everything started
# stopped, exit 1.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
# shellcheck source=go-tools.sh
. "$HERE/go-tools.sh"

die() { echo "scripts/kube.sh: $*" >&2; exit 1; }
need() { local c; for c in "$@"; do command -v "$c" >/dev/null || die "$c is missing (bash scripts/deps.sh installs it)"; done; }

# The pieces of state a DIR owns. DIR is made absolute by the caller.
# One kubelet starts at a time on this machine (see the kernel settings above).
SYSCTL_LOCK=/run/lock/settings-image-kubelet-sysctl.lock
hash_of() { printf '%s' "$1" | sha256sum | cut -c1-8; }
run_dir() { echo "/run/si-$(hash_of "$1")"; }

build() {
  echo "KUBE_TOOLS=$(go_tools_build "$REPO/tests/go/kube")"
  echo "CONTAINERD_TOOLS=$(go_tools_build "$REPO/tests/go/containerd")"
  echo "RUNC_TOOLS=$(go_tools_build "$REPO/tests/go/runc")"
}

free_port() { # [address]
  python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1]); s.close()' "${1:-127.0.0.1}"
}

# This machine's first IPv4 address of global scope.
node_ip() {
  ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1
}

# --------------------------------------------------------------------- down

# Stops the processes NAME... whose PIDs DIR/NAME.pid recorded, together:
# TERM, then KILL after 10 s. Only a PID that /proc says still runs that
# program (not a reused PID).
stop_pids() {
  local dir=$1 name pid i pids=()
  shift
  for name in "$@"; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    if [ -n "$pid" ] && is_prog "$pid" "$(prog_of "$name")"; then
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    fi
    rm -f "$dir/$name.pid"
  done
  for pid in "${pids[@]}"; do
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
}
prog_of() { case $1 in registry) echo docker-registry ;; *) echo "$1" ;; esac; }
# Whether PID runs a program named PROG (its argv[0]'s last part).
is_prog() {
  local argv0
  argv0=$(tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null | head -1) || return 1
  [ "${argv0##*/}" = "$2" ]
}

# The PIDs of the containerd shims whose containerd listens on SOCKET (its
# `-address` argument, a path of this DIR's alone).
shims_of() {
  local f argv
  for f in /proc/[0-9]*/cmdline; do
    argv=$(tr '\0' ' ' 2>/dev/null < "$f") || continue
    case "$argv" in
      */containerd-shim-runc-v2\ *"-address $1 "*) f=${f#/proc/}; echo "${f%/cmdline}" ;;
    esac
  done
}

# Every process in the DIR's cgroups (the pods' containers), killed.
kill_cgroup_procs() {
  local root=$1 f p
  for f in /sys/fs/cgroup/*/"$root" /sys/fs/cgroup/"$root"; do
    [ -d "$f" ] || continue
    while read -r p; do kill -KILL "$p" 2>/dev/null || true; done < <(find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null)
  done
}
remove_cgroups() {
  local root=$1 f i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    for f in /sys/fs/cgroup/*/"$root" /sys/fs/cgroup/"$root"; do
      [ -d "$f" ] && find "$f" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    compgen -G "/sys/fs/cgroup/*/$root" >/dev/null || [ -d "/sys/fs/cgroup/$root" ] || return 0
    kill_cgroup_procs "$root"
    sleep 0.3
  done
  echo "scripts/kube.sh: cgroups left: $(ls -d /sys/fs/cgroup/*/"$root" /sys/fs/cgroup/"$root" 2>/dev/null | tr '\n' ' ')" >&2
}

# Unmounts everything mounted under each PATH, deepest first.
unmount_under() {
  local p m
  for p in "$@"; do
    [ -n "$p" ] || continue
    while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
      awk -v p="$p/" '{ m = $5; gsub(/\\040/, " ", m); if (index(m "/", p) == 1) print m }' /proc/self/mountinfo | sort -r)
  done
}

restore_sysctls() {
  local f=$1 k v
  [ -f "$f" ] || return 0
  while IFS='=' read -r k v; do
    [ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] || sysctl -q -w "$k=$v" >/dev/null 2>&1 || true
  done < "$f"
  rm -f "$f"
}

# Runs in a subshell without -e: every step is tried.
down() (
  set +e
  local dir=$1 h run netns=() f n
  [ -d "$dir" ] || die "usage: scripts/kube.sh down DIR (no folder $dir)"
  dir="$(cd "$dir" && pwd)"
  h=$(hash_of "$dir")
  run=$(run_dir "$dir")
  # The pods' network namespaces, read from their bundles before anything
  # stops (a stopped task's bundle goes).
  for f in "$run"/containerd/io.containerd.runtime.v2.task/*/*/config.json; do
    [ -f "$f" ] || continue
    n=$(python3 -c 'import json,sys
for ns in json.load(open(sys.argv[1])).get("linux", {}).get("namespaces", []):
    if ns.get("type") == "network" and ns.get("path", "").startswith("/var/run/netns/"): print(ns["path"])' "$f" 2>/dev/null) || true
    [ -n "$n" ] && netns+=("$n")
  done
  stop_pids "$dir" kubelet kube-scheduler kube-controller-manager
  kill_cgroup_procs "si-$h"
  stop_pids "$dir" containerd
  # containerd's shims: the ones started for this containerd's socket.
  for n in $(shims_of "$run/containerd.sock"); do kill -KILL "$n" 2>/dev/null || true; done
  stop_pids "$dir" kube-apiserver etcd registry
  unmount_under "$dir" "$run"
  for n in "${netns[@]}"; do
    umount "$n" 2>/dev/null || true
    rm -f "$n"
  done
  remove_cgroups "si-$h"
  if ip link show "si-$h" >/dev/null 2>&1; then ip link del "si-$h" 2>/dev/null || true; fi
  if [ -f "$dir/sysctl-saved" ]; then
    exec 8>"$SYSCTL_LOCK"
    flock 8
    restore_sysctls "$dir/sysctl-saved"
    exec 8>&-
  fi
  if [ -f "$dir/etcd-data-dir" ]; then
    f=$(cat "$dir/etcd-data-dir")
    case "$f" in /dev/shm/kube-etcd.*) rm -rf "$f" ;; esac
  fi
  # The bulky state goes; certificates, logs and env stay for a look.
  rm -rf "$run" "$dir/containerd" "$dir/kubelet" "$dir/registry" "$dir/etcd" "$dir/images"
  return 0
)

# ----------------------------------------------------------------------- up

# Starts NAME (its log DIR/NAME.log, its PID DIR/NAME.pid) in a session of
# its own, so the caller's signals and terminal leave it alone.
start() {
  local name=$1; shift
  setsid "$@" >"$DIR/$name.log" 2>&1 </dev/null 8>&- &
  echo $! > "$DIR/$name.pid"
  STARTED+=("$name")
}

# NAME WHY: says so with the end of NAME's log, and exits (the EXIT trap
# stops everything).
fail() {
  local name=$1
  {
    echo "scripts/kube.sh: $name $2; the end of $DIR/$name.log:"
    tail -n 30 "$DIR/$name.log" 2>/dev/null || true
  } >&2
  exit 1
}

# `up`'s EXIT trap: unless the cluster is up, stop whatever started.
up_exit() {
  local rc=$?
  [ "$UP_DONE" = 1 ] && return
  exec 8>&-
  [ "$rc" = 0 ] || echo "scripts/kube.sh: up $DIR failed; everything it started is stopped" >&2
  down "$DIR" >/dev/null 2>&1 || true
}

# Fails the component that is no longer running, if one is not.
check_alive() {
  local n pid
  for n in "${STARTED[@]}"; do
    pid=$(cat "$DIR/$n.pid")
    kill -0 "$pid" 2>/dev/null || fail "$n" "exited"
  done
}

# Waits until CMD succeeds: WHO is the component blamed when time runs out.
wait_for() { # WHO WHAT CMD...
  local who=$1 what=$2; shift 2
  while ! "$@" >/dev/null 2>&1; do
    check_alive
    [ "$(date +%s)" -lt "$DEADLINE" ] || fail "$who" "did not get ready ($what) within ${READY_TIMEOUT} s"
    sleep 0.2
  done
  mark "$what"
}

mark() { echo "$1 $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')" >> "$DIR/up-times"; }

cert() { # NAME SUBJECT EXTENSIONS (the CA signs)
  local n=$1
  openssl ecparam -name prime256v1 -genkey -noout -out "$C/$n.key" 2>/dev/null
  openssl req -new -key "$C/$n.key" -subj "$2" -out "$C/$n.csr" 2>/dev/null
  printf '%b' "$3" > "$C/$n.ext"
  openssl x509 -req -in "$C/$n.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" -CAcreateserial -days 3650 \
    -sha256 -extfile "$C/$n.ext" -out "$C/$n.crt" 2>/dev/null
  rm -f "$C/$n.csr" "$C/$n.ext"
}
CLIENT='extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n'
SERVER='extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n'

kubeconfig() { # FILE CERTNAME (certificates embedded)
  local b64ca b64crt b64key
  b64ca=$(base64 -w0 < "$C/ca.crt"); b64crt=$(base64 -w0 < "$C/$2.crt"); b64key=$(base64 -w0 < "$C/$2.key")
  (umask 077; cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $b64ca
users:
- name: $2
  user:
    client-certificate-data: $b64crt
    client-key-data: $b64key
contexts:
- name: kube
  context:
    cluster: kube
    user: $2
    namespace: default
current-context: kube
EOF
  )
}

# The pause and busybox images (PAUSE_IMAGE, BUSYBOX_IMAGE), packaged with
# umoci and pushed with skopeo; K8S_SRC is the k8s.io/kubernetes module's folder.
images() {
  local img="$DIR/images" arch a
  mkdir -p "$img/trust" "$img/busybox/bin" "$img/busybox/etc" "$img/busybox/tmp"
  cp "$C/ca.crt" "$img/trust/ca.crt"
  arch=$(dpkg --print-architecture)
  gcc -Os -Wall -Werror -static -DVERSION="${PAUSE_IMAGE##*:}-settings-image" -o "$img/pause" "$K8S_SRC/build/pause/linux/pause.c"
  strip "$img/pause"
  umoci init --layout "$img/layout"
  umoci new --image "$img/layout:pause"
  umoci insert --image "$img/layout:pause" "$img/pause" /pause
  umoci config --image "$img/layout:pause" --os linux --architecture "$arch" \
    --config.entrypoint /pause --config.user 65535:65535
  skopeo copy --quiet --dest-cert-dir "$img/trust" "oci:$img/layout:pause" "docker://$PAUSE_IMAGE"
  cp "$(command -v busybox)" "$img/busybox/bin/busybox"
  for a in $("$img/busybox/bin/busybox" --list); do
    [ "$a" = busybox ] || ln -s busybox "$img/busybox/bin/$a"
  done
  umoci new --image "$img/layout:busybox"
  umoci insert --image "$img/layout:busybox" "$img/busybox" /
  umoci config --image "$img/layout:busybox" --os linux --architecture "$arch" \
    --config.cmd sh --config.env PATH=/bin
  skopeo copy --quiet --dest-cert-dir "$img/trust" "oci:$img/layout:busybox" "docker://$BUSYBOX_IMAGE"
}

# A /24 for the pods that no route of this machine covers yet.
pod_subnet() {
  local n a b i
  n=$((16#$1))
  a=$((64 + (n >> 8) % 128)); b=$((n % 256))
  for i in $(seq 0 255); do
    if ! ip -4 route show | grep -q "^10\.$a\.$(( (b + i) % 256 ))\."; then
      echo "10.$a.$(( (b + i) % 256 ))"; return
    fi
  done
  die "no free 10.$a.x.0/24 for the pods"
}

# The kubelet's cgroup root, in every hierarchy (cgroup v1) or the unified one.
make_cgroup_root() {
  local root=$1 h
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    mkdir -p "/sys/fs/cgroup/$root"
    for h in $(cat /sys/fs/cgroup/cgroup.subtree_control); do
      echo "+$h" > "/sys/fs/cgroup/$root/cgroup.subtree_control" 2>/dev/null || true
    done
    return
  fi
  for h in /sys/fs/cgroup/*/; do
    mountpoint -q "$h" || continue
    mkdir -p "$h$root"
    if [ -f "${h}cpuset.cpus" ]; then
      cat "${h}cpuset.cpus" > "$h$root/cpuset.cpus"
      cat "${h}cpuset.mems" > "$h$root/cpuset.mems"
    fi
  done
}

up() {
  local node=0 t0 h run kube ctd runc_bin etcd_data api_port etcd_port peer_port kcm_port sched_port
  DIR=$1; shift
  case "${1:-}" in
    --node) node=1 ;;
    "") ;;
    *) die "unknown option $1 (usage: scripts/kube.sh up DIR [--node])" ;;
  esac
  need etcd openssl curl python3 setsid
  if [ "$node" = 1 ]; then
    [ "$(id -u)" = 0 ] || die "--node needs root (cgroups, mounts, the pods' network)"
    need docker-registry gcc strip umoci skopeo busybox ip mountpoint flock sysctl dpkg-query
    [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] \
      || die "the CNI plugins are missing from /usr/lib/cni (apt-get install containernetworking-plugins)"
  fi
  mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
  [ "${#DIR}" -le 64 ] || die "$DIR is too long for the kubelet's sockets (at most 64 characters)"
  if [ -f "$DIR/.kube-sh" ]; then
    down "$DIR" >/dev/null 2>&1 || true
    find "$DIR" -mindepth 1 -delete
  elif [ -n "$(ls -A "$DIR")" ]; then
    die "$DIR is not empty and not a folder of scripts/kube.sh"
  fi
  : > "$DIR/.kube-sh"
  T0=$(date +%s.%N)
  : > "$DIR/up-times"
  READY_TIMEOUT=${KUBE_READY_TIMEOUT:-120}
  STARTED=()
  UP_DONE=0
  trap up_exit EXIT
  h=$(hash_of "$DIR")
  run=$(run_dir "$DIR")

  kube=$(go_tools_build "$REPO/tests/go/kube")/bin
  if [ "$node" = 1 ]; then
    ctd=$(go_tools_build "$REPO/tests/go/containerd")
    runc_bin=$(go_tools_build "$REPO/tests/go/runc")
  fi
  mark tools
  DEADLINE=$(( $(date +%s) + READY_TIMEOUT ))

  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  while [ "$peer_port" = "$etcd_port" ]; do peer_port=$(free_port); done
  while [ "$api_port" = "$etcd_port" ] || [ "$api_port" = "$peer_port" ]; do api_port=$(free_port); done
  APISERVER_URL="https://127.0.0.1:$api_port"
  local nip="" sans="IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes.default.svc"
  if [ "$node" = 1 ]; then
    nip=$(node_ip)
    [ -n "$nip" ] || die "this machine has no IPv4 address of global scope for the node (ip -4 addr)"
    sans="$sans,IP:$nip"
  fi

  # Certificates: one CA for every serving and client certificate.
  C="$DIR/certs"
  mkdir -p "$C"
  openssl ecparam -name prime256v1 -genkey -noout -out "$C/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$C/ca.key" -sha256 -days 3650 -subj "/CN=settings-image kube.sh CA" -out "$C/ca.crt" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" "subjectAltName=$sans\n$SERVER"
  cert admin "/O=system:masters/CN=admin" "$CLIENT"
  openssl genrsa -out "$C/sa.key" 2048 2>/dev/null
  openssl rsa -in "$C/sa.key" -pubout -out "$C/sa.pub" 2>/dev/null

  # etcd (it reads ETCD_* variables as flags: started without any).
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then etcd_data=$(mktemp -d /dev/shm/kube-etcd.XXXXXX); else etcd_data="$DIR/etcd"; fi
  mkdir -p "$etcd_data"; chmod 700 "$etcd_data"
  echo "$etcd_data" > "$DIR/etcd-data-dir"
  local unset_etcd=() v
  for v in $(compgen -e | grep '^ETCD_' || true); do unset_etcd+=(-u "$v"); done
  start etcd env "${unset_etcd[@]}" "$(command -v etcd)" --name default --data-dir "$etcd_data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "default=http://127.0.0.1:$peer_port" --listen-metrics-urls ""

  local authz=RBAC admission=()
  if [ "$node" = 1 ]; then
    authz=Node,RBAC
    admission=(--enable-admission-plugins NodeRestriction
      --kubelet-client-certificate "$C/apiserver-kubelet-client.crt" --kubelet-client-key "$C/apiserver-kubelet-client.key"
      --kubelet-certificate-authority "$C/ca.crt" --kubelet-preferred-address-types InternalIP)
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$CLIENT"
  fi
  local extra=()
  read -ra extra <<< "${KUBE_APISERVER_EXTRA_ARGS:-}"
  start kube-apiserver "$kube/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$C/apiserver.crt" --tls-private-key-file "$C/apiserver.key" --client-ca-file "$C/ca.crt" \
    --authorization-mode "$authz" --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
    --disable-admission-plugins ServiceAccount "${admission[@]}" \
    --service-account-issuer "https://127.0.0.1:$api_port/" --service-account-key-file "$C/sa.pub" \
    --service-account-signing-key-file "$C/sa.key" \
    ${KUBE_FEATURE_GATES:+--feature-gates "$KUBE_FEATURE_GATES"} "${extra[@]}"
  kubeconfig "$DIR/kubeconfig" admin

  {
    echo "KUBE_STATE_DIR=$DIR"
    echo "KUBECONFIG_OUT=$DIR/kubeconfig"
    echo "APISERVER_URL=$APISERVER_URL"
    echo "ETCD_URL=http://127.0.0.1:$etcd_port"
    echo "ETCD_PID=$(cat "$DIR/etcd.pid")"
    echo "APISERVER_PID=$(cat "$DIR/kube-apiserver.pid")"
    echo "KUBECTL=$kube/kubectl"
    echo "KUBE_VERSION=$("$kube/kubectl" version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')"
  } > "$DIR/env"

  if [ "$node" = 1 ]; then
    NODE_NAME="si-$h"
    local subnet registry_port kubelet_port healthz_port
    subnet=$(pod_subnet "${h:0:4}")
    # The registry the node pulls from.
    registry_port=$(free_port "$nip")
    REGISTRY="$nip:$registry_port"
    cert registry "/CN=$nip" "subjectAltName=IP:$nip,IP:127.0.0.1\n$SERVER"
    mkdir -p "$DIR/registry"
    cat > "$DIR/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/registry
  delete:
    enabled: true
http:
  addr: $REGISTRY
  tls:
    certificate: $C/registry.crt
    key: $C/registry.key
EOF
    start registry docker-registry serve "$DIR/registry.yml"
    cert kube-controller-manager "/CN=system:kube-controller-manager" "$CLIENT"
    cert kube-scheduler "/CN=system:kube-scheduler" "$CLIENT"
    cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$CLIENT"
    cert kubelet-serving "/O=system:nodes/CN=system:node:$NODE_NAME" "subjectAltName=DNS:$NODE_NAME,IP:$nip\n$SERVER"
    kubeconfig "$DIR/kube-controller-manager.kubeconfig" kube-controller-manager
    kubeconfig "$DIR/kube-scheduler.kubeconfig" kube-scheduler
    kubeconfig "$DIR/kubelet.kubeconfig" kubelet
    wait_for registry "registry" curl -fsS --max-time 2 --cacert "$C/ca.crt" "https://$REGISTRY/v2/"
    K8S_SRC=$(cd "$REPO/tests/go/kube" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' k8s.io/kubernetes)
    local pause_tag
    pause_tag=$(sed -n 's/^TAG ?= *//p' "$K8S_SRC/build/pause/Makefile")
    [ -n "$pause_tag" ] || die "no TAG in $K8S_SRC/build/pause/Makefile"
    PAUSE_IMAGE="$REGISTRY/local/pause:$pause_tag"
    BUSYBOX_IMAGE="$REGISTRY/local/busybox:$(dpkg-query -W -f='${Version}' busybox-static | sed -E 's/^[0-9]+://; s/[-+~].*//')"
    # Made while the rest starts (a background job: -e holds inside it).
    (images) >"$DIR/images.log" 2>&1 8>&- &
    local images_job=$!

    # containerd, told how to reach the registry (hosts.toml) and where runc is.
    mkdir -p "$DIR/registry-hosts/$REGISTRY" "$DIR/cni" "$run" "$DIR/containerd"
    cat > "$DIR/registry-hosts/$REGISTRY/hosts.toml" <<EOF
server = "https://$REGISTRY"

[host."https://$REGISTRY"]
  capabilities = ["pull", "resolve"]
  ca = "$C/ca.crt"
EOF
    cat > "$DIR/cni/10-si.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "si-$h",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "si-$h",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$subnet.0/24"}]],
        "dataDir": "$DIR/cni-ipam"
      }
    }
  ]
}
EOF
    cat > "$DIR/containerd.toml" <<EOF
version = 3
root = "$DIR/containerd"
state = "$run/containerd"

[grpc]
  address = "$run/containerd.sock"

[ttrpc]
  address = "$run/containerd.sock.ttrpc"

[debug]
  address = "$run/containerd-debug.sock"
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "$DIR/containerd/opt"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$PAUSE_IMAGE"
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "$DIR/registry-hosts"
  [plugins.'io.containerd.cri.v1.runtime']
    # No CAP_SYS_RESOURCE in this machine's bounding set: nobody may lower
    # oom_score_adj, so the sandboxes' and containers' are clamped to ours.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$runc_bin/bin/runc"
          Root = "$run/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$DIR/cni"
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
EOF
    # Its shim is found on PATH: ours, not Debian's containerd 1.6's.
    start containerd env PATH="$ctd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      "$ctd/bin/containerd" --config "$DIR/containerd.toml"
  fi

  wait_for kube-apiserver "apiserver /readyz" curl -fsS --max-time 2 --cacert "$C/ca.crt" \
    --cert "$C/admin.crt" --key "$C/admin.key" "$APISERVER_URL/readyz"

  if [ "$node" = 1 ]; then
    kcm_port=$(free_port); sched_port=$(free_port)
    start kube-controller-manager "$kube/kube-controller-manager" \
      --kubeconfig "$DIR/kube-controller-manager.kubeconfig" \
      --authentication-kubeconfig "$DIR/kube-controller-manager.kubeconfig" \
      --authorization-kubeconfig "$DIR/kube-controller-manager.kubeconfig" \
      --bind-address 127.0.0.1 --secure-port "$kcm_port" --leader-elect=false \
      --service-account-private-key-file "$C/sa.key" --root-ca-file "$C/ca.crt" \
      --use-service-account-credentials=true
    start kube-scheduler "$kube/kube-scheduler" \
      --kubeconfig "$DIR/kube-scheduler.kubeconfig" \
      --authentication-kubeconfig "$DIR/kube-scheduler.kubeconfig" \
      --authorization-kubeconfig "$DIR/kube-scheduler.kubeconfig" \
      --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false
    wait_for containerd "containerd socket" test -S "$run/containerd.sock"

    kubelet_port=$(free_port "$nip"); healthz_port=$(free_port)
    make_cgroup_root "si-$h"
    mkdir -p "$DIR/kubelet" "$DIR/pod-logs"
    cat > "$DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "$nip"
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: "$C/ca.crt"
authorization:
  mode: Webhook
tlsCertFile: "$C/kubelet-serving.crt"
tlsPrivateKeyFile: "$C/kubelet-serving.key"
# cgroup v1 here, and no systemd as PID 1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /si-$h
failSwapOn: false
containerRuntimeEndpoint: "unix://$run/containerd.sock"
podLogsDir: "$DIR/pod-logs"
# No resolver for the pods: nothing they do reaches another host.
resolvConf: ""
serializeImagePulls: false
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "2%"
  imagefs.available: "2%"
  nodefs.inodesFree: "2%"
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
EOF
    # The kubelet sets kernel settings machine-wide at start: save them,
    # and put them back once it is up, one cluster at a time.
    local k
    mkdir -p "$(dirname "$SYSCTL_LOCK")"
    exec 8>"$SYSCTL_LOCK"
    flock 8
    for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
             kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
      echo "$k=$(sysctl -n "$k")"
    done > "$DIR/sysctl-saved"
    start kubelet "$kube/kubelet" --config "$DIR/kubelet.yaml" --kubeconfig "$DIR/kubelet.kubeconfig" \
      --hostname-override "$NODE_NAME" --node-ip "$nip" --root-dir "$DIR/kubelet" \
      ${KUBE_FEATURE_GATES:+--feature-gates "$KUBE_FEATURE_GATES"}
    node_ready() {
      "$kube/kubectl" --kubeconfig "$DIR/kubeconfig" get node "$NODE_NAME" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints}' | grep -qx 'True '
    }
    wait_for kubelet "node Ready, untainted" node_ready
    restore_sysctls "$DIR/sysctl-saved"
    exec 8>&-
    wait "$images_job" || fail images "failed"
    mark images
    wait_for kube-controller-manager "controller-manager /healthz" curl -fsSk --max-time 2 "https://127.0.0.1:$kcm_port/healthz"
    wait_for kube-scheduler "scheduler /healthz" curl -fsSk --max-time 2 "https://127.0.0.1:$sched_port/healthz"
    {
      echo "NODE_NAME=$NODE_NAME"
      echo "NODE_IP=$nip"
      echo "POD_SUBNET=$subnet.0/24"
      echo "CGROUP_ROOT=/si-$h"
      echo "REGISTRY=$REGISTRY"
      echo "REGISTRY_CA=$C/ca.crt"
      echo "REGISTRY_PID=$(cat "$DIR/registry.pid")"
      echo "REGISTRY_HOSTS_DIR=$DIR/registry-hosts"
      echo "PAUSE_IMAGE=$PAUSE_IMAGE"
      echo "BUSYBOX_IMAGE=$BUSYBOX_IMAGE"
      echo "CONTAINERD_ADDRESS=$run/containerd.sock"
      echo "CONTAINERD_VERSION=$("$ctd/bin/containerd" --version | awk '{print $3}')"
      echo "RUNC_VERSION=$("$runc_bin/bin/runc" --version | awk 'NR==1{print $3}')"
      echo "CONTROLLER_MANAGER_PID=$(cat "$DIR/kube-controller-manager.pid")"
      echo "SCHEDULER_PID=$(cat "$DIR/kube-scheduler.pid")"
      echo "CONTAINERD_PID=$(cat "$DIR/containerd.pid")"
      echo "KUBELET_PID=$(cat "$DIR/kubelet.pid")"
    } >> "$DIR/env"
  fi
  UP_DONE=1
  mark ready
  echo "READY_SECONDS=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')" >> "$DIR/env"
  cat "$DIR/env"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    build) build ;;
    up) [ -n "${2:-}" ] || die "usage: scripts/kube.sh up DIR [--node]"; up "$2" "${@:3}" ;;
    down) [ -n "${2:-}" ] || die "usage: scripts/kube.sh down DIR"; down "$2" ;;
    *) echo "usage: scripts/kube.sh build | up DIR [--node] | down DIR" >&2; exit 2 ;;
  esac
fi
