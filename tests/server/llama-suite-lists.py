#!/usr/bin/env python3
"""Writes llama-suite-pass.txt and llama-suite-cannot.txt from a run of the whole llama.cpp
server suite (the -rA lines of `tests/server/run-llama-suite.sh --all`), and prints the counts
per file. Every test that does not pass must match one of REASONS below (a test id pattern and
the one-line reason it cannot pass here); one that matches none is a regression or a new test:
the script names it and exits 1, and nothing is written.

  tests/server/run-llama-suite.sh --all > /tmp/suite.log
  python3 tests/server/llama-suite-lists.py /tmp/suite.log
"""
import collections
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The suite's presets serve llama.cpp's tiny test models (stories260K/15M "tinyllama", a BERT
# embedder, a FIM coder, ...), which cannot be fetched here; the wrapper serves SmolLM2-135M for
# every preset. Tests that assert those models' text or token counts cannot pass with any other
# model; tests of features minfer does not have say which.
TEXT = "asserts the text llama.cpp's tiny test model writes (stories260K/15M); the wrapper serves SmolLM2"
REASONS = [
    # Features minfer does not have (yet): whole files.
    (r"test_vision_api\.py", "vision input (--mmproj): minfer has no multimodal models; the few that pass only check that a bad image is refused"),
    (r"test_compat_anthropic\.py::test_anthropic_vision", "vision input (--mmproj): no multimodal models"),
    (r"test_security\.py::test_local_media_file", "local media files for vision input (--media-path, mmproj): no multimodal models"),
    (r"test_slot_save\.py::test_slot_(save_restore_with|save_restore_image|restore_media)", "slot files holding images (mmproj): no multimodal models"),
    (r"test_router\.py", "router mode (--models-dir/--models-preset: many models behind one server, loaded on demand) is not implemented"),
    (r"test_stream\.py", "streams across router-mode model loads (test_stream uses the router preset): router mode is not implemented"),
    (r"test_mcp_servers\.py", "MCP client (--mcp-config: the server calling MCP tool servers) is not implemented"),
    (r"test_tools_builtin\.py", "built-in server-side tools (--tools: file/shell/web tools run by the server) are not implemented"),
    (r"test_security\.py::test_cors_(origins_defaults_to_localhost_with_tools|proxy)", "the router's --tools / CORS proxy is not implemented"),
    (r"test_proxy\.py", "the CORS proxy endpoint (/cors-proxy, --webui-mcp-proxy) is not implemented"),
    (r"test_rerank\.py", "reranking (/rerank with a reranker model) is not implemented: a reranker GGUF starts but its requests say why not"),
    (r"test_lora\.py", "LoRA adapters (--lora, /lora-adapters) are not implemented"),
    (r"test_kv_keep_only_active\.py", "the host-memory prompt cache (--cache-ram, --cache-idle-slots, --kv-unified) and its log tags are not implemented"),
    (r"test_completion\.py::test_completion_unified", "--kv-unified (one KV pool shared by every slot, so one request can use more than n_ctx/np) is not implemented"),
    (r"test_completion\.py::test_completion_prompt_cache", "the host-memory prompt cache (--kv-unified, --cache-ram) is not implemented; it also counts tinyllama's prompt tokens"),
    (r"test_completion\.py::test_n_probs_post_backend_sampling", "--backend_sampling (sampling on the GPU backend) is not implemented"),
    (r"test_speculative\.py::test_(synth|with_and_without_draft)", "--spec-synth-rates (llama.cpp's synthetic draft acceptance, a testing aid) is not implemented"),
    (r"test_ctx_shift\.py::test_ctx_shift_enabled", "asserts tinyllama's prompt token count (226, which makes 96 more tokens shift the context); SmolLM2's is 117, so nothing shifts (tests/server/test_context_shift.py tests the shift)"),
    (r"test_security\.py::test_access_static_assets_without_api_key", "asserts the files of llama.cpp's own Svelte web UI build (/sw.js, /manifest.webmanifest, /_app/version.json); minfer's page is /, chat.js, chat.css, which need no key"),
    (r"test_basic\.py::test_load_split_model", "downloads llama.cpp's split stories15M and asserts its text (split GGUF loading is tested in tests/hub and tests/unit)"),
    # Their models' text and token counts.
    (r"test_(chat_)?completion\.py::test_(chat_)?completion(_stream)?\[", TEXT),
    (r"test_(chat_)?completion\.py::test_(chat_)?completion(_stream)?_with_openai_library", TEXT + "; also wants system_fingerprint 'b<llama.cpp build>'"),
    (r"test_speculative\.py::test_multi_requests_parallel", TEXT),
    (r"test_compat_oai_responses\.py::test_responses(_stream)?_with_openai_library", TEXT + " ('Suddenly'; the protocol is tested in tests/server/test_responses.py)"),
    (r"test_slot_save\.py::test_slot_(save_restore|erase)$", TEXT + " ('Whiskers|Flana') before it saves (the round trip itself is tested in tests/server/test_slot_files.py)"),
    (r"test_slot_save\.py::test_slot_restore_legacy_token_list", "restores llama.cpp's own slot file (a legacy token list) and its 84 tokens; minfer's slot files are its own format"),
    (r"test_chat_completion\.py::test_chat_completion_cached_tokens", "asserts tinyllama's prompt token count (77)"),
    (r"test_chat_completion\.py::test_chat_template$", "expects the '<s> ' BOS text of tinyllama's vocabulary in the prompt; SmolLM2 adds no BOS"),
    (r"test_chat_completion\.py::test_return_progress", "counts prefill batches of tinyllama's tokenization of the prompt; SmolLM2's is shorter (fewer batches)"),
    (r"test_completion\.py::test_nocache_long_input_prompt", "expects the prompt to overflow a 256-token slot in tinyllama's tokenization; in SmolLM2's it fits"),
    (r"test_completion\.py::test_completion_parallel_slots", "SmolLM2 ends these raw (untemplated) prompts at once at seed 42 (empty text); the test wants more than 10 characters of tinyllama's stories"),
    (r"test_completion\.py::test_completion_response_fields", TEXT),
    (r"test_completion\.py::test_cancel_request", "needs a generation that outlasts the 2 s it waits (tinyllama's 4096-token run); SmolLM2 at seed 42 may end sooner or later than that"),
    (r"test_ctx_shift\.py::test_ctx_shift_disabled", "asserts tinyllama's token counts (an 8-token prompt then exactly 248 tokens, a prompt over 256 tokens); SmolLM2 ends or tokenizes differently"),
    (r"test_embedding\.py::test_embedding_(mixed_input|pooling_none|usage)", "asserts the token counts of llama.cpp's BERT embedding model ([CLS]/[SEP] added); SmolLM2 adds none"),
    (r"test_infill\.py::test_infill_with(out)?_input_extra", "needs llama.cpp's FIM test model; SmolLM2 has no FIM tokens, so /infill is a 400 by design (tests/server/test_infill.py covers FIM vocabularies)"),
    (r"test_tokenize\.py::test_tokenize_with_bos", "expects BOS id 1 (tinyllama's vocabulary); SmolLM2 adds no BOS"),
]


def main(log_path):
    status = {}
    for line in open(log_path, encoding="utf-8", errors="replace"):
        m = re.match(r"^(PASSED|FAILED|ERROR) (unit/.*)$", line.rstrip("\n"))
        if m:
            st, test = m.groups()
            # FAILED and ERROR lines end with " - message"; ids may hold spaces, " - " and "]".
            if st != "PASSED" and " - " in test:
                test = test[:test.index("] - ") + 1] if "[" in test.split(" - ")[0] and "] - " in test else test.split(" - ")[0]
            status[test] = st if status.get(test) != "ERROR" else "ERROR"
            continue
        m = re.match(r"^SKIPPED \[\d+\] (unit/[^:]+):\d+: (.*)$", line.rstrip("\n"))
        if m:
            status.setdefault(m.group(1) + "::(skipped: " + m.group(2) + ")", "SKIPPED")
    if not status:
        sys.exit(f"{log_path}: no PASSED/FAILED lines (run the suite with --all, which passes -rA)")
    passed, cannot, unexplained = [], [], []
    for test, st in sorted(status.items()):
        reason = next((r for pat, r in REASONS if re.search(pat, test)), None)
        if st == "SKIPPED":
            reason = "skipped by the suite itself (its reason follows the test's file)"
        # Those files' passes are refusals a vision/router/MCP server makes of bad input, which
        # minfer makes because it has no such feature: they pass for the wrong reason.
        if st == "PASSED" and not re.search(r"test_(vision_api|router|mcp_servers)\.py", test):
            passed.append(test)
        elif reason:
            cannot.append(f"{test}  # {reason}")
        else:
            unexplained.append(f"{st} {test}")
    if unexplained:
        print("tests that do not pass and have no reason in REASONS (a regression, or a new test):")
        print("\n".join("  " + u for u in unexplained))
        sys.exit(1)
    head = ("# Tests of llama.cpp's server suite (tools/server/tests/unit, -m \"not slow\") that pass against\n"
            "# `minfer serve` through llama-server-wrapper.py; run-llama-suite.sh runs exactly these and all\n"
            "# must pass. llama-suite-cannot.txt lists the rest with the reason each cannot pass here.\n"
            "# Regenerate: tests/server/run-llama-suite.sh --all > LOG; tests/server/llama-suite-lists.py LOG\n")
    with open(os.path.join(HERE, "llama-suite-pass.txt"), "w") as f:
        f.write(head + "\n".join(passed) + "\n")
    with open(os.path.join(HERE, "llama-suite-cannot.txt"), "w") as f:
        f.write("# Tests of llama.cpp's server suite (-m \"not slow\") that cannot pass against `minfer serve`,\n"
                "# each with its reason (written by llama-suite-lists.py from its REASONS table).\n"
                + "\n".join(cannot) + "\n")
    per_file = collections.defaultdict(lambda: [0, 0])
    for test in status:
        per_file[test.split("::")[0]][0 if test in passed else 1] += 1
    print(f"{'file':34} {'pass':>5} {'cannot':>7}")
    for name, (p, c) in sorted(per_file.items()):
        print(f"{name:34} {p:5} {c:7}")
    print(f"{'total':34} {len(passed):5} {len(cannot):7}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
