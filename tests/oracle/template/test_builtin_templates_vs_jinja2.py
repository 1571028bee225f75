"""minfer's built-in chat templates (ChatML, and the Gemma template used for gemma / gemma2 /
gemma3 / gemma3n GGUFs without tokenizer.chat_template) rendered by `minfer chat-template
--builtin NAME`, byte-identical to Python jinja2 configured like transformers rendering the
same template text (which `minfer chat-template --builtin NAME --print-template` prints: the
exact string compiled into minfer).

The conversations: a table of Gemma-specific cases (system folded into the first user turn,
multi-turn, list content, trimming, roles Gemma has no turn for, add_generation_prompt on and
off), then every conversation of chat_cases.json. Also the system + user prompt against the
literal format Gemma documents.
"""
import json
import os
import subprocess
import tempfile

import jinja2  # noqa: F401  (the oracle must be installed: a missing one fails the test)
import pytest

from jinja_oracle import FIXED_NOW, render
from minfer_runner import MINFER, compare, run_minfer

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = json.load(open(os.path.join(HERE, "chat_cases.json"), encoding="utf-8"))

BOS = {"bos_token": "<bos>", "eos_token": "<eos>"}
SYSTEM_USER = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}]


def conv(*turns):
    """conv(("user", "Hi"), ("assistant", "Hello")) -> messages."""
    return [{"role": r, "content": c} for r, c in turns]


