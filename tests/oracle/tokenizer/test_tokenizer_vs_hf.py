"""minfer's tokenizer against two independent implementations on the same vocabularies:
Hugging Face `tokenizers` (built from the GGUF vocabulary, see hf_from_gguf.py) and llama.cpp
(`llama-oracle tokenize-lines`, special-token parsing on). For Qwen2's vocabulary, SmolLM2's
(byte-level BPE) and Gemma 3's (SentencePiece, 262144 pieces, from the real gemma3-270m model):

- >= 1000 varied strings (strings.py): ids equal to HF's and to llama.cpp's (Gemma 3: also with
  special parsing off, against llama.cpp);
- the same strings round-trip: detokenize(tokenize(s)) == s;
- real text (strings.REAL_TEXT: prose, code with indentation and tabs, whitespace runs, numbers,
  CJK/emoji/accents/RTL, leading spaces, a chat in Gemma's turn format), as documents, as one
  text and line by line, special parsing on and off, with and without BOS: ids equal to
  llama.cpp's, and to HF's with special parsing on;
- every vocabulary entry whose bytes are valid UTF-8: its text tokenizes as HF and llama.cpp
  tokenize it, and decodes back to those bytes.

HF for Gemma 3 is HF's BPE model over the GGUF pieces with merges derived from their scores
(hf_from_gguf.py says how); Gemma's own tokenizer.json is not used (not in the GGUF, and not
downloaded by the tests). The Gemma tests are the ones whose name has "gemma3" (a separate ctest
entry, oracle.tokenizer_gemma3).

Every oracle must be present: a missing one fails the test (no skips).
    MINFER_BIN=build/bin/minfer LLAMA_ORACLE=build/tests/llama-oracle \
    MINFER_VOCAB_DIR=.deps/llama.cpp/models MINFER_SMOLLM2=... MINFER_GEMMA3=... pytest -s test_tokenizer_vs_hf.py
"""
import json
import os
import re
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from hf_from_gguf import build_hf, load_gguf_vocab  # noqa: E402
from strings import REAL_TEXT, real_text  # noqa: E402
from strings import test_strings as make_strings  # noqa: E402


def env_path(name):
    p = os.environ.get(name, "")
    assert p and os.path.exists(p), f"{name}='{p}' does not exist (run scripts/setup.sh and build)"
    return p


def vocab_path(which):
    if which == "qwen2":
        return os.path.join(env_path("MINFER_VOCAB_DIR"), "ggml-vocab-qwen2.gguf")
    if which == "gemma3":
        return env_path("MINFER_GEMMA3")
    return env_path("MINFER_SMOLLM2")


def run(cmd, lines):
    r = subprocess.run(cmd, input="".join(l + "\n" for l in lines).encode(), capture_output=True, timeout=900)
    assert r.returncode == 0, f"{cmd[0]} failed: {r.stderr.decode(errors='replace')}"
    out = r.stdout.decode().split("\n")[:-1]  # not splitlines(): U+2028 etc. are not line ends here
    assert len(out) == len(lines), f"{cmd}: {len(out)} output lines for {len(lines)} inputs"
    return out


def minfer_tokenize(model, texts, special=True, bos=False):
    lines = [json.dumps(t, ensure_ascii=False) for t in texts]
    flags = ([] if special else ["--no-special"]) + (["--bos"] if bos else [])
    return [json.loads(l) for l in run([env_path("MINFER_BIN"), "tokenize", model, "--jsonl"] + flags, lines)]


def minfer_detokenize(model, id_lists):
    lines = [json.dumps(ids) for ids in id_lists]
    return [json.loads(l) for l in run([env_path("MINFER_BIN"), "detokenize", model, "--jsonl"], lines)]


def llama_tokenize(model, texts, special=True, bos=False):
    lines = [t.encode("utf-8").hex() for t in texts]
    flags = (["--special"] if special else []) + (["--bos"] if bos else [])
    out = run([env_path("LLAMA_ORACLE"), "tokenize-lines", model] + flags, lines)
    return [json.loads(l) for l in out]


