"""The command line as llama.cpp users type it (issue 22): llama.cpp's spellings of the one-shot
and chat flags, unknown flags refused by name with a hint, one exit code for usage errors,
llama.cpp's sampling defaults (so `--temp 0` is llama.cpp's greedy text), chat sessions that are
never lost, Ctrl-C during a long prefill, the load line and prefill progress on a terminal."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

import ptyterm

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")
ORACLE = os.environ.get("MINFER_LLAMA_ORACLE", "")
USAGE = 2  # the exit code of every usage error
PROMPT = "Give me three tips for staying healthy."


def run(*args, stdin=None, timeout=300):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    return subprocess.run([MINFER, *args], capture_output=True, text=True, input=stdin, timeout=timeout)


def Pty(*args):
    return ptyterm.Term([MINFER, *args])


def long_prompt(tmp_path, n_words=700):
    f = tmp_path / "long.txt"
    f.write_text("Summarize this list: " + " ".join(f"w{i}" for i in range(n_words)))
    return str(f)


# --- llama.cpp's spellings -------------------------------------------------------------------

def test_llama_cpp_flags_give_the_same_reply_as_ours(tmp_path):
    sysf = tmp_path / "sys.txt"
    sysf.write_text("You are a helpful assistant.")
    ours = run(MODEL, PROMPT, "--system", "You are a helpful assistant.", "--temp", "0", "-n", "16", "-c", "512",
               "-b", "64", "-t", "2", "--kv-type", "f16")
    theirs = run("-m", MODEL, "-p", PROMPT, "-sysf", str(sysf), "--temp", "0", "-n", "16", "-c", "512", "-ub", "64",
                 "-t", "2", "-ctk", "f16", "-ctv", "f16", "-ngl", "99", "-fa", "on", "--no-mmap", "--jinja", "-s", "7",
                 "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05", "--repeat-penalty", "1.0", "--repeat-last-n", "64")
    assert ours.returncode == 0 and theirs.returncode == 0, (ours.stderr, theirs.stderr)
    assert ours.stdout and ours.stdout == theirs.stdout
    # What does nothing on this build says so, once each.
    assert "warning: -ngl 99: " in theirs.stderr and "every layer runs on the CPU" in theirs.stderr, theirs.stderr
    assert "warning: --no-mmap" in theirs.stderr and "warning" not in ours.stderr
    # -sys TEXT, -m with the prompt as words, -fa alone (no value), --temperature.
    b = run("-m", MODEL, *PROMPT.split(), "-sys", "You are a helpful assistant.", "-fa", "--temperature", "0", "-n", "16",
            "-c", "512", "-b", "64", "-t", "2")
    assert b.returncode == 0 and b.stdout == ours.stdout, b.stderr


def test_prompt_from_a_file_and_the_model_from_minus_m(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text(PROMPT)
    a = run(MODEL, "-f", str(f), "--temp", "0", "-n", "8", "-t", "2")
    b = run("-m", MODEL, "--prompt", PROMPT, "--temp", "0", "-n", "8", "-t", "2")
    assert a.returncode == 0 and a.stdout and a.stdout == b.stdout, (a.stderr, b.stderr)


@pytest.mark.parametrize("args,message", [
    (["-ngll", "9"], "unknown option '-ngll'; did you mean '-ngl'?"),
    (["--tmep", "0"], "unknown option '--tmep'; did you mean '--temp'?"),
    (["--ctx", "64"], "unknown option '--ctx'; did you mean '--ctx-size'?"),
    (["-xyz"], "unknown option '-xyz'\n"),
    (["--lora", "a.gguf"], "'--lora' is not supported: LoRA adapters"),
    (["-ts", "1,1"], "'-ts' is not supported: per-tensor placement is not supported"),
    (["-n", "abc"], "abc"),
    (["--flash-attn=maybe"], "maybe"),
    (["--color=purple", "--cnv"], "purple"),
    (["--session", "x.json"], "--session is not an option of one-shot mode"),
    (["--cnv", "--no-template"], "--no-template is not an option of chat mode"),
    (["-p", "a", "-f", "b.txt"], "give the prompt once"),
])
def test_usage_errors_name_the_flag_and_exit_2(args, message):
    r = run(MODEL, *args) if "-p" in args else run(MODEL, "hi", *args)
    assert r.returncode == USAGE, (args, r.returncode, r.stderr)
    assert message in r.stderr, (args, r.stderr)
    assert r.stdout == ""


def test_values_that_look_like_flags_repeated_options_and_batch_spellings():
    a = run(MODEL, "-p", "-hello there", "-n", "4", "--temp", "0", "-t", "2")
    assert a.returncode == 0 and a.stdout, a.stderr
    # The last of a repeated option wins (llama.cpp's rule); -ub wins over -b (both: a common pair).
    r = run(MODEL, "hi", "-n", "40", "-n", "3", "--ignore-eos", "--temp", "0", "-t", "2")
    assert r.returncode == 0 and "[generate] 3 tokens" in r.stderr, r.stderr
    b = run(MODEL, "-b", "2048", "-ub", "64", "-p", "hi", "-n", "4", "--temp", "0", "-t", "2")
    c = run(MODEL, "-b", "64", "-p", "hi", "-n", "4", "--temp", "0", "-t", "2")
    assert b.returncode == 0 and b.stdout == c.stdout, b.stderr
    # A repeatable option takes one value each time: "hi" stays the prompt.
    d = run(MODEL, "--stop", "x", "--stop", "y", "hi", "-n", "4", "--temp", "0", "-t", "2")
    assert d.returncode == 0 and d.stdout, d.stderr


@pytest.mark.parametrize("args", [
    ["--top-p", "1.5"], ["--mirostat", "5"], ["--logit-bias", "abc"], ["--spec-draft-n", "0", "--spec-ngram"],
    ["--no-template", "--system", "x"], ["--no-template", "--chat-template", "chatml"],
])
def test_bad_values_are_usage_errors_found_before_loading(args):
    r = run(MODEL, "hi", "-n", "1", *args)
    assert r.returncode == USAGE, (args, r.stderr)
    assert "[load]" not in r.stderr, r.stderr


def test_usage_errors_in_other_commands():
    for cmd in (["bench", MODEL, "-ctk", "q8_0"], ["serve", "--models-max", "-1"], ["serve", "-m", MODEL, MODEL], ["info", MODEL, "--no-vocab"],
                ["tokenize", MODEL, "hi", "--show-pieces", "--json"], ["perplexity", MODEL, "-f", "x", "-c", "2"]):
        r = run(*cmd)
        assert r.returncode == USAGE, (cmd, r.returncode, r.stderr)


def test_a_folder_named_like_a_cached_model_does_not_hide_it(tmp_path):
    name = os.path.basename(MODEL)[: -len(".gguf")]
    (tmp_path / name).mkdir()
    env = dict(os.environ, MINFER_MODEL_DIR=os.path.dirname(MODEL))
    r = subprocess.run([MINFER, name, "hi", "-n", "2", "-t", "2"], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr


def test_kv_types_llama_cpp_names():
    r = run(MODEL, "hi", "-ctk", "q5_1", "-n", "1")
    assert r.returncode == USAGE and "--cache-type-k q5_1: not supported yet" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-ctk", "q8_0", "-n", "1")  # V would stay f16
    assert r.returncode == USAGE and "-ctk q8_0 and -ctv f16" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-ctk", "f16", "-ctv", "f32", "-n", "1")
    assert r.returncode == USAGE and "K and V caches of different types" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-ctk", "f32", "-n", "1")  # V would stay f16
    assert r.returncode == USAGE and "-ctk f32 and -ctv f16" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-ctk", "f32", "-ctv", "f32", "-n", "1", "--temp", "0", "-t", "2")
    assert r.returncode == 0 and "f32 KV" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-ctk", "q8_0", "-ctv", "q8_0", "-n", "1", "--temp", "0", "-t", "2")
    assert r.returncode == 0 and "q8_0 KV" in r.stderr, r.stderr


def test_every_command_refuses_unknown_flags_with_exit_2():
    for cmd in (["bench", MODEL], ["perplexity", MODEL, "-f", "x"], ["serve", MODEL], ["info", MODEL], ["tokenize", MODEL, "hi"],
                ["quantize", MODEL, "o.gguf", "Q8_0"], ["logits", MODEL, "--tokens", "1"], ["list"]):
        r = run(*cmd, "--no-such-flag")
        assert r.returncode == USAGE and "unknown option '--no-such-flag'" in r.stderr, (cmd, r.stderr)
    # llama-bench's spellings: -fa 1 (or on|off|auto), -ngl.
    r = run("bench", MODEL, "-ngl", "99", "-fa", "1", "-p", "8", "-n", "0", "-r", "1", "-t", "2")
    assert r.returncode == 0 and "every layer runs on the CPU" in r.stderr, r.stderr


def test_help_shows_one_usage_line():
    r = run(MODEL, "--help")
    assert r.returncode == 0
    usage = [l for l in r.stdout.splitlines() if l.startswith("Usage:")]
    assert usage == ["Usage: minfer MODEL [PROMPT...] [OPTIONS]     (chat: minfer MODEL --cnv [OPTIONS])"], usage
    for flag in ("-cnv", "-ngl", "-ctk", "-sys", "--jinja", "--chat-template-file", "--log-disable"):
        assert flag in r.stdout, flag
    bare = run()
    assert bare.returncode == USAGE and "usage: minfer MODEL" in bare.stderr


def test_a_model_that_is_no_file_says_what_it_is():
    r = run("/tmp", "hi")
    assert r.returncode == 1 and "model '/tmp' is a directory, not a GGUF file" in r.stderr, r.stderr
    r = run("/dev/null", "hi")
    assert r.returncode == 1 and "model '/dev/null' is a character device" in r.stderr, r.stderr


# --- llama.cpp's defaults ---------------------------------------------------------------------

def test_defaults_are_llama_cpps_and_the_seed_is_random_and_printed():
    a = run(MODEL, PROMPT, "-n", "4", "-v", "-t", "2")
    b = run(MODEL, PROMPT, "-n", "4", "-v", "-t", "2")
    seeds = []
    for r in (a, b):
        assert r.returncode == 0, r.stderr
        m = re.search(r"\[sampler\] seed (\d+): top-k 40 -> top-p 0.95 -> min-p 0.05 -> temp 0.8 -> draw\(seed \d+\)", r.stderr)
        assert m, r.stderr  # no penalties stage: repeat penalty 1.0 is off
        seeds.append(m.group(1))
    assert seeds[0] != seeds[1]
    # The printed seed replays the run.
    c = run(MODEL, PROMPT, "-n", "12", "-s", seeds[0], "-t", "2")
    d = run(MODEL, PROMPT, "-n", "12", "--seed", seeds[0], "-t", "2")
    assert c.returncode == 0 and c.stdout == d.stdout


def test_temp_0_is_llama_cpps_greedy_text(tmp_path):
    assert os.path.isfile(ORACLE), f"MINFER_LLAMA_ORACLE={ORACLE!r} is not built"
    ids_file = tmp_path / "ids.json"
    r = run(MODEL, PROMPT, "--temp", "0", "-n", "32", "-t", "2", "--ids-out", str(ids_file))
    assert r.returncode == 0, r.stderr
    ids = json.loads(ids_file.read_text())
    ref = subprocess.run([ORACLE, "greedy", MODEL, "--tokens", ",".join(map(str, ids["prompt"])), "-n", "32", "-t", "2"],
                         capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    greedy = json.loads(ref.stdout.strip().splitlines()[-1])["greedy"]
    n = len(ids["generated"])
    assert n >= 16 and ids["generated"] == greedy[:n], (ids["generated"], greedy)


# --- load, quiet, prefill progress, Ctrl-C -----------------------------------------------------

def test_load_line_and_quiet():
    r = run(MODEL, PROMPT, "--temp", "0", "-n", "4", "-t", "2")
    assert r.returncode == 0 and re.search(r"^\[load\] SmolLM2-135M-Instruct-Q4_1\.gguf \(\d+ MB\) in \d+\.\d\d s$", r.stderr, re.M), r.stderr
    for q in ("-q", "--log-disable"):
        quiet = run(MODEL, PROMPT, "--temp", "0", "-n", "4", "-t", "2", q)
        assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == r.stdout, quiet.stderr


def test_ctrl_c_during_a_long_prefill_one_shot(tmp_path):
    f = long_prompt(tmp_path)
    p = subprocess.Popen([MINFER, MODEL, "-f", f, "-b", "16", "-t", "2", "--temp", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # Wait until the prefill runs (the [model] line comes right before it).
    deadline = time.time() + 60
    err = ""
    while "[model]" not in err and time.time() < deadline:
        err += os.read(p.stderr.fileno(), 4096).decode()
    time.sleep(0.5)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    out, rest = p.communicate(timeout=60)
    err += rest
    assert p.returncode == 130, err
    assert time.time() - t0 < 5, "the prefill went on after Ctrl-C"
    m = re.search(r"\[prompt\] (\d+) of (\d+) tokens in [\d.]+ s \([\d.]+ tok/s\), interrupted", err)
    assert m and 0 < int(m.group(1)) < int(m.group(2)), err
    assert out == ""


def test_ctrl_c_during_generation_prints_the_speeds():
    p = subprocess.Popen([MINFER, MODEL, "Write a very long story about a dragon.", "-n", "2000", "--ignore-eos", "-t", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    n = 0
    while n < 200:  # some of the reply has streamed
        n += len(os.read(p.stdout.fileno(), 4096))
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert re.search(r"\[generate\] \d+ tokens in [\d.]+ s \([\d.]+ tok/s\), stop: interrupted", err), err


def test_prefill_progress_on_a_terminal(tmp_path):
    t = Pty(MODEL, "-f", long_prompt(tmp_path, 150), "-b", "16", "-t", "2", "--temp", "0", "-n", "2")
    t.read_until(rb"\[prefill\] \d+/\d+ tokens \(\d+%\)")
    t.read_until(rb"\[generate\]", timeout=300)  # sanitizer builds are slow
    assert t.wait() == 0


def test_ctrl_c_during_a_long_prefill_in_chat_undoes_the_turn(tmp_path):
    t = Pty(MODEL, "-cnv", "-f", long_prompt(tmp_path), "-b", "16", "-t", "2", "--temp", "0", "-n", "8", "--color", "off")
    t.read_until(rb"\[prefill\] \d+/\d+ tokens")  # the first message (-f) is being read
    t.send("\x03")
    t.read_until(rb"\[interrupted\] while reading the message: it was not sent")
    assert b"Berlin" not in t.out
    t.read_until(rb"> $")
    t.send("/stats\r")
    t.read_until(rb"\[stats\] 0 messages, context 0/")
    t.send("What is the capital of Germany?\r")
    t.read_until(rb"Berlin")
    t.read_until(rb"> $")
    t.send("/exit\r")
    assert t.wait() == 0


# --- chat: llama.cpp's mode flags, sessions never lost ----------------------------------------

def chat(stdin, *args):
    return run(MODEL, *args, "--temp", "0", "-n", "24", "-t", "2", "--stop", "\n", stdin=stdin)


def test_chat_mode_flags():
    want = chat("What is the capital of Germany?\n", "--cnv")
    assert want.returncode == 0 and "Berlin" in want.stdout, want.stderr
    for flag in ("-cnv", "-i", "-if", "--conversation", "--interactive-first"):
        r = chat("What is the capital of Germany?\n", flag)
        assert r.returncode == 0 and r.stdout == want.stdout, (flag, r.stderr)
    # -p is the first message, then the chat goes on with stdin.
    r = chat("And of Spain?\n", "-cnv", "-p", "What is the capital of Germany?")
    assert r.returncode == 0 and r.stdout.startswith(want.stdout) and len(r.stdout.splitlines()) == 2, r.stdout


@pytest.mark.parametrize("content", ['{"messages": [', "not json at all", '{"a": 1}', "[1, 2, 3]",
                                     '{"format": "minfer-chat-session", "messages": [{"role": 1}]}'])
def test_an_unreadable_session_file_is_refused_and_never_overwritten(tmp_path, content):
    f = tmp_path / "config.json"
    f.write_text(content)
    r = chat("Hello\n", "--cnv", "--session", str(f))
    assert r.returncode == 1 and "[session]" in r.stderr and "not using it (it would be overwritten)" in r.stderr, r.stderr
    assert r.stdout == "" and f.read_text() == content
    assert sorted(os.listdir(tmp_path)) == ["config.json"]


def test_a_smaller_context_keeps_every_message_in_the_session(tmp_path):
    f = str(tmp_path / "s.json")
    qs = ["What is the capital of Germany?", "Name three primary colors.", "What is photosynthesis?"]
    first = chat("\n".join(qs) + "\n", "--cnv", "--session", f)
    assert first.returncode == 0, first.stderr
    saved = json.load(open(f))
    assert len(saved["messages"]) == 6 and saved["n_archived"] == 0
    r = chat("Thanks!\n/stats\n", "--cnv", "--session", f, "-c", "96")
    assert r.returncode == 0, r.stderr
    assert re.search(r"\[context\] the \d+ oldest messages do not fit the context of 96", r.stderr), r.stderr
    after = json.load(open(f))
    assert after["messages"][:6] == saved["messages"]  # nothing lost
    assert len(after["messages"]) == 8 and after["messages"][6]["content"] == "Thanks!"
    assert 0 < after["n_archived"] <= 6
    # Back with a large context: the archived messages stay out of the context (the replies after
    # them were written without them), and in the file.
    back = chat("/stats\n", "--cnv", "--session", f)
    assert "[session] resumed 8 messages" in back.stderr, back.stderr
    assert re.search(r"\[stats\] \d+ messages \(\d+ older ones out of the context", back.stderr), back.stderr
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


def test_a_failed_save_is_a_nonzero_exit(tmp_path):
    ok = chat("Hi\n/save " + str(tmp_path / "ok.json") + "\n", "--cnv")
    assert ok.returncode == 0 and os.path.isfile(tmp_path / "ok.json") and os.path.isfile(tmp_path / "ok.json.kv")
    r = chat("Hi\n/save " + str(tmp_path / "no-such-dir" / "x.json") + "\n", "--cnv")
    assert r.returncode == 1 and "cannot write" in r.stderr and "1 save failed" in r.stderr, r.stderr
    assert len(r.stdout.splitlines()) == 1  # the reply itself was fine


def test_a_session_that_cannot_be_resumed_here_is_left_alone(tmp_path):
    f = tmp_path / "s.json"
    system = "You are a helpful assistant who answers in one short sentence. " * 12  # ~150 tokens
    first = chat("What is the capital of Germany?\n", "--cnv", "--session", str(f), "--system", system)
    assert first.returncode == 0, first.stderr
    before = f.read_bytes(), (tmp_path / "s.json.kv").read_bytes()
    r = chat("Hello\n", "--cnv", "--session", str(f), "-c", "64")  # the system prompt alone does not fit
    assert r.returncode == 1 and "cannot resume" in r.stderr and r.stdout == "", r.stderr
    assert (f.read_bytes(), (tmp_path / "s.json.kv").read_bytes()) == before
    # /load of it in a running chat keeps the conversation going.
    r = chat("What is the capital of Germany?\n/load " + str(f) + "\n/stats\n", "--cnv", "-c", "64")
    assert r.returncode == 0 and "the conversation before /load is back" in r.stderr, r.stderr
    assert "[stats] 2 messages" in r.stderr, r.stderr


def test_session_files_keep_their_permissions_and_links(tmp_path):
    real = tmp_path / "real.json"
    chat("Hi\n", "--cnv", "--session", str(real))
    os.chmod(real, 0o600)
    link = tmp_path / "link.json"
    os.symlink(real, link)
    os.symlink(str(real) + ".kv", str(link) + ".kv")
    r = chat("Hello again\n", "--cnv", "--session", str(link))
    assert r.returncode == 0, r.stderr
    assert os.path.islink(link) and os.path.islink(str(link) + ".kv")
    assert len(json.load(open(real))["messages"]) == 4
    assert os.stat(real).st_mode & 0o777 == 0o600


GEMMA3 = os.environ.get("MINFER_GEMMA3", "")


def test_ctrl_c_in_a_sliding_window_chat_keeps_cache_and_history_in_step(tmp_path):
    """Gemma 3's sliding-window ring cannot roll a cut prefill back: the cache starts over, and
    the next turns still work (they used to fail with 'cannot remove positions')."""
    assert os.path.isfile(GEMMA3), f"MINFER_GEMMA3={GEMMA3!r} is missing (scripts/setup.sh fetches it)"
    long_msg = "Summarize this list: " + " ".join(f"w{i}" for i in range(700))
    p = subprocess.Popen([MINFER, GEMMA3, "--cnv", "-b", "8", "-t", "2", "--temp", "0", "-n", "4", "--stop", "\n"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdin.write("hi\n" + long_msg + "\n")
    p.stdin.flush()
    err = ""
    deadline = time.time() + 120
    while err.count("[turn]") < 1 and time.time() < deadline:
        err += os.read(p.stderr.fileno(), 4096).decode()
    time.sleep(2.0)  # well into the long message's prefill (-b 8)
    p.send_signal(signal.SIGINT)
    out, rest = p.communicate("hello\n", timeout=180)
    err += rest
    assert p.returncode == 0, err
    assert "[interrupted] while reading the message: it was not sent" in err, err
    assert err.count("[turn]") == 2 and "minfer:" not in err, err
