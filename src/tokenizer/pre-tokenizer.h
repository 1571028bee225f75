// Pre-tokenizers of byte-level BPE vocabularies: split a text into the words that BPE merges
// within, exactly as the regular expressions named by `tokenizer.ggml.pre` would, but by
// hand-written scanners over code point classes (no regex engine, no backtracking).
//
//   auto pre = PreTokenizer::from_name("qwen2");          // Expected<PreTokenizer>
//   PreTokenizeScratch scratch;
//   std::vector<uint32_t> ends;                            // byte offset after each word
//   pre->split("Hello  world", scratch, ends);             // {5, 6, 12}: "Hello" " " " world"
//
// A pre-tokenizer is a list of rules applied in turn: the first splits the text into pieces,
// each further rule splits every piece again (matches and the gaps between them both become
// pieces), which is how llama.cpp and Hugging Face chain several patterns.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace minfer {

enum class SplitRule : uint8_t {
  kGpt2,            // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,          // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
                    //   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,           // as kLlama3 with \p{N} (one digit per word)
  kQwen35,          // as kQwen2 with [\p{L}\p{M}]+ for letters and marks excluded from symbols
  kEachNumber,      // \p{N}
  kNumberRuns,      // \p{N}+
  kEachNewline,     // [\r\n]
  kAsciiDigits3,    // [0-9][0-9][0-9]
  kPunctRuns,       // [\p{P}\$\+<=>\^~\|]+
  kPunctRunsTick,   // [\p{P}\$\+<=>\^~\|`]+
  kWsLetters,       // \s?\p{L}+
  kWsPuncts,        // \s?\p{P}+
  kCjkRuns,         // [一-龥ࠀ-一가-퟿]+ (DeepSeek; whitespace inside the ranges excluded)
  kWsCasedLetters,  // \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+ (DeepSeek LLM's cased-letter class)
  kWsAsciiPunct,    // \s?[!-/:-~！-／：-～‘-‟　-。]+ (DeepSeek LLM)
  kTrailingWs,      // \s+$
};

// Code points of the text being split, decoded once: cp[i] starts at byte off[i].
struct PreTokenizeScratch {
  std::vector<uint32_t> cp;
  std::vector<uint8_t> cls;   // unicode_class(cp[i])
  std::vector<uint32_t> off;  // [n + 1]
  std::vector<uint32_t> a, b; // piece ends (code point indices) between rules
};

class PreTokenizer {
 public:
  // The pre-tokenizer for a `tokenizer.ggml.pre` value; an error names unknown values.
  static Expected<PreTokenizer> from_name(std::string_view pre);
  explicit PreTokenizer(std::vector<SplitRule> rules, bool ignore_merges = false, bool add_bos = false)
      : rules_(std::move(rules)), ignore_merges_(ignore_merges), add_bos_(add_bos) {}

  // Appends the byte offset (from text.data()) just past each word, in order; the last one
  // is text.size(). Empty text appends nothing.
  void split(std::string_view text, PreTokenizeScratch& s, std::vector<uint32_t>& ends) const;

  const std::vector<SplitRule>& rules() const { return rules_; }
  // Llama 3 family: a word that is already a whole vocabulary entry is emitted unmerged.
  bool ignore_merges() const { return ignore_merges_; }
  // Whether BOS is added when the file has no tokenizer.ggml.add_bos_token (llama.cpp's default).
  bool default_add_bos() const { return add_bos_; }

 private:
  std::vector<SplitRule> rules_;
  bool ignore_merges_ = false;
  bool add_bos_ = false;
};

// Names accepted by PreTokenizer::from_name, for messages and docs.
std::string pre_tokenizer_names();

}  // namespace minfer
