#!/usr/bin/env bash
# Installs the real tools the tests run against (Debian packages, as root),
# only when something is missing. Every test that needs one of these fails
# loudly if it is absent; this script is how they get here.
set -euo pipefail

packages=(
  git            # the oracle for history questions
  docker-registry # CNCF distribution registry 2.8
  apache2-utils  # htpasswd for the basic-auth registry
  skopeo umoci   # independent OCI readers
  podman runc containerd uidmap # runtimes that pull and mount our images
  buildah        # a peer in the push benchmark
  busybox-static # a tiny binary to run inside test containers
  openssl        # signs the test token server's JWTs
  ca-certificates # the CA bundle the container contract test puts in the action image
  gzip tar coreutils python3
  python3-jsonschema # draft-04 validator for the OCI schema tests
  time           # /usr/bin/time -v for peak RSS in scripts/bench-build.sh
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

# The schema tests run `python3` from PATH. When that is not Debian's python
# (pyenv, a venv), the apt package above does not reach it: use pip.
if ! python3 -c 'import jsonschema' 2>/dev/null; then
  echo "scripts/deps.sh: installing jsonschema for $(command -v python3) with pip" >&2
  python3 -m pip install --quiet jsonschema
fi
