"""Every chat template in llama.cpp's models/templates/ rendered by `minfer chat-template` on
the conversations in chat_cases.json (plain, multi-turn with system, whitespace-heavy,
tools, tool calls and results, reasoning, add_generation_prompt on/off, enable_thinking,
extra kwargs...), byte-identical to Python jinja2 configured like transformers. Where
jinja2 raises (a template's raise_exception, an unsupported input), minfer must fail too.

Also: the SmolLM2 GGUF's embedded template through `minfer chat-template MODEL`, the ChatML
fallback for a GGUF without a template, and the CLI's error contract.
"""
import glob
import json
import os
import subprocess
import tempfile

import jinja2  # noqa: F401  (the oracle must be installed: a missing one fails the test)

from jinja_oracle import FIXED_NOW, render
from minfer_runner import MINFER, compare, run_minfer

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES_DIR = os.environ.get("MINFER_TEMPLATES_DIR", "")
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", "")
CASES = json.load(open(os.path.join(HERE, "chat_cases.json"), encoding="utf-8"))


def test_llama_cpp_templates():
    paths = sorted(glob.glob(os.path.join(TEMPLATES_DIR, "*.jinja")))
    assert len(paths) >= 60, f"MINFER_TEMPLATES_DIR={TEMPLATES_DIR!r}: {len(paths)} templates (scripts/setup.sh)"
    failures, rows = [], []
    total_same = total_err = 0
    for path in paths:
        source = open(path, encoding="utf-8", newline="").read()
        n_pass = n_ok = n_err = 0
        for c in CASES:
            expected = render(source, c["case"])
            ours = run_minfer(path, c["case"])
            n_ok += expected[0]
            n_err += not expected[0]
            if compare(expected, ours):
                n_pass += 1
                total_same += expected[0]
                total_err += not expected[0]
            else:
                failures.append((os.path.basename(path), c["name"], expected, ours))
        rows.append((os.path.basename(path), n_pass, len(CASES), n_ok, n_err))
    print(f"\n{'template':<58} pass  rendered/raised by jinja2")
    for name, n_pass, n, n_ok, n_err in rows:
        print(f"{name:<58} {n_pass:>2}/{n:<2}  {n_ok:>2}/{n_err:<2}")
    n_all = len(paths) * len(CASES)
    fully = sum(r[1] == r[2] for r in rows)
    renderable = sum(r[3] > 0 for r in rows)
    print(f"{len(paths)} templates x {len(CASES)} conversations = {n_all} renders: "
          f"{n_all - len(failures)} agree with jinja2 ({total_same} byte-identical renders, {total_err} errors "
          f"of the same kind where jinja2 raises); {fully}/{len(paths)} templates agree on every case; "
          f"{renderable} templates render at least one case in jinja2")
    for name, case, e, o in failures[:30]:
        print(f"  MISMATCH {name} / {case}\n    jinja2: {e[0]} {e[1][:600]!r}\n    minfer: {o[0]} {o[1][:600]!r}")
    assert not failures


def run_cli(args, stdin=None):
    return subprocess.run([MINFER, "chat-template", *args], capture_output=True, input=stdin, timeout=60)


def test_smollm2_embedded_template():
    assert os.path.isfile(SMOLLM2), f"MINFER_SMOLLM2={SMOLLM2!r} not found (scripts/setup.sh)"
    import gguf
    reader = gguf.GGUFReader(SMOLLM2)
    field = reader.fields["tokenizer.chat_template"]
    source = bytes(field.parts[field.data[0]]).decode("utf-8")
    tokens = reader.fields["tokenizer.ggml.tokens"]

    def token(key):
        f = reader.fields[key]
        i = int(f.parts[f.data[0]][0])
        return bytes(tokens.parts[tokens.data[i]]).decode("utf-8")

    for c in CASES:
        case = {k: v for k, v in c["case"].items() if k not in ("bos_token", "eos_token")}
        expected = render(source, dict(case, bos_token=token("tokenizer.ggml.bos_token_id"),
                                       eos_token=token("tokenizer.ggml.eos_token_id")))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(case, f)
        p = run_cli([SMOLLM2, "--input", f.name, "--now", FIXED_NOW])
        os.unlink(f.name)
        ours = (p.returncode == 0, p.stdout.decode() if p.returncode == 0 else p.stderr.decode())
        assert compare(expected, ours), (c["name"], expected, ours)


def test_chatml_fallback_for_gguf_without_template():
    import gguf
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "no-template.gguf")
        w = gguf.GGUFWriter(path, "llama")
        w.add_string("general.name", "no template")
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        case = os.path.join(tmp, "case.json")
        with open(case, "w") as f:
            json.dump({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True}, f)
        p = run_cli([path, "--input", case])
        assert p.returncode == 0, p.stderr
        assert p.stdout.decode() == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        notice = p.stderr.decode().strip().splitlines()
        assert len(notice) == 1 and "ChatML" in notice[0], notice


def test_cli_errors():
    with tempfile.TemporaryDirectory() as tmp:
        tpl = os.path.join(tmp, "t.jinja")
        good = os.path.join(tmp, "good.json")
        with open(good, "w") as f:
            json.dump({"messages": [{"role": "user", "content": "x"}]}, f)
        bad_json = os.path.join(tmp, "bad.json")
        with open(bad_json, "w") as f:
            f.write("{not json")
        cases = [
            ("{{ messages[0].content }}\n", good, 0, "x"),               # no added newline
            ("{{ messages[0].content }}", bad_json, 1, None),           # bad JSON
            ("{% if %}", good, 1, "line 1"),                            # syntax error with line
            ("a\n{{ raise_exception('boom') }}", good, 1, "boom"),      # raise_exception
            ("{% include 'x' %}", good, 1, "'include'"),                # unsupported construct
            ("{{ x.y }}", good, 1, "undefined"),                        # attribute of undefined
        ]
        for source, case, rc, needle in cases:
            with open(tpl, "w") as f:
                f.write(source)
            p = run_cli(["--template", tpl, "--input", case])
            assert (p.returncode != 0) == (rc != 0), (source, p.returncode, p.stderr)
            if rc == 0:
                assert p.stdout.decode() == needle
            elif needle:
                assert needle in p.stderr.decode(), (source, p.stderr)
