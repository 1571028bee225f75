#!/usr/bin/env python3
"""What serving many models costs (issue 44 part 5), against a one-model server, same machine,
interleaved rounds, medians:

1. The first token of a request to an unloaded model: its time to first token (TTFT) in a pool
   server (`minfer serve MODEL OTHER`, the model not loaded yet) against what a one-model server
   of that file takes to start (spawn to /health 200: the weights, tokenizer, template, engine)
   plus its own first request's TTFT (the graphs built then). The overhead column is what a cold
   request to the pool pays beyond those two.
2. A loaded model's throughput with a second model loaded and idle beside it, against the
   one-model server: bench/server-load.py's levels (aggregate generated tokens/s, streaming
   clients back to back), the same prompts and sampling.

  python3 bench/pool-cost.py --model ~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf \\
      --other ~/.cache/minfer/models/gemma3-270m-Q4_K_M.gguf [--rounds 3] [--clients 1,4] [--seconds 10]
"""
import argparse
import importlib.util
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("server_load", os.path.join(HERE, "server-load.py"))
server_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server_load)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, minfer, models, parallel, threads, ctx):
        self.port = free_port()
        t0 = time.perf_counter()
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        cmd = [minfer, "serve", *models, "--host", "127.0.0.1", "--port", str(self.port), "--parallel", str(parallel),
               "-c", str(ctx * parallel), "--queue", "64", "-t", str(threads)]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(1200):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1):
                    self.ready_s = time.perf_counter() - t0
                    return
            except OSError:
                if self.proc.poll() is not None:
                    sys.exit(f"server exited: {self.text()}")
                time.sleep(0.05)
        sys.exit("server did not become healthy")

    def text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        os.unlink(self.log.name)


def name_of(path):
    return os.path.basename(path)[:-5] if path.endswith(".gguf") else path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minfer", default="build/bin/minfer")
    ap.add_argument("--model", required=True, help="the model measured (a .gguf path)")
    ap.add_argument("--other", required=True, help="the second model of the pool (a .gguf path)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", default="1,4")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512, help="context per slot")
    a = ap.parse_args()
    levels = [int(x) for x in a.clients.split(",")]
    parallel = max(levels)
    name = name_of(a.model)
    prompt = server_load.PROMPTS[1]
    cold, ready, first = [], [], []
    rate = {("one", n): [] for n in levels} | {("pool", n): [] for n in levels}
    for rnd in range(a.rounds):
        # The one-model server: its start, its first request, its throughput.
        one = Server(a.minfer, [a.model], parallel, a.threads, a.ctx)
        try:
            ready.append(one.ready_s)
            t, _, err = server_load.one_request("127.0.0.1", one.port, prompt, 8, 120)  # graphs built
            assert err is None, err
            first.append(t)
            for n in levels:
                r = server_load.run_level("127.0.0.1", one.port, n, a.seconds, a.max_tokens)
                assert r["errors"] == 0, r["error_samples"]
                rate[("one", n)].append(r["tokens_per_s"])
        finally:
            one.stop()
        # The pool: the first request to the unloaded model, then its throughput with the other
        # model loaded (one request) and idle.
        pool = Server(a.minfer, [a.model, a.other], parallel, a.threads, a.ctx)
        try:
            t, _, err = server_load.one_request("127.0.0.1", pool.port, prompt, 8, 300, name)
            assert err is None, err
            cold.append(t)
            _, _, err = server_load.one_request("127.0.0.1", pool.port, prompt, 8, 300, name_of(a.other))
            assert err is None, err
            server_load.one_request("127.0.0.1", pool.port, prompt, 8, 120, name)
            for n in levels:
                r = server_load.run_level("127.0.0.1", pool.port, n, a.seconds, a.max_tokens, name)
                assert r["errors"] == 0, r["error_samples"]
                rate[("pool", n)].append(r["tokens_per_s"])
        finally:
            pool.stop()
        print(f"round {rnd + 1}: cold TTFT {cold[-1]:.3f} s, one-model start {ready[-1]:.3f} s + first TTFT {first[-1]:.3f} s; " +
              ", ".join(f"{n} clients {rate[('one', n)][-1]:.1f} / {rate[('pool', n)][-1]:.1f} tok/s" for n in levels),
              flush=True)
    med = statistics.median
    print(f"\n{name}, {a.rounds} rounds, -t {a.threads}, medians:\n")
    print("| first request to an unloaded model | TTFT in the pool (s) | one-model server: start (s) | + its first TTFT (s) | overhead (s) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| {name} | {med(cold):.3f} | {med(ready):.3f} | {med(first):.3f} | {med(cold) - med(ready) - med(first):+.3f} |")
    print("\n| clients | one-model server tok/s | pool, second model idle, tok/s | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for n in levels:
        o, p = med(rate[("one", n)]), med(rate[("pool", n)])
        print(f"| {n} | {o:.1f} | {p:.1f} | {p / o:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
