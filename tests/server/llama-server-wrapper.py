#!/usr/bin/env python3
"""Stands in for llama-server in llama.cpp's server test suite (tools/server/tests): runs
`minfer serve` with the suite's flags as they are (minfer serve takes llama-server's flags, and
refuses by name the ones it does not support, so such a test fails at start, visibly), and only
maps the model: the suite's presets download llama.cpp's tiny test models from the Hub, which
is unreachable here, so every preset gets a model we have.

  LLAMA_SERVER_BIN_PATH=tests/server/llama-server-wrapper.py MINFER_BIN=build/bin/minfer \
  MINFER_SMOLLM2=~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf pytest unit/test_basic.py
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.normpath(os.path.join(HERE, "../../.deps/llama.cpp/tools/server/tests"))
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", os.path.expanduser("~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf"))
MODEL_SOURCES = {"--model", "-m", "--model-url", "-mu", "--hf-repo", "-hf", "-hfr", "--hf-file", "-hff"}


def main(argv):
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in MODEL_SOURCES and i + 1 < len(argv):  # the model: ours, whatever they name
            i += 2
        elif a in ("--model-draft", "-md", "--spec-draft-model") and i + 1 < len(argv):  # their tiny draft: SmolLM2 drafts for itself
            out += ["--spec-draft", SMOLLM2]
            i += 2
        elif a == "--chat-template-file" and i + 1 < len(argv):
            # Their tests name templates relative to tools/server/tests of their checkout.
            path = argv[i + 1]
            if not os.path.exists(path):
                path = os.path.normpath(os.path.join(SUITE, path))
            out += ["--chat-template-file", path]
            i += 2
        else:
            out.append(a)
            i += 1
    binary = os.environ.get("MINFER_BIN", "build/bin/minfer")
    os.execv(binary, [binary, "serve", SMOLLM2, *out])


if __name__ == "__main__":
    main(sys.argv[1:])
