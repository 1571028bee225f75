#!/usr/bin/env python3
"""Speculative decoding speed: decode tokens/s with and without drafting, measured side by side
(interleaved repetitions, medians), with the acceptance rate, for
  (a) n-gram self-drafting on two kinds of prompts: copy-heavy ones (repeat / quote a text, edit
      code), where drafts hold, and ones the model answers in its own words (summarize,
      translate, explain, a story), where they mostly do not; with the adaptive length (the
      default) and with a fixed one (--spec-draft-fixed),
  (b) a draft model: SmolLM2-135M Q4_1 drafting for a Q8_0 copy of itself (made by `minfer
      quantize`), and for a random-weight model shaped like SmolLM2-360M with SmolLM2's
      vocabulary (made by minfer-make-test-model; drafts never agree, so the row reports the
      cost model's break-even acceptance instead),
  (c) `minfer serve` at 1 and 4 concurrent clients (aggregate completion tokens/s).
Every run is greedy with the same seed, and the outputs with and without drafting are checked
to be identical.

Break-even acceptance: with per-depth acceptance a and k drafted tokens, a step yields
E = (1 - a^(k+1)) / (1 - a) tokens at a cost of k*c + v (units of one plain decode step:
c = draft-model step / target step, v = verify pass of k+1 rows / plain pass, both measured
here); drafting pays when E > k*c + v.

With --cpu (one thread, -t 1), tok/s is tokens per second of the process's CPU time in
generation (the CLI's "cpu" figure): steady when other processes share the cores, where wall
time is not. The adaptive length still decides on wall time, as it does for users.

  python3 bench/speculative.py [--build build] [-t 2] [--reps 3] [--json out.json] [--skip-server] [--cpu] [--only-ngram]
"""
import argparse
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.expanduser("~/.cache/minfer/models")
SMOL = os.path.join(CACHE, "SmolLM2-135M-Instruct-Q4_1.gguf")
WORK = os.path.join(ROOT, "build", "bench-models")

PARAGRAPH = ("The old lighthouse stood at the edge of the cliff for more than a hundred years. Every night its keeper "
             "climbed the narrow stairs, trimmed the wick and polished the great lens, so that ships passing in the dark "
             "would know where the rocks were. When the storms came, he stayed awake until morning, watching the beam "
             "sweep across the waves.")
CODE = ("def total_price(items, tax):\n    result = 0\n    for item in items:\n        result += item.price * item.count\n"
        "    result = result * (1 + tax)\n    return result\n\n\ndef average_price(items):\n    result = 0\n"
        "    for item in items:\n        result += item.price\n    return result / len(items)\n")
COPY_PROMPTS = {
    "rewrite": "Repeat the following text word for word:\n\n" + PARAGRAPH,
    "quote": "Quote this passage exactly, inside double quotes, then say who might have written it:\n\n" + PARAGRAPH,
    "edit code": "Rename the variable `result` to `acc` in this Python code and print the whole code again:\n\n" + CODE,
}
# Prompts the model answers in its own words: n-gram drafts find matches but mostly miss.
FREE_PROMPTS = {
    "summarize": "Summarize the following text in two sentences of your own words:\n\n" + PARAGRAPH,
    "translate": "Translate this text into French:\n\n" + PARAGRAPH,
    "explain code": "Explain what each function in this Python code does:\n\n" + CODE,
    "story": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
}
GEN_RE = re.compile(r"\[generate\] (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\)(?:, stop: \w+, cpu ([\d.]+) s)?")
SPEC_RE = re.compile(r"\[spec\] drafted (\d+), accepted (\d+) \(([\d.]+)%\)")
VERIFY_RE = re.compile(r"\[spec\] (\d+) verify passes of ([\d.]+) rows, ([\d.]+) ms each; drafting ([\d.]+) ms per pass; "
                       r"(\d+) other passes, ([\d.]+) ms each")


CPU_RATE = False  # --cpu: tok/s per CPU second of generation


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)


def make_models(build):
    os.makedirs(WORK, exist_ok=True)
    q8 = os.path.join(WORK, "SmolLM2-135M-Instruct-Q8_0.gguf")
    if not os.path.exists(q8):
        log(f"making {q8} (minfer quantize)")
        sh([os.path.join(build, "bin", "minfer"), "quantize", SMOL, q8, "Q8_0", "--allow-requantize"])
    big = os.path.join(WORK, "smollm2-360m-shape-random-Q8_0.gguf")
    if not os.path.exists(big):
        f16 = big.replace("-Q8_0", "-F16")
        log(f"making {big} (random weights, SmolLM2-360M shapes, SmolLM2 vocabulary)")
        sh([os.path.join(build, "bin", "minfer-make-test-model"), "--arch", "llama", "--vocab-from", SMOL, "--out", f16,
            "--n-embd", "960", "--n-layer", "32", "--n-head", "15", "--n-head-kv", "5", "--n-ff", "2560", "--ctx", "8192",
            "--tied", "--type", "F16", "--name", "smollm2-360m-shape-random"])
        sh([os.path.join(build, "bin", "minfer"), "quantize", f16, big, "Q8_0"])
        os.remove(f16)
    return q8, big


