#!/usr/bin/env bash
# Peak memory of `verify` on a gzip bomb: an image whose layer is a few MiB
# of gzip that inflates to GiBs (one tar entry of zeros), carrying every
# claim a faithful image carries (revision annotation, a provenance that
# names it), so verify reaches the layer comparison. Measured with
# /usr/bin/time -v against a loopback CNCF distribution registry; the
# layer is written with Python's tarfile and zlib (not this project's code).
#
# Usage: scripts/bench-verify-bomb.sh [BINARY...]
#   (default: target/debug/settings-image; BOMB_MIB sets the inflated size,
#   default 2048). Compare two builds by passing both binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(target/debug/settings-image)
mib="${BOMB_MIB:-2048}"
. scripts/bench-lib.sh bench-verify-bomb
bench_need docker-registry git python3 /usr/bin/time

bench_work
port="$(free_port)"
bench_registry "127.0.0.1:$port"
repo="127.0.0.1:$port/team/settings"

# A settings repository and a faithful push (with provenance).
git init -q -b main "$work/settings"
mkdir -p "$work/settings/configs/shop"
echo "port: 8080" > "$work/settings/configs/shop/app.yaml"
git -C "$work/settings" add -A
GIT_COMMITTER_DATE="@1700000000 +0000" GIT_AUTHOR_DATE="@1700000000 +0000" \
  git -C "$work/settings" -c user.name=bench -c user.email=bench@example.com commit -q -m first
folder="$work/settings/configs/shop"
digest=$("${bins[0]}" push --path "$folder" --repository "$repo" --timestamp-tag main --json \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')

# The forgery: the same manifest with the bomb as its layer, and the
# faithful provenance re-pointed at it (registry without the referrers API:
# the index under the tag sha256-<hex>).
python3 - "$port" "$digest" "$mib" > "$work/bomb" <<'PY'
import hashlib, io, json, sys, tarfile, urllib.request, zlib
port, digest, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = f"http://127.0.0.1:{port}/v2/team/settings"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"

def get(path, accept=None):
    req = urllib.request.Request(base + path, headers={"Accept": accept} if accept else {})
    return urllib.request.urlopen(req).read()

def put_blob(data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    loc = urllib.request.urlopen(urllib.request.Request(base + "/blobs/uploads/", method="POST")).headers["Location"]
    sep = "&" if "?" in loc else "?"
    urllib.request.urlopen(urllib.request.Request(f"{loc}{sep}digest={d}", data=data, method="PUT",
                                                  headers={"Content-Type": "application/octet-stream"}))
    return d

def put_manifest(ref, data, media):
    urllib.request.urlopen(urllib.request.Request(f"{base}/manifests/{ref}", data=data, method="PUT",
                                                  headers={"Content-Type": media}))
    return "sha256:" + hashlib.sha256(data).hexdigest()

class Zeros(io.RawIOBase):
    def __init__(self, n): self.left = n
    def readable(self): return True
    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n

# tar of one entry of zeros, gzip-compressed as a stream.
info = tarfile.TarInfo("zeros.yaml")
info.size = mib << 20
gz = zlib.compressobj(9, zlib.DEFLATED, 31)
out = bytearray()
class Sink(io.RawIOBase):
    def writable(self): return True
    def write(self, b):
        out.extend(gz.compress(bytes(b)))
        return len(b)
tar = tarfile.open(fileobj=Sink(), mode="w|", format=tarfile.USTAR_FORMAT)
tar.addfile(info, io.BufferedReader(Zeros(info.size), 1 << 20))
tar.close()
out.extend(gz.flush())
layer = bytes(out)

m = json.loads(get(f"/manifests/{digest}", MANIFEST))
m["layers"][0]["digest"] = put_blob(layer)
m["layers"][0]["size"] = len(layer)
mbytes = json.dumps(m, separators=(",", ":")).encode()
bomb = put_manifest("bomb", mbytes, MANIFEST)

index = json.loads(get(f"/manifests/sha256-{digest.split(':')[1]}", INDEX))
entry = index["manifests"][0]
prov = json.loads(get(f"/manifests/{entry['digest']}", MANIFEST))
st = json.loads(get(f"/blobs/{prov['layers'][0]['digest']}"))
st["subject"][0]["digest"] = {"sha256": bomb.split(":")[1]}
sbytes = json.dumps(st, separators=(",", ":")).encode()
prov["layers"][0]["digest"] = put_blob(sbytes)
prov["layers"][0]["size"] = len(sbytes)
prov["subject"] = {"mediaType": MANIFEST, "digest": bomb, "size": len(mbytes)}
pbytes = json.dumps(prov, separators=(",", ":")).encode()
pdigest = put_manifest("sha256:" + hashlib.sha256(pbytes).hexdigest(), pbytes, MANIFEST)
entry = dict(entry, digest=pdigest, size=len(pbytes))
ibytes = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [entry]},
                    separators=(",", ":")).encode()
put_manifest(f"sha256-{bomb.split(':')[1]}", ibytes, INDEX)
print(bomb, len(layer))
PY
read -r bomb size < "$work/bomb"
echo "bomb: $repo@$bomb, layer $((size / 1024)) KiB of gzip inflating to ${mib} MiB"
for bin in "${bins[@]}"; do
  rc=0
  /usr/bin/time -v "$bin" verify "$repo@$bomb" --path "$folder" > /dev/null 2> "$work/err" || rc=$?
  peak=$(grep "Maximum resident set size" "$work/err" | awk '{print $NF}')
  wall=$(grep "Elapsed (wall clock)" "$work/err" | awk '{print $NF}')
  echo "$bin: exit $rc, peak RSS ${peak} KiB, wall $wall; $(grep -m1 '^error:' "$work/err" | cut -c1-240)"
done
