"""Validates JSON documents against the official OCI image-spec schemas
(JSON Schema draft-04), with the python `jsonschema` package.

usage: oci_schema.py SCHEMA_DIR KIND FILE [KIND FILE]...
KIND is one of: manifest, config, index, layout.
Exit 0 when every file is valid, 1 when one is not (errors on stderr),
2 when the validator itself cannot run.

$refs are resolved only from SCHEMA_DIR, through the id -> file map that
upstream's schema/schema.go uses (see SOURCE.txt there); an unknown id is
an error, never a silent pass. Used by tests/schema.rs.
"""
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("python3 has no jsonschema module: run `bash scripts/deps.sh`", file=sys.stderr)
    sys.exit(2)

BASE = "https://opencontainers.org/schema/"
FILES = {
    "image/config": "config-schema.json",
    "descriptor": "content-descriptor.json",
    "image/content-descriptor.json": "content-descriptor.json",
    "content-descriptor.json": "content-descriptor.json",
    "image/descriptor/mediaType": "defs-descriptor.json",
    "defs-descriptor.json": "defs-descriptor.json",
    "image/defs-descriptor.json": "defs-descriptor.json",
    "defs.json": "defs.json",
    "image/defs.json": "defs.json",
    "image/descriptor/defs.json": "defs.json",
    "image/index": "image-index-schema.json",
    "image/layout": "image-layout-schema.json",
    "image/manifest": "image-manifest-schema.json",
}
KINDS = {
    "manifest": "image/manifest",
    "config": "image/config",
    "index": "image/index",
    "layout": "image/layout",
}


def load(schema_dir, name):
    with open(os.path.join(schema_dir, name), encoding="utf-8") as f:
        return json.load(f)


def main(argv):
    if len(argv) < 4 or len(argv) % 2 != 0:
        print(__doc__, file=sys.stderr)
        return 2
    schema_dir = argv[1]
    docs = {uri: load(schema_dir, name) for uri, name in FILES.items()}

    def schema_for(uri):
        uri = uri.split("#", 1)[0]
        if not uri.startswith(BASE) or uri[len(BASE):] not in docs:
            raise LookupError("no local schema for $ref " + uri)
        return docs[uri[len(BASE):]]

    make = None
    try:
        import referencing  # jsonschema >= 4.18
        from referencing.jsonschema import DRAFT4

        registry = referencing.Registry(
            retrieve=lambda uri: DRAFT4.create_resource(schema_for(uri))
        )

        def make(schema):
            return jsonschema.Draft4Validator(schema, registry=registry)

    except ImportError:  # older jsonschema (Debian 12 ships 4.10)
        store = {BASE + k: v for k, v in docs.items()}

        def make(schema):
            resolver = jsonschema.RefResolver(
                BASE, schema, store=store, handlers={"https": schema_for}
            )
            return jsonschema.Draft4Validator(schema, resolver=resolver)

    failed = False
    for kind, path in zip(argv[2::2], argv[3::2]):
        schema = schema_for(BASE + KINDS[kind])
        jsonschema.Draft4Validator.check_schema(schema)
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        errors = sorted(make(schema).iter_errors(doc), key=lambda e: list(e.path))
        for e in errors:
            failed = True
            where = "/".join(str(p) for p in e.absolute_path)
            print(f"{path}: {kind}: at /{where}: {e.message}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except LookupError as e:
        print(f"validator setup error: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception:  # a crash is not a verdict on the document
        import traceback

        traceback.print_exc()
        sys.exit(2)