GEMMA_CASES = [
    ("system-user-gen", dict(BOS, messages=SYSTEM_USER, add_generation_prompt=True)),
    ("system-user-no-gen", dict(BOS, messages=SYSTEM_USER, add_generation_prompt=False)),
    ("user-only-gen", dict(BOS, messages=conv(("user", "Hi")), add_generation_prompt=True)),
    ("no-bos-token", {"messages": conv(("user", "Hi")), "add_generation_prompt": True}),
    ("multi-turn-system", dict(BOS, messages=conv(("system", "Be brief."), ("user", "What is 2+2?"),
                                                  ("assistant", "4."), ("user", "And 3+3?")),
                               add_generation_prompt=True)),
    ("multi-turn-closed", dict(BOS, messages=conv(("user", "Hi"), ("assistant", "Hello!"), ("user", "Bye"),
                                                  ("assistant", "Goodbye.")), add_generation_prompt=False)),
    ("list-content", dict(BOS, messages=[
        {"role": "system", "content": [{"type": "text", "text": "Sys A."}, {"type": "text", "text": " Sys B."}]},
        {"role": "user", "content": [{"type": "text", "text": "Look: "}, {"type": "image", "url": "x.png"},
                                     {"type": "text", "text": "what is it?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
        {"role": "user", "content": [{"type": "text", "text": "Sure?"}]}], add_generation_prompt=True)),
    ("list-content-no-gen", dict(BOS, messages=[
        {"role": "user", "content": [{"type": "text", "text": "One"}, {"type": "text", "text": "Two"}]}],
                                 add_generation_prompt=False)),
    ("whitespace-trimmed", dict(BOS, messages=conv(("system", "  sys \n"), ("user", "\n  Hi there \t\n"),
                                                   ("assistant", " reply\n\n")), add_generation_prompt=False)),
    ("system-only", dict(BOS, messages=conv(("system", "Only a system prompt.")), add_generation_prompt=True)),
    ("system-then-assistant", dict(BOS, messages=conv(("system", "S"), ("assistant", "A"), ("user", "U")),
                                   add_generation_prompt=True)),
    ("second-system-and-tool", dict(BOS, messages=conv(("system", "S1"), ("user", "U1"), ("system", "S2"),
                                                       ("tool", "42"), ("user", "U2")), add_generation_prompt=True)),
    ("null-and-missing-content", dict(BOS, messages=[{"role": "user", "content": None}, {"role": "assistant"},
                                                     {"role": "user", "content": "x"}], add_generation_prompt=True)),
    ("unicode", dict(BOS, messages=conv(("system", "Réponds en français 🇫🇷"), ("user", "Ça va ? 你好")),
                     add_generation_prompt=True)),
    ("empty-messages-gen", dict(BOS, messages=[], add_generation_prompt=True)),
    ("empty-messages-no-gen", dict(BOS, messages=[], add_generation_prompt=False)),
]


def builtin_source(name):
    p = subprocess.run([MINFER, "chat-template", "--builtin", name, "--print-template"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    source = p.stdout.decode("utf-8")
    assert "{%" in source, source
    return source


def run_builtin(name, case, tmp):
    """`minfer chat-template --builtin NAME` on CASE (the same runner as the file templates)."""
    path = os.path.join(tmp, f"{name}.jinja")
    # --builtin and --template FILE with the printed text must agree: check both.
    by_file = run_minfer(path, case)
    case_path = os.path.join(tmp, "case.json")
    with open(case_path, "w", encoding="utf-8") as f:
        json.dump(case, f, ensure_ascii=False)
    p = subprocess.run([MINFER, "chat-template", "--builtin", name, "--input", case_path, "--now", FIXED_NOW],
                       capture_output=True, timeout=60)
    by_name = (True, p.stdout.decode("utf-8")) if p.returncode == 0 else (False, p.stderr.decode("utf-8", "replace"))
    assert by_file == by_name, (name, case, by_file, by_name)
    return by_name


def check_builtin(name, cases):
    source = builtin_source(name)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, f"{name}.jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(source)
        for case_name, case in cases:
            expected = render(source, case)
            ours = run_builtin(name, case, tmp)
            if not compare(expected, ours):
                failures.append((case_name, expected, ours))
    print(f"\nbuilt-in {name}: {len(cases) - len(failures)}/{len(cases)} conversations identical to jinja2")
    for case_name, e, o in failures:
        print(f"  MISMATCH {name} / {case_name}\n    jinja2: {e[0]} {e[1][:600]!r}\n    minfer: {o[0]} {o[1][:600]!r}")
    assert not failures


def test_gemma_builtin_vs_jinja2():
    cases = GEMMA_CASES + [(c["name"], dict(BOS, **c["case"])) for c in CASES]
    check_builtin("gemma", cases)
    # Every case renders (the fallback must not refuse a conversation the server accepts).
    source = builtin_source("gemma")
    for case_name, case in cases:
        assert render(source, case)[0], case_name


def test_chatml_builtin_vs_jinja2():
    check_builtin("chatml", GEMMA_CASES + [(c["name"], c["case"]) for c in CASES])


def test_gemma_builtin_is_gemmas_documented_format():
    # Gemma's prompt format (ai.google.dev/gemma/docs/core/prompt-structure): <bos>, turns
    # opened by <start_of_turn>ROLE and closed by <end_of_turn>, the assistant is "model", the
    # system instructions go at the start of the first user turn.
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "gemma.jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(builtin_source("gemma"))
        ok, text = run_builtin("gemma", dict(BOS, messages=SYSTEM_USER, add_generation_prompt=True), tmp)
        assert ok, text
        assert text == "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\n", text
        ok, text = run_builtin("gemma", dict(BOS, messages=conv(("user", "Hi"), ("assistant", "Hello!"), ("user", "Bye")),
                                             add_generation_prompt=False), tmp)
        assert ok, text
        assert text == ("<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                        "<start_of_turn>user\nBye<end_of_turn>\n"), text


def test_unknown_builtin_fails():
    p = subprocess.run([MINFER, "chat-template", "--builtin", "alpaca", "--print-template"], capture_output=True, timeout=60)
    assert p.returncode == 1
    assert "chatml, gemma, llama3" in p.stderr.decode(), p.stderr


LEGACY = ["llama3", "llama2", "mistral", "phi3", "zephyr", "vicuna", "command-r", "granite"]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_builtin_vs_jinja2(name):
    """The templates under llama.cpp's legacy names render as jinja2 renders their text."""
    check_builtin(name, GEMMA_CASES + [(c["name"], c["case"]) for c in CASES])


# Each family's published prompt format, for a system prompt, a user turn and the generation prompt.
DOCUMENTED = {
    "llama3": "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>"
              "\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "llama2": "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST]",
    "mistral": "[INST] You are terse.\n\nHi [/INST]",
    "phi3": "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n",
    "zephyr": "<|system|>\nYou are terse.</s>\n<|user|>\nHi</s>\n<|assistant|>\n",
    "vicuna": "You are terse.\n\nUSER: Hi\nASSISTANT:",
    "command-r": "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are terse.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
                 "Hi<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    "granite": "<|start_of_role|>system<|end_of_role|>You are terse.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi"
               "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
}


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_builtin_is_the_documented_format(name):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, f"{name}.jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(builtin_source(name))
        ok, text = run_builtin(name, dict(BOS, messages=SYSTEM_USER, add_generation_prompt=True), tmp)
    assert ok, text
    assert text == DOCUMENTED[name], text
