// Reading tokenizer.ggml.* into a Vocab: every array's element type and length is checked,
// special ids out of range are ignored, and the end-of-generation set is derived.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>

#include "tokenizer/tokenizer.h"

namespace minfer {
namespace {

Expected<const GgufArray*> get_array(const MetadataIndex& md, std::string_view key, bool required) {
  const GgufValue* v = md.find(key);
  if (!v) {
    if (required) return make_error("tokenizer: {} is missing", key);
    return static_cast<const GgufArray*>(nullptr);
  }
  const GgufArray* a = v->as_array();
  if (!a) return make_error("tokenizer: {} is a {}, expected an array", key, gguf_type_name(v->type()));
  return a;
}

Expected<std::string> get_string(const MetadataIndex& md, std::string_view key) {
  const GgufValue* v = md.find(key);
  if (!v) return std::string();
  const std::string* s = v->as_string();
  if (!s) return make_error("tokenizer: {} is a {}, expected a string", key, gguf_type_name(v->type()));
  return *s;
}

// Reads an optional boolean key into `out`; returns whether it was present.
Expected<bool> get_flag(const MetadataIndex& md, std::string_view key, bool& out) {
  const GgufValue* v = md.find(key);
  if (!v) return false;
  auto b = v->as_bool();
  if (!b) return make_error("tokenizer: {} is a {}, expected a bool", key, gguf_type_name(v->type()));
  out = *b;
  return true;
}

// Optional token id key: ids outside [0, n) are ignored (as llama.cpp does, with a warning).
Expected<int32_t> get_id(const MetadataIndex& md, std::string_view key, int32_t fallback, int32_t n) {
  const GgufValue* v = md.find(key);
  if (!v) return fallback;
  auto id = v->as_int();
  if (!id) return make_error("tokenizer: {} is a {}, expected an integer", key, gguf_type_name(v->type()));
  if (*id < 0 || *id >= n) return fallback;
  return static_cast<int32_t>(*id);
}

// Names llama.cpp treats as end-of-generation (and so as control) tokens, whatever their type.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[",
};
// End-of-turn names, in the order the eot id is picked from them when the file has no key.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"};
// Fill-in-the-middle markers: control; the pad/repo/file-separator ones also end generation.
struct FimRole {
  const char* key;
  std::initializer_list<std::string_view> texts;
  bool eog;
};
const FimRole kFimRoles[] = {
    {"tokenizer.ggml.fim_pre_token_id",
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
     false},
    {"tokenizer.ggml.fim_suf_token_id",
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
     false},
    {"tokenizer.ggml.fim_mid_token_id",
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
     false},
    {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}, true},
    {"tokenizer.ggml.fim_rep_token_id", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}, true},
    {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>"}, true},
};

// The lowest id among the tokens whose text is in `texts`, or -1.
int32_t first_by_text(const Vocab& v, std::initializer_list<std::string_view> texts) {
  int32_t best = -1;
  for (std::string_view t : texts) {
    const int32_t id = v.by_text.find(t);
    if (id >= 0 && (best < 0 || id < best)) best = id;
  }
  return best;
}

