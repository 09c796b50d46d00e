"""Validates Kubernetes objects against a CRD version's openAPIV3Schema.

Usage: flux_crd.py SCHEMA.json OBJECT.json [SCHEMA.json OBJECT.json ...]
Each SCHEMA.json is one served version's `schema.openAPIV3Schema` (the test
extracts it from the CRD YAML). Like the API server, which prunes and (with
kubectl's strict field validation) rejects unknown fields, every object
schema with `properties` and no `x-kubernetes-preserve-unknown-fields` is
made closed (`additionalProperties: false`), so a misspelled field fails.
Exit 0 when every object is valid, 1 with the errors otherwise.
"""
import json
import sys

import jsonschema


def close(schema):
    if isinstance(schema, dict):
        if (
            schema.get("type") == "object"
            and "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        for v in schema.values():
            close(v)
    elif isinstance(schema, list):
        for v in schema:
            close(v)
    return schema


def main(args):
    failed = False
    for schema_path, doc_path in zip(args[0::2], args[1::2]):
        with open(schema_path) as f:
            schema = close(json.load(f))
        with open(doc_path) as f:
            doc = json.load(f)
        v = jsonschema.Draft7Validator(schema)
        for err in sorted(v.iter_errors(doc), key=lambda e: list(e.path)):
            failed = True
            where = "/".join(str(p) for p in err.path)
            print(f"{doc_path}: {where}: {err.message}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
