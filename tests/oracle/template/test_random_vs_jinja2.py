"""Seeded random templates (random_templates.py) rendered by minfer and by jinja2:
byte-identical output, or an error of the same kind. Set MINFER_RANDOM_TEMPLATES=N for more.
minfer's documented "unsupported" errors (complex numbers from a negative ** fraction...) are
counted and listed, not failures."""
import os
import tempfile

import jinja2  # noqa: F401  (the oracle must be installed: a missing one fails the test)

from edge_cases import D
from jinja_oracle import render
from minfer_runner import compare, run_minfer
from random_templates import generate

N = int(os.environ.get("MINFER_RANDOM_TEMPLATES", "600"))


def run_all(n, first_seed=0):
    failures, unsupported, n_ok = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.jinja")
        for seed in range(first_seed, first_seed + n):
            source = generate(seed)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(source)
            mutable = seed % 4 == 3
            expected = render(source, D, mutable=mutable)
            ours = run_minfer(path, D, mutable=mutable)
            n_ok += expected[0]
            if compare(expected, ours):
                continue
            if not ours[0] and ": unsupported: " in ours[1]:
                unsupported.append((seed, ours[1].strip()))
            else:
                failures.append((seed, source, expected, ours))
    print(f"\nrandom templates: {n} (seeds {first_seed}..{first_seed + n - 1}), jinja2 renders {n_ok} and rejects "
          f"{n - n_ok}; {n - len(failures) - len(unsupported)}/{n} agree with jinja2, "
          f"{len(unsupported)} refused as unsupported by minfer")
    for seed, msg in unsupported:
        print(f"  unsupported: seed {seed}: {msg}")
    for seed, source, e, o in failures[:20]:
        print(f"  MISMATCH seed {seed}: {source!r}\n    jinja2: {e!r}\n    minfer: {o!r}")
    return failures


def test_random_templates():
    assert not run_all(N)


if __name__ == "__main__":
    import sys
    run_all(int(sys.argv[1]) if len(sys.argv) > 1 else N, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
