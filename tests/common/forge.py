"""Forges images and provenance referrers on a plain-HTTP registry the way
another tool (or an attacker with push access) would: with Python's own
tar, gzip, hashlib, json and HTTP client, never with settings-image's code,
so `verify` and `inspect` meet bytes they did not write.

usage:
  forge.py image REGISTRY FROM_NAME FROM_REF TO_NAME TAG [--annotation K=V]...
           [--label K=V]... [--file PATH=TEXT]...
      Copies the image FROM_NAME:FROM_REF to TO_NAME:TAG. --annotation sets a
      manifest annotation, --label a config label, --file the content of a
      regular file in the layer (an entry that is not there is appended):
      the layer is rewritten by Python's tarfile and gzip and the config's
      diff_ids follow it. Prints the new manifest's digest.
  forge.py attach REGISTRY NAME SUBJECT_DIGEST STATEMENT_FILE [--annotation K=V]...
      Attaches STATEMENT_FILE as an in-toto referrer of NAME@SUBJECT_DIGEST:
      an OCI 1.1 artifact manifest (empty config, the statement as its one
      layer, `subject`, the given annotations) listed in the referrers tag
      schema's index `sha256-<hex>` (distribution 2.8 has no referrers API).
      Prints the referrer's digest.

Exit 0 on success; anything else is a traceback and exit 1. Used by
tests/common/forge.rs.
"""
import gzip
import hashlib
import io
import json
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
IN_TOTO = "application/vnd.in-toto+json"


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Registry:
    def __init__(self, host):
        self.base = f"http://{host}"

    def request(self, method, path, data=None, headers=None, ok=(200,)):
        url = path if path.startswith("http") else self.base + path
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            if e.code in ok:
                return e.code, dict(e.headers), e.read()
            raise SystemExit(f"{method} {url}: HTTP {e.code}: {e.read()[:500]!r}")

    def manifest(self, name, ref, accept=MANIFEST):
        status, headers, body = self.request(
            "GET", f"/v2/{name}/manifests/{ref}", headers={"Accept": accept}, ok=(200, 404)
        )
        return body if status == 200 else None

    def blob(self, name, dgst):
        _, _, body = self.request("GET", f"/v2/{name}/blobs/{dgst}")
        if digest(body) != dgst:
            raise SystemExit(f"blob {dgst} read back as {digest(body)}")
        return body

    def put_blob(self, name, data):
        dgst = digest(data)
        _, headers, _ = self.request("POST", f"/v2/{name}/blobs/uploads/", data=b"", ok=(202,))
        location = urllib.parse.urljoin(self.base + "/", headers["Location"])
        sep = "&" if "?" in location else "?"
        self.request(
            "PUT",
            f"{location}{sep}digest={urllib.parse.quote(dgst)}",
            data=data,
            headers={"Content-Type": "application/octet-stream"},
            ok=(201,),
        )
        return {"digest": dgst, "size": len(data)}

    def put_manifest(self, name, ref, data, media_type):
        self.request(
            "PUT", f"/v2/{name}/manifests/{ref}", data=data,
            headers={"Content-Type": media_type}, ok=(201,),
        )
        return digest(data)


def pairs(args, flag):
    out = []
    for i, a in enumerate(args):
        if a == flag:
            k, _, v = args[i + 1].partition("=")
            out.append((k, v))
    return out


def rewrite_layer(gz, files):
    """The layer with `files` (path -> text) set, re-tarred and re-gzipped."""
    src = tarfile.open(fileobj=io.BytesIO(gzip.decompress(gz)), mode="r:")
    out = io.BytesIO()
    dst = tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT)
    todo = dict(files)
    for member in src.getmembers():
        data = src.extractfile(member).read() if member.isreg() else None
        if member.isreg() and member.name in todo:
            data = todo.pop(member.name).encode()
            member.size = len(data)
        dst.addfile(member, io.BytesIO(data) if data is not None else None)
    for path, text in todo.items():
        data = text.encode()
        info = tarfile.TarInfo(path)
        info.size, info.mode, info.mtime = len(data), 0o644, 0
        dst.addfile(info, io.BytesIO(data))
    dst.close()
    tar = out.getvalue()
    return gzip.compress(tar, mtime=0), digest(tar)


def forge_image(reg, args):
    from_name, from_ref, to_name, tag = args[:4]
    rest = args[4:]
    raw = reg.manifest(from_name, from_ref)
    if raw is None:
        raise SystemExit(f"no manifest {from_name}:{from_ref}")
    manifest = json.loads(raw)
    config_raw = reg.blob(from_name, manifest["config"]["digest"])
    config = json.loads(config_raw)
    files, labels = dict(pairs(rest, "--file")), pairs(rest, "--label")
    annotations = pairs(rest, "--annotation")
    layers = []
    for i, desc in enumerate(manifest["layers"]):
        gz = reg.blob(from_name, desc["digest"])
        if files and i == 0:
            gz, config["rootfs"]["diff_ids"][i] = rewrite_layer(gz, files)
        layers.append(dict(desc, **reg.put_blob(to_name, gz)))
    for k, v in labels:
        config.setdefault("config", {}).setdefault("Labels", {})[k] = v
    # Unchanged parts keep their exact bytes: a copy without edits is the
    # same image, digest for digest.
    if files or labels:
        config_raw = json.dumps(config, separators=(",", ":")).encode()
    manifest["config"] = dict(manifest["config"], **reg.put_blob(to_name, config_raw))
    manifest["layers"] = layers
    for k, v in annotations:
        manifest.setdefault("annotations", {})[k] = v
    if files or labels or annotations:
        raw = json.dumps(manifest, separators=(",", ":")).encode()
    print(reg.put_manifest(to_name, tag, raw, MANIFEST))


def attach(reg, args):
    name, subject_digest, statement_file = args[:3]
    annotations = dict(pairs(args[3:], "--annotation"))
    subject_bytes = reg.manifest(name, subject_digest)
    if subject_bytes is None:
        raise SystemExit(f"no manifest {name}@{subject_digest}")
    with open(statement_file, "rb") as f:
        statement = f.read()
    config = reg.put_blob(name, b"{}")
    layer = reg.put_blob(name, statement)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "artifactType": IN_TOTO,
        "config": dict(mediaType=EMPTY, **config),
        "layers": [dict(mediaType=IN_TOTO, **layer)],
        "subject": {"mediaType": MANIFEST, "digest": subject_digest, "size": len(subject_bytes)},
    }
    if annotations:
        manifest["annotations"] = annotations
    body = json.dumps(manifest, separators=(",", ":")).encode()
    referrer = reg.put_manifest(name, digest(body), body, MANIFEST)
    # The referrers tag schema: the subject's index, read, extended, put back.
    tag = subject_digest.replace(":", "-")
    existing = reg.manifest(name, tag, accept=INDEX)
    index = json.loads(existing) if existing else {"schemaVersion": 2, "mediaType": INDEX, "manifests": []}
    entry = {"mediaType": MANIFEST, "digest": referrer, "size": len(body), "artifactType": IN_TOTO}
    if annotations:
        entry["annotations"] = annotations
    index["manifests"].append(entry)
    reg.put_manifest(name, tag, json.dumps(index, separators=(",", ":")).encode(), INDEX)
    print(referrer)


def main(argv):
    if len(argv) < 3 or argv[1] not in ("image", "attach"):
        raise SystemExit(__doc__)
    reg = Registry(argv[2])
    (forge_image if argv[1] == "image" else attach)(reg, argv[3:])


if __name__ == "__main__":
    main(sys.argv)
