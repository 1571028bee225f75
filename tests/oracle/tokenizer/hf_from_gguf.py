"""Builds a Hugging Face `tokenizers` Tokenizer from a GGUF vocabulary (gguf-py reader) and the
published pre-tokenizer/decoder configuration of the model family, so that the HF library is
an independent implementation of the same algorithm over the same data.

    from hf_from_gguf import load_gguf_vocab, build_hf
    v = load_gguf_vocab("ggml-vocab-qwen2.gguf")
    tok = build_hf(v)                      # family chosen from tokenizer.ggml.pre
    tok.encode("Hello", add_special_tokens=False).ids
"""
from gguf import GGUFReader
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

# Qwen2's tokenizer.json: Split(this regex, Isolated) then ByteLevel without its own regex.
# (Its NFC normalizer is left out: llama.cpp does not normalize, and neither do we.)
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def load_gguf_vocab(path):
    r = GGUFReader(path)

    def field(name):
        f = r.fields.get(name)
        return None if f is None else f.contents()

    return {
        "model": field("tokenizer.ggml.model"),
        "pre": field("tokenizer.ggml.pre"),
        "tokens": field("tokenizer.ggml.tokens"),
        "types": field("tokenizer.ggml.token_type"),
        "merges": field("tokenizer.ggml.merges"),
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


def build_hf(v):
    assert v["model"] == "gpt2", v["model"]
    vocab = {}
    for i, t in enumerate(v["tokens"]):
        vocab[t] = i  # a duplicated text maps to its last id, as in the GGUF readers
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