void derive_eog(Vocab& v, const MetadataIndex& md) {
  std::vector<int32_t> eog;
  for (size_t k = 0; k < std::size(kFimRoles); ++k) {
    const FimRole& r = kFimRoles[k];
    auto key_id = get_id(md, r.key, -1, v.n);
    int32_t id = key_id.has_value() ? *key_id : -1;
    if (id < 0) {
      id = first_by_text(v, r.texts);
      if (id >= 0) v.attr[id] |= kAttrControl;
    }
    v.fim[k] = id;
    if (id >= 0 && r.eog) eog.push_back(id);
  }
  // No eot key: the first end-of-turn name present, in kEotTexts' order (turn markers before
  // end-of-text), which is the token llama.cpp settles on for the usual vocabularies.
  for (size_t k = 0; v.eot < 0 && k < std::size(kEotTexts); ++k) v.eot = v.by_text.find(kEotTexts[k]);
  if (v.eom < 0) v.eom = v.by_text.find("<|eom_id|>");
  for (std::string_view t : kEogTexts) {
    const int32_t id = v.by_text.find(t);
    if (id < 0) continue;
    // Deviation from llama.cpp: "</s>" typed as a normal token is plain text (an HTML end
    // tag in Qwen2's vocabulary, for one), not an end-of-generation marker; as Hugging Face.
    if (t == "</s>" && v.type[id] == static_cast<uint8_t>(TokenType::kNormal)) continue;
    v.attr[id] |= kAttrControl;
    eog.push_back(id);
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // Harmony-style vocabularies end a message with <|end|> but a turn with <|return|>/<|call|>;
  // Gemma 4 uses </s> inside tool responses: those two stay out of the set (llama.cpp's rules).
  auto has = [&](std::string_view t) {
    const int32_t id = v.by_text.find(t);
    return id >= 0 && std::binary_search(eog.begin(), eog.end(), id);
  };
  auto drop = [&](std::string_view t, uint8_t attr) {
    const int32_t id = v.by_text.find(t);
    eog.erase(std::remove(eog.begin(), eog.end(), id), eog.end());
    v.attr[id] = attr;
  };
  if (has("<|end|>") && ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"))))
    drop("<|end|>", kAttrUserDefined);
  if (has("<|tool_response>") && has("</s>")) drop("</s>", kAttrNormal);
  v.eog = std::move(eog);
}

// Phi-3's tokenizer.json marks its added tokens rstrip (whitespace after them is dropped);
// GGUF has no field for it, so llama.cpp recognises the model by name, and so do we.
void set_strip_attrs(Vocab& v, std::string name) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (int32_t id = 0; id < v.n; ++id) {
    if (v.is_special(id)) v.attr[id] |= kAttrRstrip;
  }
  auto set = [&](std::string_view t, bool on) {
    const int32_t id = v.by_text.find(t);
    if (id >= 0) v.attr[id] = on ? (v.attr[id] | kAttrRstrip) : (v.attr[id] & ~kAttrRstrip);
  };
  set("</s>", true);
  for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, false);
}

}  // namespace

