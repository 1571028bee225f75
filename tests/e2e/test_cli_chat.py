"""End-to-end tests of `minfer --cnv MODEL` with piped stdin on SmolLM2-135M-Instruct (greedy).

With stdin not a terminal, stdout carries only the replies (one per turn, each ending with a
newline) and everything else goes to stderr: the `[turn] prefill N tokens (incremental|full
render)` line of every turn lets these tests check what was prefilled.
"""
import json
import os
import re
import struct
import subprocess

import pytest

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")
GEMMA3 = os.environ.get("MINFER_GEMMA3", "")
N = "24"  # tokens per reply: keeps the suite short


def chat(stdin, *args, n=N, one_line=True):
    """Runs a piped chat; one_line adds --stop "\\n" so that each reply is one line of stdout."""
    if one_line:
        args = ("--stop", "\n", *args)
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    r = subprocess.run([MINFER, "--cnv", MODEL, "--temp", "0", "-n", n, "-t", "2", *args],
                       capture_output=True, text=True, input=stdin, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def turns(stderr):
    """(prefilled tokens, 'incremental' or 'full render', stop reason) of every turn."""
    return [(int(m[0]), m[1], m[2]) for m in
            re.findall(r"\[turn\] prefill (\d+) tokens \((incremental|full render)\).*?stop: (\w+)", stderr)]


def replies(r, count):
    """Splits stdout into `count` replies: each ends with a newline (added when the model did
    not end with one), so with one-line replies, lines are replies."""
    lines = r.stdout.split("\n")
    assert lines[-1] == "", repr(r.stdout)
    assert len(lines) - 1 == count, (r.stdout, r.stderr)
    return lines[:-1]


def one_shot(prompt, *args):
    r = subprocess.run([MINFER, MODEL, prompt, "--temp", "0", "-n", N, "-t", "2", "--stop", "\n", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_piped_turns_prefill_only_the_new_message():
    r = chat("What is the capital of France?\nAnd of Germany?\n")
    a, b = replies(r, 2)
    # The first turn is exactly the one-shot command's prompt and reply.
    assert a == one_shot("What is the capital of France?")
    t = turns(r.stderr)
    assert len(t) == 2, r.stderr
    assert t[0][1] == "full render" and t[1][1] == "incremental"
    # Turn 2 prefills "<|im_start|>user\nAnd of Germany?<|im_end|>\n<|im_start|>assistant\n":
    # the previous turn was closed (end-of-turn appended) right after its reply.
    assert t[1][0] == 13, r.stderr
    assert b and b != a
    # Both orders of --cnv work.
    r2 = subprocess.run([MINFER, MODEL, "--cnv", "--temp", "0", "-n", N, "-t", "2"], input="What is the capital of France?\n",
                        capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0 and r2.stdout == a + "\n"


def test_regen_reproduces_the_greedy_reply():
    r = chat("Name three colors.\n/regen\nThanks!\n/regen\n")
    a, a2, b, b2 = replies(r, 4)
    assert a == a2 and b == b2 and a != b
    t = turns(r.stderr)
    assert [x[0] for x in t] == [t[0][0], t[0][0], t[2][0], t[2][0]]  # the same prefill is replayed


def test_clear_keeps_the_system_prompt():
    r = chat("Hello!\n/clear\nHello!\n", "--system", "You are a pirate. Answer like one.")
    a, b = replies(r, 2)
    assert a == b  # the same conversation again
    assert "[chat] cleared (the system prompt is kept)" in r.stderr
    t = turns(r.stderr)
    # After /clear the cached system prompt is kept: only the user message is prefilled again.
    assert t[1][1] == "incremental" and t[1][0] < t[0][0], r.stderr
    # Without --system, /clear forgets everything and the first reply comes back too.
    r = chat("Hello!\nWhat did I just say?\n/clear\nHello!\n")
    x, _, y = replies(r, 3)
    assert x == y


def test_system_command_and_unknown_commands():
    r = chat("/help\n/frobnicate\n/system You only answer in French.\n/stats\n")
    assert r.stdout == ""  # no turn: nothing on stdout
    assert "/regen" in r.stderr and "/save FILE" in r.stderr
    assert "unknown command '/frobnicate'; /help lists the commands" in r.stderr
    assert "[chat] system prompt set" in r.stderr
    assert re.search(r"\[stats\] 1 messages, context 0/\d+ tokens", r.stderr), r.stderr


def test_multiline_input():
    r = chat("Write the word\nhello\n\nSay yes.\n", "-mli")
    assert len(turns(r.stderr)) == 2
    r1 = chat("Write the word\\\nhello\n")  # '\' continues a line without -mli
    r2 = chat("Write the word\nhello\n\n", "-mli")
    assert r1.stdout == r2.stdout and len(turns(r1.stderr)) == 1


SESSION_Q = ["What is the capital of France?", "And of Germany?", "And of Italy?"]


def test_session_round_trip_prefills_nothing(tmp_path):
    whole = replies(chat("\n".join(SESSION_Q) + "\n"), 3)
    f = str(tmp_path / "s.json")
    first = chat("\n".join(SESSION_Q[:2]) + "\n", "--session", f)
    assert "does not exist yet" in first.stderr
    assert replies(first, 2) == whole[:2]
    assert os.path.isfile(f) and os.path.isfile(f + ".kv")
    second = chat(SESSION_Q[2] + "\n/stats\n", "--session", f)
    assert "[session] resumed 4 messages, 0 tokens prefilled" in second.stderr, second.stderr
    # The resumed cache is bit-identical: the third reply equals the one of a single run.
    assert replies(second, 1) == whole[2:]
    assert turns(second.stderr)[0][1] == "incremental"
    assert "[stats] 6 messages" in second.stderr


def test_a_quantized_cache_session_round_trips_and_records_its_type(tmp_path):
    whole = replies(chat("\n".join(SESSION_Q) + "\n", "--kv-type", "q8_0"), 3)
    f = str(tmp_path / "s.json")
    chat("\n".join(SESSION_Q[:2]) + "\n", "--session", f, "--kv-type", "q8_0")
    assert json.load(open(f))["kv_type"] == "q8_0"
    kv = open(f + ".kv", "rb").read()
    assert struct.unpack("<I", kv[12:16])[0] == 8  # GGML's Q8_0
    second = chat(SESSION_Q[2] + "\n", "--session", f, "--kv-type", "q8_0")
    assert "[session] resumed 4 messages, 0 tokens prefilled" in second.stderr, second.stderr
    assert replies(second, 1) == whole[2:]  # the cache rows came back bit for bit
    # Another cache type cannot take the rows: the history is rendered again, and says why.
    r = chat("/stats\n", "--session", f)
    assert "holds a q8_0 cache, this context uses f16 (--kv-type q8_0)" in r.stderr, r.stderr
    assert "re-rendering the JSON history" in r.stderr


def fnv1a64(b):
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def test_session_mismatch_or_corruption_falls_back_to_the_json(tmp_path):
    f = str(tmp_path / "s.json")
    chat(SESSION_Q[0] + "\n", "--session", f)
    kv = open(f + ".kv", "rb").read()
    assert kv[:8] == b"MINFERKV"
    cases = {}
    bad = bytearray(kv)
    bad[len(bad) // 2] ^= 0x40
    cases["fails its checksum (corrupt)"] = bytes(bad)
    cases["is truncated"] = kv[:40]
    cases["bytes but its header describes"] = kv[:-100]
    other = bytearray(kv[:-8])  # another model: a different hash, with a valid checksum
    other[24:32] = struct.pack("<Q", struct.unpack("<Q", other[24:32])[0] ^ 1)
    cases["was saved with another model"] = bytes(other) + struct.pack("<Q", fnv1a64(other))
    for why, data in cases.items():
        open(f + ".kv", "wb").write(data)
        r = chat("/stats\n", "--session", f)
        assert why in r.stderr and "re-rendering the JSON history" in r.stderr, (why, r.stderr)
        m = re.search(r"\[session\] resumed 2 messages, (\d+) tokens prefilled", r.stderr)
        assert m and int(m.group(1)) > 0, r.stderr
    # A different KV type is a mismatch too.
    open(f + ".kv", "wb").write(kv)
    r = chat("/stats\n", "--session", f, "--kv-type", "f32")
    assert "holds a f16 cache, this context uses f32" in r.stderr, r.stderr
    # The history must match the cache.
    r = chat("/stats\n", "--session", f)
    assert "resumed 2 messages, 0 tokens prefilled" in r.stderr
    j = open(f).read().replace("capital of France", "capital of Spain")
    open(f, "w").write(j)
    r = chat("/stats\n", "--session", f)
    assert "holds another conversation" in r.stderr and "re-rendering the JSON history" in r.stderr, r.stderr


def test_save_and_load_commands(tmp_path):
    f = str(tmp_path / "saved.json")
    r = chat(f"{SESSION_Q[0]}\n/save {f}\n/clear\n/load {f}\n{SESSION_Q[1]}\n")
    a, b = replies(r, 2)
    assert "[session] saved 2 messages" in r.stderr
    assert "[session] resumed 2 messages, 0 tokens prefilled" in r.stderr
    whole = replies(chat("\n".join(SESSION_Q[:2]) + "\n"), 2)
    assert [a, b] == whole


def test_context_overflow_drops_the_oldest_turns_in_place():
    qs = ["What is the capital of France?", "Tell me about Paris.", "What is the capital of Germany?",
          "Tell me about Berlin.", "What is the capital of Spain?", "Tell me about Madrid."]
    r = chat("\n".join(qs) + "\n", "-c", "192", n="32")
    assert len(replies(r, len(qs))) == len(qs)
    t = turns(r.stderr)
    assert len(t) == len(qs)
    notices = re.findall(r"\[context\] dropped the (\d+) oldest messages \((\d+) tokens\) to fit the context of 192; "
                         r"their cache rows were removed in place and the rest shifted", r.stderr)
    assert notices, r.stderr
    # Every turn after the first, overflowing or not, prefilled only its new message.
    assert all(kind == "incremental" and n < 30 for n, kind, _ in t[1:]), r.stderr
    for m in re.finditer(r"context (\d+)/192", r.stderr):
        assert int(m.group(1)) <= 192


def test_a_message_larger_than_the_context_is_refused():
    long_msg = " ".join(["word"] * 400)
    r = chat(f"{long_msg}\nHello!\n", "-c", "128", n="16")
    assert "the message is too long" in r.stderr and "the context holds 128" in r.stderr, r.stderr
    assert len(replies(r, 1)) == 1  # the next message still gets its reply
    assert "[stats]" not in r.stderr


def test_gemma3_chat_past_its_sliding_window_ring():
    # -b 16: Gemma 3's local layers cache a ring of 512 + 16 rows. After two 300-token replies the
    # ring has overwritten the first ~100 positions, so /regen cannot keep the prompt of turn 2
    # (its window is gone): it re-reads the conversation, and every reply equals a chat whose
    # caches hold everything (--swa-full).
    assert os.path.isfile(GEMMA3), f"MINFER_GEMMA3={GEMMA3!r} is missing (scripts/setup.sh fetches it)"
    stdin = "Write a long poem about the sea.\nNow one about rivers.\n/regen\nThanks!\n"
    out = {}
    for extra in ([], ["--swa-full"]):
        r = subprocess.run([MINFER, "--cnv", GEMMA3, "--temp", "0", "-n", "300", "-t", "2", "-c", "2048", "-b", "16", *extra],
                           capture_output=True, text=True, input=stdin, timeout=300)
        assert r.returncode == 0 and "minfer:" not in r.stderr, r.stderr
        out[bool(extra)] = (r.stdout, turns(r.stderr))
    (ring_text, ring_turns), (full_text, full_turns) = out[False], out[True]
    assert ring_text == full_text and len(ring_turns) == 4
    assert [t[0] for t in full_turns][2] == full_turns[1][0]  # whole caches: /regen replays turn 2's prefill
    n1 = ring_turns[0][0] + 300 - 1 + 3  # turn 1 cached: prompt, reply (its last token not decoded), end of turn
    assert ring_turns[2][0] == n1 + ring_turns[1][0], ring_turns  # the ring: turn 1 and turn 2's prompt again
    assert ring_turns[3][0] == full_turns[3][0]  # after that, only the new message
