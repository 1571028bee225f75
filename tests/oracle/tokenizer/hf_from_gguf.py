"""Builds a Hugging Face `tokenizers` Tokenizer from a GGUF vocabulary and the published
pre-tokenizer/decoder configuration of the model family, so that the HF library is an
independent implementation of the same algorithm over the same data.

    from hf_from_gguf import load_gguf_vocab, build_hf
    v = load_gguf_vocab("ggml-vocab-qwen2.gguf")
    tok = build_hf(v)                      # family chosen from tokenizer.ggml.model / .pre
    tok.encode("Hello", add_special_tokens=False).ids

Byte-level BPE (`gpt2`): the BPE model with the file's merges and the family's pre-tokenizer.
SentencePiece (`llama`, e.g. Gemma 3): the GGUF carries pieces and scores but no merges, so the
merges are derived from the scores as transformers' SentencePieceExtractor does when it converts
a SentencePiece BPE model to tokenizer.json (every split of a piece into two pieces is a merge,
ranked by the whole piece's score), then HF's BPE model with byte fallback runs on the text with
spaces replaced by U+2581. Only add_space_prefix = false is built (Gemma's setting): with a
prefix, llama.cpp adds one after every special token, which HF's Metaspace/Prepend do not.
"""
import mmap
import struct

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

# Qwen2's tokenizer.json: Split(this regex, Isolated) then ByteLevel without its own regex.
# (Its NFC normalizer is left out: llama.cpp does not normalize, and neither do we.)
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


# GGUF metadata value types: fixed-size scalars (struct format), 8 = string, 9 = array.
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8",
          12: "<f8"}


def read_gguf_metadata(path):
    """The key/value section of a GGUF (v2/v3) file as {key: value}: strings as str, arrays as
    lists. Written here from the format (docs/formats.md, ggml's gguf.md) instead of using
    gguf-py's GGUFReader, which builds a numpy view per array element and takes 21 s on
    Qwen2's vocabulary and 29 s on Gemma 3's; this reads only the metadata, in about a second,
    and is just as independent of minfer's reader."""
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # only the metadata pages are read
    assert len(buf) >= 24 and buf[:4] == b"GGUF", f"{path}: not a GGUF file"
    version, _n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
    assert version in (2, 3), f"{path}: GGUF version {version}"
    pos = 24

    def u32():
        nonlocal pos
        pos += 4
        return struct.unpack_from("<I", buf, pos - 4)[0]

    def u64():
        nonlocal pos
        pos += 8
        return struct.unpack_from("<Q", buf, pos - 8)[0]

    def string():
        nonlocal pos
        n = u64()
        pos += n
        return buf[pos - n:pos].decode("utf-8")

    def value(ty):
        nonlocal pos
        if ty == 8:
            return string()
        if ty == 9:
            ety, n = u32(), u64()
            if ety in _NUMPY:
                a = np.frombuffer(buf, dtype=_NUMPY[ety], count=n, offset=pos)
                pos += a.nbytes
                return [bool(x) for x in a] if ety == 7 else a.tolist()
            return [value(ety) for _ in range(n)]
        fmt = _SCALAR[ty]
        pos += struct.calcsize(fmt)
        return struct.unpack_from(fmt, buf, pos - struct.calcsize(fmt))[0]

    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(u32())
    return kv


def load_gguf_vocab(path):
    kv = read_gguf_metadata(path)
    return {
        "model": kv.get("tokenizer.ggml.model"),
        "pre": kv.get("tokenizer.ggml.pre"),
        "tokens": kv.get("tokenizer.ggml.tokens"),
        "types": kv.get("tokenizer.ggml.token_type"),
        "scores": kv.get("tokenizer.ggml.scores"),
        "merges": kv.get("tokenizer.ggml.merges"),
        "add_space_prefix": kv.get("tokenizer.ggml.add_space_prefix", True),
    }


def pre_tokenizer_for(pre):
    if pre in ("qwen2", "deepseek-r1-qwen"):
        return pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    if pre in ("smollm", "starcoder"):
        # SmolLM2 / StarCoder tokenizer.json: Digits(individual_digits) then GPT-2's ByteLevel.
        return pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ])
    raise ValueError(f"no Hugging Face pre-tokenizer configuration for '{pre}'")


def spm_merges(tokens, scores, vocab):
    """transformers' SentencePieceExtractor.extract(): for every piece, each split into two
    pieces of the vocabulary is a merge (a piece's splits ordered by the two ids), then all
    merges ordered by the score of the piece they make, highest first (a stable sort)."""
    merges = []
    for piece, score in zip(tokens, scores):
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        local.sort()
        merges += [(score, left, right) for _, _, left, right in local]
    merges.sort(key=lambda m: -m[0])
    return [(left, right) for _, left, right in merges]


def build_hf(v):
    assert v["model"] in ("gpt2", "llama"), v["model"]
    vocab = {}
    for i, t in enumerate(v["tokens"]):
        vocab[t] = i  # a duplicated text maps to its last id, as in the GGUF readers
    if v["model"] == "llama":
        if v["add_space_prefix"]:
            raise ValueError("SentencePiece vocabulary with add_space_prefix: no equivalent HF configuration here")
        bpe = models.BPE(vocab=vocab, merges=spm_merges(v["tokens"], v["scores"], vocab), unk_token="<unk>",
                         fuse_unk=True, byte_fallback=True)
        tok = Tokenizer(bpe)
        tok.normalizer = normalizers.Replace(" ", "\u2581")
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    else:
        merges = [tuple(m.split(" ", 1)) for m in v["merges"]]
        bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
        tok = Tokenizer(bpe)
        tok.pre_tokenizer = pre_tokenizer_for(v["pre"])
        tok.decoder = decoders.ByteLevel()
    # Control (3) and user-defined (4) tokens are the added tokens of tokenizer.json.
    added = [AddedToken(t, special=(ty == 3), normalized=False)
             for t, ty in zip(v["tokens"], v["types"]) if ty in (3, 4) and t]
    tok.add_special_tokens([a for a in added if a.special])
    tok.add_tokens([a for a in added if not a.special])
    return tok
