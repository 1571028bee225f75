"""Hundreds of one-construct templates (edge_cases.py) rendered by minfer and by jinja2:
byte-identical output, or an error of the same kind, in both sandboxes. A construct minfer
documents as unsupported (docs/templates.md: groupby, random, cycler, block...) may fail with
an "unsupported" error where jinja2 renders; those are counted and listed, not hidden."""
import os
import tempfile

import jinja2  # noqa: F401  (the oracle must be installed: a missing one fails the test)

from edge_cases import CASES
from jinja_oracle import render
from minfer_runner import compare, run_minfer


def run_all(mutable):
    failures, unsupported = [], []
    n_ok = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (source, variables) in enumerate(CASES):
            path = os.path.join(tmp, f"t{i}.jinja")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(source)
            expected = render(source, variables, mutable=mutable)
            ours = run_minfer(path, variables, mutable=mutable)
            n_ok += expected[0]
            if compare(expected, ours):
                continue
            if expected[0] and not ours[0] and ": unsupported: " in ours[1]:
                unsupported.append(source)
            else:
                failures.append((source, expected, ours))
    mode = "mutable" if mutable else "immutable"
    print(f"\nedge cases [{mode}]: {len(CASES)} templates, jinja2 renders {n_ok} and rejects "
          f"{len(CASES) - n_ok}; {len(CASES) - len(failures) - len(unsupported)}/{len(CASES)} agree with jinja2, "
          f"{len(unsupported)} refused as unsupported by minfer")
    for source in unsupported:
        print(f"  unsupported: {source!r}")
    for source, e, o in failures[:60]:
        print(f"  MISMATCH {source!r}\n    jinja2: {e!r}\n    minfer: {o!r}")
    return failures


def test_edge_cases_immutable():
    assert not run_all(False)


def test_edge_cases_mutable():
    assert not run_all(True)


if __name__ == "__main__":
    run_all(False)
    run_all(True)