def llama_tokenize_batched(model, v, texts, special=True, batch=256):
    """llama_tokenize() for many short texts on a vocabulary with thousands of special tokens.
    llama.cpp looks for every special token in every text (Gemma 3: 6414 of them, ~0.1 ms per
    call, 30 s for the vocabulary), so the texts go in batches joined by "\n", a user-defined
    token (matched with special parsing on and off). That gives the same ids as one call per
    text when no text holds a "\n" and every special token holding one is a run of them (so
    no match can span a separator) and the vocabulary adds no space prefix after special
    tokens; those conditions are checked, texts with a "\n" go one per call, each batch must
    come back with exactly its separators, and the first batch is compared with per-text calls."""
    sep = [i for i, (t, ty) in enumerate(zip(v["tokens"], v["types"])) if t == "\n" and ty == 4]
    assert len(sep) == 1 and not v["add_space_prefix"], "no single user-defined \\n token to batch with"
    assert all(set(t) == {"\n"} for t, ty in zip(v["tokens"], v["types"]) if ty in (3, 4) and "\n" in t)
    alone = [i for i, t in enumerate(texts) if "\n" in t or not t]
    rest = [i for i, t in enumerate(texts) if "\n" not in t and t]
    groups = [rest[k:k + batch] for k in range(0, len(rest), batch)]
    joined = llama_tokenize(model, ["\n".join(texts[i] for i in g) for g in groups], special)
    out = [None] * len(texts)
    for g, ids in zip(groups, joined):
        parts, cur = [], []
        for x in ids:
            if x == sep[0]:
                parts.append(cur)
                cur = []
            else:
                cur.append(x)
        parts.append(cur)
        assert len(parts) == len(g), f"a batch of {len(g)} texts came back as {len(parts)}"
        for i, p in zip(g, parts):
            out[i] = p
    for i, ids in zip(alone, llama_tokenize(model, [texts[i] for i in alone], special)):
        out[i] = ids
    if groups:
        assert llama_tokenize(model, [texts[i] for i in groups[0]], special) == [out[i] for i in groups[0]]
    return out


def hf_tokenize(tok, texts):
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


_cache = {}


def setup(which):
    if which not in _cache:
        path = vocab_path(which)
        t0 = time.time()
        v = load_gguf_vocab(path)
        special = [t for t, ty in zip(v["tokens"], v["types"]) if ty in (3, 4)]
        # every control token (of Gemma's 6242 "<unusedN>" placeholders, every 500th) and a
        # sample of user-defined ones
        control = [t for t, ty in zip(v["tokens"], v["types"]) if ty == 3]
        is_unused = [bool(re.fullmatch(r"<unused[0-9]+>", t)) for t in control]
        picked = [t for t, u in zip(control, is_unused) if not u]
        picked += [t for t, u in zip(control, is_unused) if u][::500] + special[::37]
        hf = build_hf(v)
        _cache[which] = (path, v, hf, make_strings(seed=1234, special=picked))
        print(f"[ {which} ] vocabulary read and HF tokenizer built in {time.time() - t0:.1f} s")
    return _cache[which]


# Where llama.cpp differs from Hugging Face and we follow Hugging Face (docs/tokenizer.md):
# llama.cpp treats any token named "</s>" as a control token, even the plain-text one of
# Qwen2's vocabulary (also Qwen 3.5's), so text containing "</s>" tokenizes differently there.
PLAIN_EOS_TEXT_VOCABS = {"qwen2", "qwen35"}


def report(name, ours, other, texts, vocab=""):
    """Prints mismatches; returns (agreeing, known deviations) counts."""
    bad = [i for i in range(len(texts)) if ours[i] != other[i]]
    known = [i for i in bad if name == "llama" and vocab in PLAIN_EOS_TEXT_VOCABS and "</s>" in texts[i]]
    for i in known[:3]:
        print(f"  known deviation from llama.cpp on {texts[i]!r}: ours {ours[i]} llama.cpp {other[i]}")
    for i in [i for i in bad if i not in known][:10]:
        print(f"  MISMATCH vs {name} on {texts[i]!r}:\n    ours  {ours[i]}\n    {name:5} {other[i]}")
    return len(texts) - len(bad), len(known)


VOCABS = ["qwen2", "smollm2", "gemma3"]


@pytest.mark.parametrize("which", VOCABS)
def test_strings_vs_hf_and_llama(which):
    path, _, hf, texts = setup(which)
    assert len(texts) >= 1000
    ours = minfer_tokenize(path, texts)
    n_hf, _ = report("hf", ours, hf_tokenize(hf, texts), texts)
    n_llama, n_known = report("llama", ours, llama_tokenize(path, texts), texts, which)
    n_tokens = sum(len(x) for x in ours)
    print(f"[ {which} ] {len(texts)} strings ({n_tokens} tokens): HF agrees {n_hf}/{len(texts)}, "
          f"llama.cpp agrees {n_llama}/{len(texts)} (+{n_known} known deviations)")
    assert n_hf == len(texts)
    assert n_llama + n_known == len(texts)
    if which == "gemma3":  # the other two are in test_all_vocabs_vs_llama's special-off pass
        ours = minfer_tokenize(path, texts, special=False)
        n_off, _ = report("llama", ours, llama_tokenize(path, texts, special=False), texts, which)
        print(f"[ {which} ] the same strings, special parsing off: llama.cpp agrees {n_off}/{len(texts)}")
        assert n_off == len(texts)