Expected<Vocab> Vocab::load(const MetadataIndex& md) {
  Vocab v;
  const GgufValue* model = md.find("tokenizer.ggml.model");
  if (!model) return make_error("tokenizer: tokenizer.ggml.model is missing (the file has no tokenizer)");
  auto model_s = get_string(md, "tokenizer.ggml.model");
  if (!model_s) return model_s.error();
  v.model = *model_s;
  if (v.model != "gpt2" && v.model != "llama") {
    return make_error("tokenizer: model type '{}' (tokenizer.ggml.model) is not supported; supported: "
                      "gpt2 (byte-level BPE), llama (SentencePiece)", v.model);
  }
  auto pre = get_string(md, "tokenizer.ggml.pre");
  if (!pre) return pre.error();
  v.pre = *pre;

  auto tokens = get_array(md, "tokenizer.ggml.tokens", true);
  if (!tokens) return tokens.error();
  const GgufArray& toks = **tokens;
  if (toks.elem_type() != GgufType::STRING) {
    return make_error("tokenizer: tokenizer.ggml.tokens holds {}, expected strings", gguf_type_name(toks.elem_type()));
  }
  if (toks.empty()) return make_error("tokenizer: tokenizer.ggml.tokens is empty");
  if (toks.size() >= size_t(std::numeric_limits<int32_t>::max())) {
    return make_error("tokenizer: tokenizer.ggml.tokens has {} entries, more than 2^31 - 1", toks.size());
  }
  v.n = static_cast<int32_t>(toks.size());

  auto scores = get_array(md, "tokenizer.ggml.scores", false);
  if (!scores) return scores.error();
  auto types = get_array(md, "tokenizer.ggml.token_type", false);
  if (!types) return types.error();
  for (auto [arr, name] : {std::pair{*scores, "tokenizer.ggml.scores"}, std::pair{*types, "tokenizer.ggml.token_type"}}) {
    if (arr && arr->size() < toks.size()) {
      return make_error("tokenizer: {} has {} entries for {} tokens", name, arr->size(), v.n);
    }
  }

  v.text_off.reserve(v.n + 1);
  v.text.reserve(toks.text_bytes());
  v.score.resize(v.n, 0.0f);
  v.type.resize(v.n, static_cast<uint8_t>(TokenType::kNormal));
  v.attr.resize(v.n, kAttrNormal);
  for (int32_t i = 0; i < v.n; ++i) {
    v.text_off.push_back(static_cast<uint32_t>(v.text.size()));
    const std::string_view s = toks.string_at(static_cast<size_t>(i));
    if (s.empty()) v.text += "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
    else v.text += s;
    if (v.text.size() >= std::numeric_limits<uint32_t>::max()) {
      return make_error("tokenizer: tokenizer.ggml.tokens holds more than 4 GiB of text");
    }
    if (*scores) {
      auto f = (*scores)->float_at(static_cast<size_t>(i));
      if (!f) return make_error("tokenizer: tokenizer.ggml.scores[{}] is not a number", i);
      v.score[i] = static_cast<float>(*f);
    }
    if (*types) {
      auto t = (*types)->int_at(static_cast<size_t>(i));
      if (!t) return make_error("tokenizer: tokenizer.ggml.token_type[{}] is not an integer", i);
      const int64_t ty = *t;
      v.type[i] = static_cast<uint8_t>(ty >= 0 && ty <= 6 ? ty : 0);
      switch (static_cast<TokenType>(v.type[i])) {
        case TokenType::kUnknown: v.attr[i] = kAttrUnknown; break;
        case TokenType::kUnused: v.attr[i] = kAttrUnused; break;
        case TokenType::kNormal: v.attr[i] = kAttrNormal; break;
        case TokenType::kControl: v.attr[i] = kAttrControl; break;
        case TokenType::kUserDefined: v.attr[i] = kAttrUserDefined; break;
        case TokenType::kByte: v.attr[i] = kAttrByte; break;
        default: v.attr[i] = 0; break;
      }
    }
  }
  v.text_off.push_back(static_cast<uint32_t>(v.text.size()));
  v.by_text.reserve(v.n);
  for (int32_t i = 0; i < v.n; ++i) v.by_text.insert_or_assign(v.token(i), i);

  const bool spm = v.model == "llama";
  struct IdKey {
    const char* key;
    int32_t* out;
    int32_t fallback;
  };
  const IdKey ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos, spm ? 1 : -1},
      {"tokenizer.ggml.eos_token_id", &v.eos, spm ? 2 : -1},
      {"tokenizer.ggml.eot_token_id", &v.eot, -1},
      {"tokenizer.ggml.eom_token_id", &v.eom, -1},
      {"tokenizer.ggml.unknown_token_id", &v.unk, spm ? 0 : -1},
      {"tokenizer.ggml.padding_token_id", &v.pad, -1},
  };
  for (const IdKey& k : ids) {
    auto id = get_id(md, k.key, k.fallback < v.n ? k.fallback : -1, v.n);
    if (!id) return id.error();
    *k.out = *id;
  }
  v.add_bos = spm;
  v.add_space_prefix = spm;
  auto has_bos = get_flag(md, "tokenizer.ggml.add_bos_token", v.add_bos);
  if (!has_bos) return has_bos.error();
  v.has_add_bos = *has_bos;
  for (auto [key, out] : {std::pair{"tokenizer.ggml.add_eos_token", &v.add_eos},
                          std::pair{"tokenizer.ggml.add_space_prefix", &v.add_space_prefix}}) {
    auto r = get_flag(md, key, *out);
    if (!r) return r.error();
  }
  derive_eog(v, md);
  auto name = get_string(md, "general.name");
  if (!name) return name.error();
  set_strip_attrs(v, *name);
  return v;
}

Expected<std::vector<std::string_view>> load_merges(const MetadataIndex& md) {
  auto merges = get_array(md, "tokenizer.ggml.merges", true);
  if (!merges) return merges.error();
  const GgufArray& m = **merges;
  if (m.elem_type() != GgufType::STRING) {
    return make_error("tokenizer: tokenizer.ggml.merges holds {}, expected strings",
                      gguf_type_name(m.elem_type()));
  }
  if (m.empty()) return make_error("tokenizer: tokenizer.ggml.merges is empty");
  std::vector<std::string_view> out;  // views into the metadata, which outlives the tokenizer build
  out.reserve(m.size());
  for (size_t i = 0; i < m.size(); ++i) out.push_back(m.string_at(i));
  return out;
}

}  // namespace minfer
