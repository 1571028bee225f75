#!/usr/bin/env python3
"""Stands in for llama-server in llama.cpp's server test suite (tools/server/tests): maps the
llama-server flags its utils.py passes to `minfer serve`, and serves our test model whatever
model they name (their tests download tiny models; only the model-independent ones can pass).

  LLAMA_SERVER_BIN_PATH=tests/server/llama-server-wrapper.py MINFER_BIN=build/bin/minfer \
  MINFER_SMOLLM2=~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf pytest unit/test_basic.py
"""
import os
import sys

MAPPED = {"--host": "--host", "--port": "--port", "--ctx-size": "-c", "-c": "-c", "--parallel": "--parallel",
          "-np": "--parallel", "--api-key": "--api-key", "--alias": "--alias", "--threads": "-t", "-t": "-t",
          "--n-predict": "-n", "-n": "-n", "--batch-size": "-b", "-b": "-b",
          "--spec-draft-n-max": "--spec-draft-n", "--spec-draft-n-min": "--spec-draft-min",
          "--draft-max": "--spec-draft-n", "--draft-min": "--spec-draft-min"}
# Flags with a value that minfer serve has no use for (model sources, GPU, sampling defaults...).
IGNORED_WITH_VALUE = {"--temp", "--seed", "--model", "-m", "--model-url", "--hf-repo", "--hf-file", "--model-draft",
                      "--ubatch-size", "-ub", "--n-gpu-layers", "-ngl", "--pooling", "--tags", "-ctk", "-ctv", "-fa",
                      "--slot-save-path", "--grp-attn-n", "--grp-attn-w", "--lora", "--spec-type",
                      "--reasoning-format", "--reasoning", "--mmproj-url", "--media-path", "--sleep-idle-seconds",
                      "--cache-ram", "--cors-origins", "--models-dir", "--models-max", "--models-preset", "--tools",
                      "--tools-runtime", "--mcp-servers-config", "--mcp-servers-json", "--draft",
                      "--spec-synth-len", "--spec-synth-rates", "--keep", "--ctx-checkpoints"}


def main(argv):
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in MAPPED and i + 1 < len(argv):
            out += [MAPPED[a], argv[i + 1]]
            i += 2
        elif a in ("--model-draft", "-md") and i + 1 < len(argv):  # their tiny draft: ours is SmolLM2 itself
            out += ["--spec-draft", os.environ.get("MINFER_SMOLLM2", os.path.expanduser(
                "~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf"))]
            i += 2
        elif a == "--chat-template-file" and i + 1 < len(argv):
            # Their tests name templates relative to tools/server/tests of their checkout.
            path = argv[i + 1]
            if not os.path.exists(path):
                here = os.path.dirname(os.path.abspath(__file__))
                path = os.path.normpath(os.path.join(here, "../../.deps/llama.cpp/tools/server/tests", path))
            out += ["--chat-template-file", path]
            i += 2
        elif a == "--chat-template" and i + 1 < len(argv):
            out += ["--chat-template", argv[i + 1]]
            i += 2
        elif a in IGNORED_WITH_VALUE:
            i += 2
        else:  # boolean flags (--jinja, --cont-batching, --metrics, --no-ui, --offline...)
            i += 1
    # llama-server's --ctx-size is the total over its slots; ours is per slot.
    if "-c" in out and "--parallel" in out:
        c = out.index("-c") + 1
        out[c] = str(max(8, int(out[c]) // int(out[out.index("--parallel") + 1])))
    binary = os.environ.get("MINFER_BIN", "build/bin/minfer")
    model = os.environ.get("MINFER_SMOLLM2",
                           os.path.expanduser("~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf"))
    os.execv(binary, [binary, "serve", model, *out])


if __name__ == "__main__":
    main(sys.argv[1:])