@pytest.mark.parametrize("which", VOCABS)
def test_real_text(which):
    """strings.REAL_TEXT (documents, the whole, each line) against llama.cpp with special
    parsing on and off, with and without the model's BOS/EOS, and against HF with special
    parsing on. llama.cpp's --bos (add_special) adds BOS/EOS only where the vocabulary asks for
    them; minfer's --bos always adds BOS, and a prompt gets it when add_bos() (tokenizer-info's
    add_bos, equal to llama.cpp's in the special-ids tests) says so: that is what is compared."""
    path, _, hf, _ = setup(which)
    texts = real_text()
    n_bytes = sum(len(t.encode()) for t in REAL_TEXT)
    info = json.loads(subprocess.run([env_path("TOKENIZER_INFO"), path], capture_output=True, check=True).stdout)
    counts = []
    for special in (True, False):
        for bos in (False, True):
            ours = minfer_tokenize(path, texts, special, bos and info["add_bos"])
            if bos and info["add_eos"]:
                ours = [x + [info["eos"]] for x in ours]
            n, n_known = report("llama", ours, llama_tokenize(path, texts, special, bos), texts, which)
            assert n + n_known == len(texts), f"special={special} bos={bos}"
            counts.append(f"{n}/{len(texts)}" + (f" (+{n_known} known)" if n_known else ""))
            if special and not bos:
                n_hf, _ = report("hf", ours, hf_tokenize(hf, texts), texts)
                assert n_hf == len(texts)
                n_tokens = sum(len(x) for x in ours)
    back = minfer_detokenize(path, minfer_tokenize(path, texts))
    n_back = sum(1 for a, b in zip(texts, back) if a == b)
    print(f"[ {which} ] real text ({n_bytes} bytes), {len(texts)} texts ({n_tokens} tokens): HF agrees "
          f"{n_hf}/{len(texts)}; llama.cpp agrees: special on {counts[0]}, +model's BOS/EOS (add_bos "
          f"{info['add_bos']}) {counts[1]}, special off {counts[2]}, +BOS/EOS {counts[3]}; round trip "
          f"{n_back}/{len(texts)}")
    assert n_back == len(texts)


@pytest.mark.parametrize("which", VOCABS)
def test_round_trip(which):
    path, _, _, texts = setup(which)
    back = minfer_detokenize(path, minfer_tokenize(path, texts))
    n_ok = sum(1 for a, b in zip(texts, back) if a == b)
    for a, b in zip(texts, back):
        if a != b:
            print(f"  ROUND TRIP {a!r} -> {b!r}")
            break
    print(f"[ {which} ] round trip detokenize(tokenize(s)) == s: {n_ok}/{len(texts)}")
    assert n_ok == len(texts)


def test_invalid_utf8_gemma3(tmp_path):
    """SentencePiece splits text into characters by their lead byte, a stray byte being one, and
    spells any character without a piece in <0xNN> tokens: for bytes that are not UTF-8, ids
    equal llama.cpp's too (unlike byte-level BPE, docs/tokenizer.md). Through the plain CLI,
    which carries any bytes."""
    path = vocab_path("gemma3")
    cases = [b"\xff", b"a\x80b", b"\xe4\xb8", b"\xe4\xb8\xad\xe4", b"\xf0\x9f\x98", b" \xc3", b"\xc3 x",
             b"<start_of_turn>\xfe", b"\xc3\xa9\xa9", b"\xed\xa0\x80", b"caf\xe9 cr\xe8me", b"\x80\x80  \xbf\n\xf8"]
    n_ok = 0
    for special in (True, False):
        theirs = run([env_path("LLAMA_ORACLE"), "tokenize-lines", path] + (["--special"] if special else []),
                     [c.hex() for c in cases])
        for k, (c, t) in enumerate(zip(cases, theirs)):
            f = tmp_path / f"case{k}.bin"
            f.write_bytes(c)
            cmd = [env_path("MINFER_BIN"), "tokenize", path, "-f", str(f), "--json"] + ([] if special else ["--no-special"])
            r = subprocess.run(cmd, capture_output=True, timeout=120)
            assert r.returncode == 0, r.stderr.decode(errors="replace")
            ours = json.loads(r.stdout)
            if ours == json.loads(t):
                n_ok += 1
            else:
                print(f"  MISMATCH on {c!r} (special {special}): ours {ours} llama.cpp {t}")
    print(f"[ gemma3 ] invalid UTF-8: llama.cpp agrees {n_ok}/{2 * len(cases)}")
    assert n_ok == 2 * len(cases)


