"""llama.cpp's tests/test-jinja.cpp conformance cases, with Python jinja2 as the oracle.

The cases are read from the C++ source at test time (extract_test_jinja.py); the expected
output is what jinja2 renders, in both sandboxes: transformers' ImmutableSandboxedEnvironment
(minfer's default) and SandboxedEnvironment (`--mutable`, what llama.cpp's -py mode uses).
A case jinja2 rejects must be rejected by minfer too. llama.cpp's own expectation is reported
for information only (where it disagrees with jinja2, jinja2 wins).
"""
import os
import tempfile

import jinja2  # noqa: F401  (the oracle must be installed: a missing one fails the test)

from extract_test_jinja import extract
from jinja_oracle import render
from minfer_runner import compare, run_minfer

TEST_JINJA = os.environ.get("MINFER_TEST_JINJA_CPP", "")


def run_all(mutable):
    assert os.path.isfile(TEST_JINJA), f"MINFER_TEST_JINJA_CPP={TEST_JINJA!r} not found (scripts/setup.sh)"
    cases, skipped = extract(TEST_JINJA)
    assert len(cases) >= 250, f"only {len(cases)} cases extracted from {TEST_JINJA}"
    failures, n_ok, n_err, n_llama_disagree = [], 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, c in enumerate(cases):
            path = os.path.join(tmp, f"case{i}.jinja")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(c["template"])
            expected = render(c["template"], c["vars"], mutable=mutable)
            ours = run_minfer(path, c["vars"], mutable=mutable)
            if expected[0]:
                n_ok += 1
                n_llama_disagree += expected[1] != c["llama_expect"]
            else:
                n_err += 1
            if not compare(expected, ours):
                failures.append((c, expected, ours))
    mode = "mutable (SandboxedEnvironment)" if mutable else "immutable (transformers)"
    print(f"\ntest-jinja.cpp [{mode}]: {len(cases) + len(skipped)} calls, {len(cases)} extracted, "
          f"{len(skipped)} not extractable; jinja2 renders {n_ok}, rejects {n_err}; "
          f"{len(cases) - len(failures)}/{len(cases)} agree with jinja2 "
          f"(llama.cpp's expectation differs from jinja2 on {n_llama_disagree})")
    for s in skipped:
        print(f"  not extractable: line {s['line']}: {s['reason']}")
    for c, e, o in failures[:40]:
        print(f"  MISMATCH line {c['line']} {c['name']!r}\n    template: {c['template']!r}\n"
              f"    vars: {c['vars']!r}\n    jinja2: {e!r}\n    minfer: {o!r}")
    return failures


def test_test_jinja_cases_immutable():
    assert not run_all(mutable=False)


def test_test_jinja_cases_mutable():
    assert not run_all(mutable=True)


if __name__ == "__main__":
    run_all(False)
    run_all(True)