def run_cli(build, model, prompt, threads, n, extra):
    r = subprocess.run([os.path.join(build, "bin", "minfer"), model, prompt, "--greedy", "--repeat-penalty", "1", "-n", str(n), "-t", str(threads),
                        "-v", *extra], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    g = GEN_RE.search(r.stderr)
    out = {"text": r.stdout, "tokens": int(g.group(1)), "tps": float(g.group(3))}
    if CPU_RATE and g.group(4) and float(g.group(4)) > 0:  # decoded tokens (all but the last) per CPU second
        out["tps"] = float(g.group(3)) * float(g.group(2)) / float(g.group(4))
    s = SPEC_RE.search(r.stderr)
    if s:
        out.update(drafted=int(s.group(1)), accepted=int(s.group(2)))
    v = VERIFY_RE.search(r.stderr)
    if v:
        out.update(verify_rows=float(v.group(2)), verify_ms=float(v.group(3)), draft_ms=float(v.group(4)),
                   plain_ms=float(v.group(6)))
    return out


def compare_many(build, model, prompt, threads, n, reps, specs):
    """Interleaved repetitions of plain decoding and of each drafting setting; medians, one
    result per setting."""
    plain, fast = [], [[] for _ in specs]
    for _ in range(reps):
        plain.append(run_cli(build, model, prompt, threads, n, []))
        for i, spec in enumerate(specs):
            fast[i].append(run_cli(build, model, prompt, threads, n, spec))
    med = lambda rs, k: statistics.median(r[k] for r in rs if k in r) if any(k in r for r in rs) else 0.0
    out = []
    for spec, runs in zip(specs, fast):
        for p, f in zip(plain, runs):
            if p["text"] != f["text"]:
                raise RuntimeError(f"outputs differ with {spec}:\n{p['text']!r}\n{f['text']!r}")
        drafted, accepted = runs[0].get("drafted", 0), runs[0].get("accepted", 0)
        out.append({"tokens": plain[0]["tokens"], "plain_tps": med(plain, "tps"), "spec_tps": med(runs, "tps"),
                    "acceptance": accepted / drafted if drafted else 0.0, "drafted": drafted, "accepted": accepted,
                    "verify_ms": med(runs, "verify_ms"), "verify_rows": med(runs, "verify_rows"), "draft_ms": med(runs, "draft_ms"),
                    "plain_pass_ms": 1000.0 / med(plain, "tps") if med(plain, "tps") else 0.0})
    return out


def compare(build, model, prompt, threads, n, reps, spec):
    return compare_many(build, model, prompt, threads, n, reps, [spec])[0]


def break_even(c, v, k):
    """The per-depth acceptance a at which (1 - a^(k+1)) / (1 - a) = k*c + v (None: never pays)."""
    cost = k * c + v
    if cost <= 1:
        return 0.0
    if cost >= k + 1:
        return None
    lo, hi = 0.0, 1.0 - 1e-9
    for _ in range(100):
        a = (lo + hi) / 2
        e = (1 - a ** (k + 1)) / (1 - a)
        lo, hi = (a, hi) if e < cost else (lo, a)
    return lo


def server_bench(build, model, threads, clients, spec_args, body_extra, reps, n):
    port = 20000 + os.getpid() % 20000 + clients
    proc = subprocess.Popen([os.path.join(build, "bin", "minfer"), "serve", model, "--port", str(port), "--parallel",
                             str(max(clients, 1)), "-c", str(1024 * max(clients, 1)), "-t", str(threads), *spec_args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        prompts = list(COPY_PROMPTS.values())

        def one(i, spec):
            body = {"messages": [{"role": "user", "content": prompts[i % len(prompts)]}], "max_tokens": n,
                    "temperature": 0, **body_extra, "speculative": spec}
            req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:
                j = json.load(r)
            return j["choices"][0]["message"]["content"], j["usage"]["completion_tokens"], j["timings"]

        def round_(spec):
            t0 = time.time()
            with concurrent.futures.ThreadPoolExecutor(clients) as ex:
                res = list(ex.map(lambda i: one(i, spec), range(clients)))
            dt = time.time() - t0
            return sum(r[1] for r in res) / dt, res

        one(0, {"type": "none"})  # warm up (graph builds)
        plain, fast, texts_p, texts_f, dn, da = [], [], None, None, 0, 0
        for _ in range(reps):
            tp, rp = round_({"type": "none"})
            tf, rf = round_({"type": "ngram"} if "--spec-draft" not in spec_args else {"type": "draft+ngram"})
            plain.append(tp)
            fast.append(tf)
            texts_p, texts_f = [r[0] for r in rp], [r[0] for r in rf]
            dn = sum(r[2]["draft_n"] for r in rf)
            da = sum(r[2]["draft_n_accepted"] for r in rf)
        if texts_p != texts_f:
            raise RuntimeError("server outputs differ with drafting")
        return {"plain_tps": statistics.median(plain), "spec_tps": statistics.median(fast),
                "acceptance": da / dn if dn else 0.0}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--json")
    ap.add_argument("--skip-server", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="rates per CPU second of generation (needs -t 1)")
    ap.add_argument("--only-ngram", action="store_true", help="the (a) n-gram rows on SmolLM2 Q4_1 only")
    a = ap.parse_args()
    global CPU_RATE
    CPU_RATE = a.cpu
    if a.cpu and a.threads != 1:
        sys.exit("--cpu measures one thread's work: use -t 1")
    q8, big = make_models(a.build)
    rows = []
    md = ["| case | target | drafting | tokens | plain tok/s | spec tok/s | speed-up | acceptance | note |",
          "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]

    def add(case, target, how, r, note=""):
        rows.append({"case": case, "target": target, "drafting": how, **r, "note": note})
        md.append(f"| {case} | {target} | {how} | {r.get('tokens', '')} | {r['plain_tps']:.1f} | {r['spec_tps']:.1f} | "
                  f"{r['spec_tps'] / r['plain_tps']:.2f}x | {100 * r['acceptance']:.0f}% | {note} |")
        log(md[-1])

    ngram = ["--spec-ngram"]
    modes = (("n-gram, adaptive, n<=4", ngram), ("n-gram, fixed n=4", ngram + ["--spec-draft-fixed"]))
    for kind, prompts in (("copy", COPY_PROMPTS), ("own words", FREE_PROMPTS)):
        for name, prompt in prompts.items():
            for (how, _), r in zip(modes, compare_many(a.build, SMOL, prompt, a.threads, a.n, a.reps, [m for _, m in modes])):
                add(f"(a) {kind}: {name}", "SmolLM2-135M Q4_1", how, r)
    if a.only_ngram:
        print("\n".join(md))
        return
    add("(a) copy: edit code", "SmolLM2-135M Q4_1", "n-gram exact suffixes only (--spec-ngram-skip 0), n<=4",
        compare(a.build, SMOL, COPY_PROMPTS["edit code"], a.threads, a.n, a.reps, ngram + ["--spec-ngram-skip", "0"]))
    add("(a) copy: edit code", "SmolLM2-135M Q4_1", "n-gram, adaptive, n<=8",
        compare(a.build, SMOL, COPY_PROMPTS["edit code"], a.threads, a.n, a.reps, ngram + ["--spec-draft-n", "8"]))
    for name in ("rewrite", "edit code"):
        add(f"(a) copy: {name}", "SmolLM2-135M Q8_0", "n-gram, adaptive, n<=4",
            compare(a.build, q8, COPY_PROMPTS[name], a.threads, a.n, a.reps, ngram))
    story = "Write a short story about a lighthouse keeper who finds a message in a bottle."
    draft_tps = statistics.median(run_cli(a.build, SMOL, story, a.threads, 64, [])["tps"] for _ in range(a.reps))

    def costs(r, k):
        c = r["plain_tps"] / draft_tps if draft_tps else 0.0
        v = r["verify_ms"] / r["plain_pass_ms"] if r["plain_pass_ms"] else 0.0
        be = break_even(c, v, k)
        return (f"draft step = {c:.2f} target steps, verify of {k + 1} rows = {v:.2f} steps: break-even acceptance "
                + (f"{100 * be:.0f}% per depth" if be is not None else "none (never pays)"))

    draft = ["--spec-draft", SMOL, "--spec-draft-n", "4"]
    for name, prompt in (("story", story), ("rewrite", COPY_PROMPTS["rewrite"])):
        ad, fx = compare_many(a.build, q8, prompt, a.threads, a.n, a.reps, [draft, draft + ["--spec-draft-fixed"]])
        add(f"(b) {name}", "SmolLM2-135M Q8_0", "draft SmolLM2-135M Q4_1, adaptive, n<=4", ad)
        add(f"(b) {name}", "SmolLM2-135M Q8_0", "draft SmolLM2-135M Q4_1, fixed n=4", fx, costs(fx, 4))
    # The 360M-shaped random model: its text is noise, so drafts are refused; the fixed row gives
    # the measured costs and the acceptance at which the same draft would pay, the adaptive one
    # what drafting costs when it never pays.
    k = 4
    draft = ["--spec-draft", SMOL, "--spec-draft-n", str(k), "--spec-draft-p-min", "0"]
    ad, fx = compare_many(a.build, big, story, a.threads, 64, a.reps, [draft, draft + ["--spec-draft-fixed"]])
    add("(b) story", "random, SmolLM2-360M shape, Q8_0", f"draft SmolLM2-135M Q4_1, adaptive, n<={k}", ad)
    add("(b) story", "random, SmolLM2-360M shape, Q8_0", f"draft SmolLM2-135M Q4_1, fixed n={k}", fx, costs(fx, k))
    if not a.skip_server:
        for clients in (1, 4):
            r = server_bench(a.build, SMOL, a.threads, clients, ["--spec-ngram"], {}, a.reps, 120)
            add(f"(c) server, {clients} client{'s' if clients > 1 else ''}", "SmolLM2-135M Q4_1", "n-gram, n=4", r,
                "copy prompts, aggregate tok/s")
    print("\n".join(md))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