def token_bytes(text, ttype, model="gpt2"):
    """A token's bytes, computed here independently: GPT-2 byte-level text -> bytes, or for
    SentencePiece "\u2581" -> space and "<0xNN>" -> byte NN."""
    if ttype in (3, 4):
        return text.encode("utf-8")
    if model == "llama":
        return bytes([int(text[3:5], 16)]) if ttype == 6 else text.replace("\u2581", " ").encode("utf-8")
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    inv = {chr(c): b for b, c in zip(bs, cs)}
    return bytes(inv[ch] for ch in text)


@pytest.mark.parametrize("which", VOCABS)
def test_every_token(which):
    path, v, hf, _ = setup(which)
    ids, texts = [], []
    for i, (t, ty) in enumerate(zip(v["tokens"], v["types"])):
        try:
            texts.append(token_bytes(t, ty, v["model"]).decode("utf-8"))
            ids.append(i)
        except UnicodeDecodeError:
            pass  # a partial UTF-8 sequence: covered by the C++ piece test
    ours = minfer_tokenize(path, texts)
    n_hf, _ = report("hf", ours, hf_tokenize(hf, texts), texts)
    if which == "gemma3":
        theirs = llama_tokenize_batched(path, v, texts)
    else:
        theirs = llama_tokenize(path, texts)
    n_llama, n_known = report("llama", ours, theirs, texts, which)
    n_single = sum(1 for i, o in zip(ids, ours) if o == [i])
    back = minfer_detokenize(path, [[i] for i in ids])
    n_back = sum(1 for t, b in zip(texts, back) if t == b)
    print(f"[ {which} ] {len(ids)}/{len(v['tokens'])} tokens with UTF-8 text: HF agrees {n_hf}, "
          f"llama.cpp agrees {n_llama} (+{n_known} known deviations), text -> [same id] {n_single}, "
          f"id -> same text {n_back}")
    assert n_hf == len(texts)
    assert n_llama + n_known == len(texts)
    assert n_back == len(texts)


