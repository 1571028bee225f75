#!/usr/bin/env python3
"""Regenerates goldens.json: SmolLM2-135M-Instruct reference results from llama.cpp.

For each prompt the chat is rendered with Python jinja2 (the GGUF's own template, configured as
transformers does), tokenized by llama.cpp (special tokens parsed), and continued greedily for
48 tokens by llama.cpp. The perplexity of the corpus (Debian's license texts, present on every
Debian system) is llama.cpp's, computed like llama-perplexity with -c 512.

  python3 tests/oracle/smollm2/make_goldens.py --oracle build/tests/llama-oracle \
      --model ~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf
"""
import argparse
import json
import os
import subprocess
import sys

import gguf
import jinja2
import jinja2.sandbox
from jinja2.ext import loopcontrols

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain in two sentences why the sky is blue.",
    "List three prime numbers greater than 10.",
    "Translate 'good morning' into Spanish and German.",
]
CORPUS_FILES = ["GPL-3", "GPL-2", "Apache-2.0", "LGPL-2.1", "MPL-2.0", "Artistic"]
N_GREEDY = 48
PPL_CTX = 512


def corpus_text():
    parts = []
    for name in CORPUS_FILES:
        with open(os.path.join("/usr/share/common-licenses", name), encoding="utf-8") as f:
            parts.append(f.read())
    return "".join(parts)


def render(template_src, bos, eos, prompt):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[loopcontrols])
    t = env.from_string(template_src)
    return t.render(messages=[{"role": "user", "content": prompt}], add_generation_prompt=True,
                    bos_token=bos, eos_token=eos)


def model_template(model):
    r = gguf.GGUFReader(model)
    tmpl = r.fields["tokenizer.chat_template"].contents()
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    bos = toks[r.fields["tokenizer.ggml.bos_token_id"].contents()]
    eos = toks[r.fields["tokenizer.ggml.eos_token_id"].contents()]
    return tmpl, bos, eos


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def greedy_cases(oracle, model):
    tmpl, bos, eos = model_template(model)
    cases = []
    for p in PROMPTS:
        text = render(tmpl, bos, eos, p)
        ids = run_json([oracle, "tokenize", model, text, "--special"])["tokens"]
        greedy = run_json([oracle, "greedy", model, "--tokens", ",".join(map(str, ids)), "-n", str(N_GREEDY)])["greedy"]
        cases.append({"prompt": p, "text": text, "tokens": ids, "greedy": greedy})
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "goldens.json"))
    a = ap.parse_args()
    cases = greedy_cases(a.oracle, a.model)
    corpus = os.path.join(HERE, ".corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(corpus_text())
    ppl = run_json([a.oracle, "perplexity", a.model, "-f", corpus, "-c", str(PPL_CTX), "-t", "2"])
    os.remove(corpus)
    goldens = {"model": os.path.basename(a.model), "n_greedy": N_GREEDY, "cases": cases,
               "perplexity": {"corpus": CORPUS_FILES, "n_ctx": PPL_CTX, **ppl}}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(goldens, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {a.out}: {len(cases)} greedy cases, PPL {ppl['ppl']:.4f}")


if __name__ == "__main__":
    sys.exit(main())
