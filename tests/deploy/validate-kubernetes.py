#!/usr/bin/env python3
"""Validates Kubernetes manifests offline, strictly (an unknown field is an error, as kubectl's
default field validation makes it): the built-in kinds against the schemas that PyPI's
kubernetes-validate ships (scripts/setup.sh installs it), for each Kubernetes version given;
custom resources against the JSON schemas in schemas/ beside this file (each names its source).
A kind with neither is an error too.

    tests/deploy/validate-kubernetes.py deploy/kubernetes            # every *.yaml below it
    tests/deploy/validate-kubernetes.py -k 1.30 -k 1.37 FILE.yaml ...

Exit code 0 when every document is valid, 1 otherwise (each error printed with its file).
"""
import argparse
import json
import pathlib
import sys

import jsonschema
import kubernetes_validate
import yaml

HERE = pathlib.Path(__file__).resolve().parent


def custom_schemas():
    """{(apiVersion, kind): schema} of schemas/*.json."""
    out = {}
    for f in sorted((HERE / "schemas").glob("*.json")):
        s = json.loads(f.read_text())
        for api in s["properties"]["apiVersion"]["enum"]:
            for kind in s["properties"]["kind"]["enum"]:
                out[(api, kind)] = s
    return out


def errors_of(doc, versions, schemas):
    if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
        return ["not a Kubernetes object (no apiVersion and kind)"]
    schema = schemas.get((doc["apiVersion"], doc["kind"]))
    if schema is not None:
        v = jsonschema.Draft4Validator(schema)
        return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in v.iter_errors(doc)]
    errs = []
    for version in versions:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            errs.append(f"Kubernetes {version}: {'/'.join(map(str, e.path)) or '(top)'}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            errs.append(e.message)
    return errs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", "--kubernetes-version", action="append", dest="versions",
                    help="validate against this version (repeatable; default: 1.30, the first with preStop sleep on by default, and 1.37)")
    ap.add_argument("paths", nargs="+", type=pathlib.Path)
    args = ap.parse_args(argv)
    versions = args.versions or ["1.30", "1.37"]
    schemas = custom_schemas()
    files = []
    for p in args.paths:
        files += sorted(p.rglob("*.yaml")) if p.is_dir() else [p]
    if not files:
        print("error: no manifest found", file=sys.stderr)
        return 1
    n_bad = n_docs = 0
    for f in files:
        try:
            docs = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
        except yaml.YAMLError as e:
            print(f"{f}: YAML: {e}", file=sys.stderr)
            n_bad += 1
            continue
        for doc in docs:
            n_docs += 1
            name = f"{doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}" if isinstance(doc, dict) else "?"
            errs = errors_of(doc, versions, schemas)
            for e in errs:
                print(f"{f}: {name}: {e}", file=sys.stderr)
            n_bad += bool(errs)
            if not errs:
                print(f"{f}: {name}: valid")
    print(f"{n_docs} documents, {n_bad} invalid")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