def test_cli_forms(tmp_path):
    """The tokenize/detokenize command-line contracts, checked against llama.cpp's ids."""
    minfer, model = env_path("MINFER_BIN"), vocab_path("smollm2")
    text = "Hello world<|im_end|> 12\n\u00e9\u4e2d"

    def sh(*args, stdin=None):
        r = subprocess.run([minfer, *args], input=stdin, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return r.stdout

    def oracle(special):
        cmd = [env_path("LLAMA_ORACLE"), "tokenize", model, "-"] + (["--special"] if special else [])
        r = subprocess.run(cmd, input=text.encode(), capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return json.loads(r.stdout)["tokens"]

    ids = oracle(True)
    assert sh("tokenize", model, text) == (" ".join(map(str, ids)) + "\n").encode()
    assert sh("tokenize", model, text, "--json") == (json.dumps(ids, separators=(",", ":")) + "\n").encode()
    f = tmp_path / "t.txt"
    f.write_bytes(text.encode())
    assert sh("tokenize", model, "-f", str(f), "--json") == sh("tokenize", model, text, "--json")
    assert sh("tokenize", model, "--json", stdin=text.encode()) == sh("tokenize", model, text, "--json")
    assert json.loads(sh("tokenize", model, text, "--json", "--no-special")) == oracle(False)
    assert json.loads(sh("tokenize", model, text, "--json", "--bos"))[0] == 1  # SmolLM2's BOS
    assert sh("detokenize", model, ",".join(map(str, ids))) == text.encode()
    assert sh("detokenize", model, json.dumps(ids)) == text.encode()
    # a lone byte token decodes to that byte, not to U+FFFD
    lone = json.loads(sh("tokenize", model, "\U00020000", "--json"))
    assert len(lone) > 1 and sh("detokenize", model, str(lone[0])) == "\U00020000".encode()[:1]
    r = subprocess.run([minfer, "tokenize", str(tmp_path / "missing.gguf"), "x"], capture_output=True)
    assert r.returncode != 0 and b"missing.gguf" in r.stderr
    print("[ cli ] tokenize TEXT/-f/stdin/--json/--no-special/--bos and detokenize match llama.cpp's ids")


ALL_VOCABS = ["qwen2", "qwen35", "llama-bpe", "gpt-2", "starcoder", "deepseek-llm", "deepseek-coder", "falcon",
              "mpt", "refact", "command-r", "llama-spm", "phi-3"]


def check_special_ids(name, path):
    """BOS/EOS ids, add_bos/add_eos and the end-of-generation set of one vocabulary against
    llama.cpp's; returns the line it prints."""
    ours = json.loads(subprocess.run([env_path("TOKENIZER_INFO"), path], capture_output=True, check=True).stdout)
    theirs = json.loads(subprocess.run([env_path("LLAMA_ORACLE"), "vocab-info", path], capture_output=True,
                                       check=True).stdout)
    # known deviation: a normal-typed "</s>" is not an end-of-generation token for us
    known = []
    if set(theirs["eog"]) - set(ours["eog"]):
        v = load_gguf_vocab(path)
        known = [i for i in theirs["eog"] if v["tokens"][i] == "</s>" and v["types"][i] == 1]
    theirs_eog = [i for i in theirs["eog"] if i not in known]
    for key in ("n_vocab", "bos", "eos", "add_bos", "add_eos", "fim"):
        assert ours[key] == theirs[key], f"{name}: {key} {ours[key]} vs llama.cpp {theirs[key]}"
    assert ours["eog"] == theirs_eog, f"{name}: eog {ours['eog']} vs llama.cpp {theirs['eog']}"
    assert ours["eot"] in ours["eog"] + [-1] and (ours["eot"] == -1) == (theirs["eot"] == -1), name
    print(f"[ ids ] {name:15} bos {ours['bos']} eos {ours['eos']} eot {ours['eot']} (llama.cpp {theirs['eot']}) "
          f"eog {ours['eog']}" + (f" (llama.cpp also {known}: '</s>')" if known else ""))
    return ours


def test_special_ids_and_eog():
    """BOS/EOS ids, add_bos/add_eos and the end-of-generation set equal llama.cpp's for every
    vocabulary. eot (when the file has no eot key, a pick among end-marker names that llama.cpp
    makes by hash-map order) only has to be in both EOG sets."""
    paths = [(v, os.path.join(env_path("MINFER_VOCAB_DIR"), f"ggml-vocab-{v}.gguf")) for v in ALL_VOCABS]
    paths.append(("smollm2", vocab_path("smollm2")))
    for name, path in paths:
        check_special_ids(name, path)
    print(f"[ ids ] special ids and EOG sets agree with llama.cpp for {len(paths)}/{len(paths)} vocabularies")


def test_special_ids_gemma3():
    """The same for Gemma 3, whose eot is <end_of_turn> and whose EOG set also holds <eos> and
    the user-defined "</s>" (llama.cpp's name rule); add_bos is true."""
    ours = check_special_ids("gemma3", vocab_path("gemma3"))
    assert ours["add_bos"] and ours["bos"] == 2 and ours["eot"] == 106


def test_all_vocabs_vs_llama():
    """The generated strings (with the common special-token texts mixed in) on every vocabulary
    of the llama.cpp vectors, special parsing on and off: ids equal to llama.cpp's."""
    texts = make_strings(seed=99, special=["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>",
                                           "<|end|>", "<|eot_id|>", "<｜end▁of▁sentence｜>", "[PAD32011]"])
    total, total_known = 0, 0
    for v in ALL_VOCABS:
        path = os.path.join(env_path("MINFER_VOCAB_DIR"), f"ggml-vocab-{v}.gguf")
        counts = []
        for special in (True, False):
            ours = minfer_tokenize(path, texts, special)
            n, n_known = report("llama", ours, llama_tokenize(path, texts, special), texts, v)
            assert n + n_known == len(texts), f"{v} special={special}"
            counts.append(f"{n}/{len(texts)}" + (f" (+{n_known} known)" if n_known else ""))
            total += n
            total_known += n_known
        print(f"[ all ] {v:15} llama.cpp agrees: special on {counts[0]}, off {counts[1]}")
    print(f"[ all ] {total} of {total + total_known} tokenizations over {len(ALL_VOCABS)} vocabularies agree with "
          f"llama.cpp; the other {total_known} are the known '</s>' deviation")
