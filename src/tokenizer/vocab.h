// The vocabulary read from tokenizer.ggml.* (internal to the tokenizer library).
//
//   MetadataIndex md(file.metadata());
//   auto v = Vocab::load(md);           // Expected<Vocab>
//   int32_t id = v->by_text.find("<|im_end|>");
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "gguf/value.h"
#include "tokenizer/hash-tables.h"

namespace minfer {

// Key lookup over a metadata list (GgufFile or a parsed in-memory image).
class MetadataIndex {
 public:
  explicit MetadataIndex(const std::vector<GgufKV>& kv) {
    for (const GgufKV& e : kv) map_.emplace(e.key, &e.value);
  }
  const GgufValue* find(std::string_view key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<std::string_view, const GgufValue*> map_;
};

// Token attributes, derived from token_type as llama.cpp does, then adjusted by text (a
// token named like an end-of-turn marker is treated as control even if typed otherwise).
enum TokenAttr : uint8_t {
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
  kAttrLstrip = 1 << 6,  // special token that swallows the whitespace before it
  kAttrRstrip = 1 << 7,  // ... after it (Phi-3's added tokens)
};

struct Vocab {
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre
  int32_t n = 0;
  std::string text;                // every token's text, concatenated
  std::vector<uint32_t> text_off;  // [n + 1] offsets into `text`
  std::vector<float> score;        // [n]
  std::vector<uint8_t> type;       // [n] TokenType
  std::vector<uint8_t> attr;       // [n] TokenAttr bits
  StringIdMap by_text;             // text -> id (the last id wins for duplicated texts)

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  // Fill-in-the-middle markers (FimToken order: prefix, suffix, middle, pad, repo, file
  // separator); -1 where the vocabulary has none.
  int32_t fim[6] = {-1, -1, -1, -1, -1, -1};
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool has_add_bos = false;        // tokenizer.ggml.add_bos_token present
  std::vector<int32_t> eog;        // sorted

  std::string_view token(int32_t id) const {
    return {text.data() + text_off[id], text_off[id + 1] - text_off[id]};
  }
  bool is_special(int32_t id) const { return attr[id] & (kAttrControl | kAttrUnknown | kAttrUserDefined); }

  // Reads tokens, scores, types, special ids and flags; checks every type and length.
  // add_bos is left at the SentencePiece default (true) or false for BPE when the key is
  // absent (has_add_bos false); the tokenizer applies its pre-tokenizer's default then.
  static Expected<Vocab> load(const MetadataIndex& md);
};

// tokenizer.ggml.merges as a list of strings (BPE only); an error names the bad entry.
Expected<std::vector<std::string_view>> load_merges(const MetadataIndex& md);

}  // namespace minfer
