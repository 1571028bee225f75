"""Code infill on `minfer serve` (POST /infill, docs/server-api.md#infill): the fill-in-the-middle
prompt compared with the layout llama-server documents, built here from llama.cpp's own FIM token
ids and tokenizer (llama-oracle vocab-info / tokenize), on models with the DeepSeek-Coder and
Refact vocabularies (random weights: the prompt is what is checked); --spm-infill; the budget
that cuts prefix, suffix and extra files; streaming; a model without FIM tokens (400) and bad
input_extra chunks (400)."""
import json
import os
import subprocess
import urllib.request

import pytest

from conftest import post_json as call, ServerProcess

ORACLE = os.environ.get("MINFER_LLAMA_ORACLE", "")
MAKE_MODEL = os.environ.get("MINFER_MAKE_MODEL", "build/bin/minfer-make-test-model")
VOCABS = os.environ.get("MINFER_VOCAB_DIR", ".deps/llama.cpp/models")
N_BATCH = 64


def oracle(*args):
    assert os.path.isfile(ORACLE), f"MINFER_LLAMA_ORACLE={ORACLE!r} is not built"
    r = subprocess.run([ORACLE, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def expected_prompt(model, body, n_predict, spm, n_ctx):
    """llama-server's repository-level FIM layout, from llama.cpp's ids and tokenizer."""
    info = oracle("vocab-info", model)
    pre, suf, mid, _pad, rep, sep = info["fim"]

    def plain(text):
        return oracle("tokenize", model, text)["tokens"] if text else []

    extra = []
    if rep >= 0:
        extra += [rep] + plain("myproject\n")
    for c in body.get("input_extra", []):
        extra += [sep] + plain(c.get("filename", "tmp") + "\n") if sep >= 0 else plain("\n\n--- snippet ---\n\n")
        extra += plain(c["text"])
    if sep >= 0:
        extra += [sep] + plain("filename\n")
    prefix, suffix = plain(body["input_prefix"]), plain(body["input_suffix"])
    prompt = oracle("tokenize", model, body["prompt"], "--special")["tokens"] if body.get("prompt") else []
    n_prefix = min(len(prefix), 3 * (N_BATCH // 4))
    n_suffix = min(len(suffix), max(0, N_BATCH // 4 - (2 + len(prompt))))
    n_extra = min(max(0, n_ctx - N_BATCH - 2 * n_predict), len(extra))
    p = [pre] + prefix[len(prefix) - n_prefix:] + prompt
    s = [suf] + suffix[:n_suffix]
    first, last = (s, p) if spm else (p, s)
    if info["add_bos"]:
        first = [info["bos"]] + first
    return extra[len(extra) - n_extra:] + first + last + [mid]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    for v in ("deepseek-coder", "refact"):
        path = str(tmp_path_factory.mktemp("infill") / f"{v}.gguf")
        subprocess.run([MAKE_MODEL, "--preset", "tiny", "--vocab-from", os.path.join(VOCABS, f"ggml-vocab-{v}.gguf"), "--out", path],
                       check=True, capture_output=True, timeout=300)
        out[v] = path
    return out


BODY = {
    "input_prefix": "#include <cstdio>\n#include \"llama.h\"\n\n" + "// a long comment line before main\n" * 12 + "int main() {\n",
    "prompt": "    int n_threads = llama_",
    "input_suffix": "}\n" + "// trailing text after main\n" * 8,
    "input_extra": [{"filename": "llama.h", "text": "LLAMA_API int32_t llama_n_threads();\n"},
                    {"text": "static int helper(void) { return 1; }\n"}],
}


@pytest.mark.parametrize("vocab,spm,n_predict", [("deepseek-coder", False, 4), ("refact", False, 4), ("deepseek-coder", True, 300),
                                                  ("refact", True, 4)])
def test_prompt_layout(models, vocab, spm, n_predict):
    model = models[vocab]
    srv = ServerProcess("-c", "1024", "-b", str(N_BATCH), "-t", "2", *(["--spm-infill"] if spm else []), model=model)
    try:
        n_ctx = json.loads(urllib.request.urlopen(srv.url + "/props").read())["default_generation_settings"]["n_ctx"]
        want = expected_prompt(model, BODY, n_predict, spm, n_ctx)
        # n_predict 300 leaves no room for the extra files in this slot.
        assert (n_predict == 300) == (len(want) < 80), (n_ctx, len(want))
        st, res = call(srv.url, "/infill", {**BODY, "n_predict": n_predict, "temperature": 0})
        assert st == 200, res
        assert res["tokens_evaluated"] == len(want), (res["tokens_evaluated"], len(want))
        st, text = call(srv.url, "/detokenize", {"tokens": want})
        assert st == 200 and res["prompt"] == text["content"], (res["prompt"], text["content"])
        assert res["stop"] is True and res["tokens_predicted"] <= n_predict
        # Streamed: the same prompt, events then the final object.
        st, raw = call(srv.url, "/infill", {**BODY, "n_predict": n_predict, "temperature": 0, "stream": True})
        assert st == 200
        events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]
        assert events[-1]["stop"] is True and events[-1]["tokens_evaluated"] == len(want)
        assert "".join(e["content"] for e in events[:-1]) == res["content"]
    finally:
        assert srv.stop() == 0


def test_model_without_fim_tokens():
    srv = ServerProcess("-c", "1024", "-t", "2")
    try:
        st, res = call(srv.url, "/infill", BODY)
        assert st == 400 and "infill is not supported by this model" in res["error"]["message"], res
        assert res["error"]["type"] == "not_supported_error"
    finally:
        assert srv.stop() == 0


@pytest.mark.parametrize("extra,needle", [
    ({}, "input_extra[0]"),
    ({"filename": "ok"}, "\"text\" string"),
    ({"filename": 123}, "input_extra[0]"),
    ({"filename": 123, "text": "abc"}, "filename' must be a string"),
    ({"filename": 123, "text": 456}, "input_extra[0]"),
])
def test_bad_input_extra(refact_srv, extra, needle):
    st, res = call(refact_srv.url, "/infill", {**BODY, "input_extra": [extra]})
    assert st == 400 and needle in res["error"]["message"], res


def test_bad_fields(refact_srv):
    st, res = call(refact_srv.url, "/infill", {**BODY, "input_extra": {"text": "x"}})
    assert st == 400 and "must be an array" in res["error"]["message"], res
    st, res = call(refact_srv.url, "/infill", {**BODY, "input_prefix": [1, {"x": 1}]})
    assert st == 400 and "input_prefix" in res["error"]["message"], res
    st, res = call(refact_srv.url, "/infill", {**BODY, "prompt": 5})
    assert st == 400 and "'prompt'" in res["error"]["message"], res


@pytest.fixture(scope="module")
def refact_srv(models):
    srv = ServerProcess("-c", "1024", "-t", "2", model=models["refact"])
    yield srv
    assert srv.stop() == 0
