#!/usr/bin/env python3
"""Load test of `minfer serve`: 1, 4 and 8 concurrent streaming chat clients, each sending
requests back to back for a fixed time; reports errors (must be 0), aggregate generated
tokens/s, and time to first token (median and p90). Standard library only.

  python3 bench/server-load.py --minfer build/bin/minfer --model SmolLM2-135M-Instruct \
      [--clients 1,4,8] [--seconds 20] [--max-tokens 64] [--threads N] [--json out.json]
  python3 bench/server-load.py --url http://127.0.0.1:8080 ...   # an already running server

The server is started with --parallel = the largest client count, so the 8-client level shows
the continuous-batching gain: aggregate tokens/s at 8 clients over that at 1.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

PROMPTS = ["Write a short story about a robot.", "Explain why the sky is blue.", "List some fruits and their colors.",
           "Describe a busy city street.", "What makes a good friend?", "Tell me about the ocean.",
           "How do plants grow?", "Describe your favourite meal."]


def one_request(host, port, prompt, max_tokens, timeout, model=None):
    """Streams one chat completion (to `model` when given); returns (ttft_s, completion_tokens,
    error or None)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                       "temperature": 0.7, "stream": True, "stream_options": {"include_usage": True},
                       **({"model": model} if model else {})})
    t0 = time.perf_counter()
    ttft = None
    tokens = None
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return None, 0, f"HTTP {resp.status}: {resp.read()[:200]!r}"
        done = False
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                return ttft, 0, f"stream error: {chunk['error']}"
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content") and ttft is None:
                ttft = time.perf_counter() - t0
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
        if not done or tokens is None:
            return ttft, 0, "stream ended without usage and [DONE]"
        return ttft, tokens, None
    except (OSError, http.client.HTTPException, ValueError) as e:
        return ttft, 0, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def run_level(host, port, n_clients, seconds, max_tokens, model=None):
    stop_at = time.perf_counter() + seconds
    lock = threading.Lock()
    ttfts, errors = [], []
    total = {"tokens": 0, "requests": 0}

    def client(k):
        i = k
        while time.perf_counter() < stop_at:
            # A unique tail: only the template's shared head can come from a slot's cache, at
            # every concurrency level alike.
            prompt = f"{PROMPTS[i % len(PROMPTS)]} (request {i})"
            ttft, tokens, err = one_request(host, port, prompt, max_tokens, 300, model)
            i += n_clients
            with lock:
                total["requests"] += 1
                total["tokens"] += tokens
                if err:
                    errors.append(err)
                elif ttft is not None:
                    ttfts.append(ttft)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttfts.sort()
    return {"clients": n_clients, "seconds": round(wall, 2), "requests": total["requests"], "errors": len(errors),
            "error_samples": errors[:3], "tokens": total["tokens"], "tokens_per_s": round(total["tokens"] / wall, 1),
            "ttft_median_s": round(statistics.median(ttfts), 3) if ttfts else None,
            "ttft_p90_s": round(ttfts[int(0.9 * (len(ttfts) - 1))], 3) if ttfts else None}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="use a running server instead of starting one")
    ap.add_argument("--minfer", default="build/bin/minfer")
    ap.add_argument("--model", default="SmolLM2-135M-Instruct")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="server compute threads (0: all)")
    ap.add_argument("--ctx", type=int, default=512, help="context per slot")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    levels = [int(x) for x in a.clients.split(",")]

    proc = None
    if a.url:
        u = urllib.parse.urlparse(a.url)
        host, port = u.hostname, u.port or 80
    else:
        host, port = "127.0.0.1", free_port()
        cmd = [a.minfer, "serve", a.model, "--host", host, "--port", str(port), "--parallel", str(max(levels)),
               "-c", str(a.ctx * max(levels)), "--queue", "64", "--metrics"]
        if a.threads:
            cmd += ["-t", str(a.threads)]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None:
                    sys.exit(f"server exited: {proc.stderr.read()}")
                time.sleep(0.1)
    try:
        one_request(host, port, PROMPTS[0], 8, 60)  # warm-up: graphs built, pages touched
        results = []
        for n in levels:
            r = run_level(host, port, n, a.seconds, a.max_tokens)
            results.append(r)
            print(f"{n:2d} clients: {r['requests']:4d} requests, {r['errors']} errors, {r['tokens_per_s']:7.1f} tok/s "
                  f"aggregate, TTFT median {r['ttft_median_s']} s, p90 {r['ttft_p90_s']} s", flush=True)
        base = results[0]["tokens_per_s"]
        if base:
            for r in results:
                r["gain_vs_first"] = round(r["tokens_per_s"] / base, 2)
            print(f"batching gain ({levels[-1]} vs {levels[0]} clients): {results[-1]['gain_vs_first']:.2f}x")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"cpu_count": os.cpu_count(), "max_tokens": a.max_tokens, "levels": results}, f, indent=1)
        if any(r["errors"] for r in results):
            print("errors:", [r["error_samples"] for r in results if r["errors"]])
            return 1
        return 0
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
