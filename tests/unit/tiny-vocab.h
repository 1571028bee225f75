// Small in-memory vocabularies for tokenizer unit tests and the tokenizer fuzz target.
//
//   auto tok = Tokenizer::from_metadata(tiny_bpe_metadata("qwen2"));
//   auto spm = Tokenizer::from_metadata(tiny_spm_metadata());
//
// BPE: the 256 byte-level tokens, merges spelling a few words left to right, control tokens
// <|im_start|> <|im_end|> <|endoftext|> (eos) and "<v>x", user-defined tokens "<u>" and
// "<u><v>" (a longer one containing the first). SentencePiece: <unk> <s> </s>, the 256
// <0xNN> byte tokens and a handful of scored pieces.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/value.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer::testing {

inline GgufValue i32_array(const std::vector<int32_t>& v) {
  return GgufValue(GgufValue::Storage(GgufArray::of(v)));
}

inline GgufValue f32_array(const std::vector<float>& v) {
  return GgufValue(GgufValue::Storage(GgufArray::of(v)));
}

// Byte-level text of raw bytes (GPT-2's byte -> printable character map).
inline std::string byte_level_text(const std::string& raw) {
  std::string out;
  for (unsigned char c : raw) {
    char buf[4];
    out.append(buf, utf8_encode(byte_level().byte_to_cp[c], buf));
  }
  return out;
}

inline std::vector<GgufKV> tiny_bpe_metadata(const std::string& pre = "gpt-2") {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_level_text(std::string(1, static_cast<char>(b))));
    types.push_back(1);
  }
  const char* words[] = {"the", " the", "hello", " world", "in", "ing", " thing", "  ", "    ", "\n\n",
                         "123", "12", "\xC3\xA9t\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87", "'s", " 's", "ll", "<|"};
  for (const char* w : words) {
    const std::string raw = w;
    std::string left = byte_level_text(raw.substr(0, 1));
    for (size_t i = 1; i < raw.size(); ++i) {
      const std::string right = byte_level_text(raw.substr(i, 1));
      const std::string merged = left + right;
      bool seen = false;
      for (const std::string& t : tokens) seen |= t == merged;
      if (!seen) {
        merges.push_back(left + " " + right);
        tokens.push_back(merged);
        types.push_back(1);
      }
      left = merged;
    }
  }
  const std::pair<const char*, int32_t> specials[] = {
      {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<|endoftext|>", 3}, {"<v>x", 3}, {"<u>", 4}, {"<u><v>", 4}};
  for (auto [text, type] : specials) {
    tokens.push_back(text);
    types.push_back(type);
  }
  std::vector<GgufKV> md;
  md.push_back({"tokenizer.ggml.model", GgufValue::make_string("gpt2")});
  md.push_back({"tokenizer.ggml.pre", GgufValue::make_string(pre)});
  md.push_back({"tokenizer.ggml.tokens", GgufValue::make_string_array(tokens)});
  md.push_back({"tokenizer.ggml.token_type", i32_array(types)});
  md.push_back({"tokenizer.ggml.merges", GgufValue::make_string_array(merges)});
  md.push_back({"tokenizer.ggml.eos_token_id", GgufValue(GgufValue::Storage(uint32_t(tokens.size() - 4)))});
  md.push_back({"tokenizer.ggml.bos_token_id", GgufValue(GgufValue::Storage(uint32_t(tokens.size() - 6)))});
  return md;
}

inline std::vector<GgufKV> tiny_spm_metadata() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(6);
    scores.push_back(0);
  }
  const std::pair<const char*, float> pieces[] = {
      {"\xE2\x96\x81", -1}, {"\xE2\x96\x81t", -2}, {"\xE2\x96\x81the", -1.5f}, {"th", -3}, {"he", -2.5f},
      {"\xE2\x96\x81he", -4}, {"ll", -3}, {"llo", -3.5f}, {"\xE2\x96\x81hello", -2}, {"h", -5}, {"e", -5},
      {"l", -5}, {"o", -5}, {"t", -5}, {"a", -5}, {"\xE2\x96\x81h", -4.5f}, {"hel", -4}, {"\xE4\xB8\xAD", -6}};
  for (auto [text, score] : pieces) {
    tokens.push_back(text);
    types.push_back(1);
    scores.push_back(score);
  }
  std::vector<GgufKV> md;
  md.push_back({"tokenizer.ggml.model", GgufValue::make_string("llama")});
  md.push_back({"tokenizer.ggml.tokens", GgufValue::make_string_array(tokens)});
  md.push_back({"tokenizer.ggml.token_type", i32_array(types)});
  md.push_back({"tokenizer.ggml.scores", f32_array(scores)});
  return md;
}

// The tiny BPE vocabulary as a Tokenizer (a test fixture's: throws if it cannot be built).
inline std::unique_ptr<Tokenizer> tiny_bpe_tokenizer(const std::string& pre = "qwen2") {
  auto t = Tokenizer::from_metadata(tiny_bpe_metadata(pre));
  if (!t) throw std::runtime_error(t.error().message);
  return std::make_unique<Tokenizer>(std::move(*t));
}

}  // namespace minfer::testing
