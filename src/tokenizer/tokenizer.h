// Tokenizer built from a GGUF file's `tokenizer.ggml.*` metadata: byte-level BPE (`gpt2`,
// with the pre-tokenizer named by `tokenizer.ggml.pre`) and SentencePiece (`llama`). Token
// ids match llama.cpp's and Hugging Face's for the same vocabulary; see docs/tokenizer.md.
//
//   auto f = GgufFile::open("model.gguf");
//   auto tok = Tokenizer::from_gguf(*f);              // Expected<Tokenizer>
//   if (!tok) { fprintf(stderr, "%s\n", tok.error().message.c_str()); return 1; }
//   std::vector<int32_t> ids = tok->encode("<|im_start|>user\nHi", /*add_bos=*/false,
//                                          /*parse_special=*/true);
//   std::string text = tok->decode(ids);               // the exact input bytes again
//
//   StreamDecoder out(*tok);                           // while generating:
//   std::string ready = out.push(id);                  // complete UTF-8 characters only
//   if (tok->is_eog(id)) { ready += out.flush(); ... }
//
// A Tokenizer is immutable after loading; encode/decode may be called from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/value.h"

namespace minfer {

class GgufFile;

// tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct DecodeOptions {
  // Control and unknown tokens (<|im_end|>, <s>...) decode to their text; false drops them.
  bool render_special = true;
  // SentencePiece vocabularies prefix a space to the text (add_space_prefix): drop the one
  // leading space of the first token so that decode(encode(s)) == s.
  bool strip_space_prefix = false;
};

class Tokenizer {
 public:
  // Reads the tokenizer.ggml.* keys. Errors name the key and the bad value: an unknown model
  // or pre-tokenizer, arrays of the wrong type or length, no merges for a BPE vocabulary.
  static Expected<Tokenizer> from_gguf(const GgufFile& file);
  static Expected<Tokenizer> from_metadata(const std::vector<GgufKV>& metadata);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (any bytes; invalid UTF-8 is kept as byte tokens). With
  // parse_special, the text of control and user-defined tokens becomes those tokens (the
  // leftmost, then longest, occurrence first); without it only user-defined tokens are
  // recognised, as in llama.cpp. add_bos prepends bos_id() when the vocabulary has one.
  std::vector<int32_t> encode(std::string_view text, bool add_bos = false, bool parse_special = true) const;
  // Appends to `out` instead.
  void encode(std::string_view text, bool add_bos, bool parse_special, std::vector<int32_t>& out) const;

  // Concatenated bytes of the tokens (ids out of range decode to nothing).
  std::string decode(std::span<const int32_t> ids, DecodeOptions opt = {}) const;
  // Bytes one token decodes to: its text with the byte-level / ▁ encoding undone, the byte of
  // a <0xNN> token, the text of a special token (empty when !render_special).
  std::string_view piece(int32_t id, bool render_special = true) const;
  // The token's text as stored in tokenizer.ggml.tokens.
  std::string_view token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;
  float token_score(int32_t id) const;
  // Control or unknown token (by type, or by llama.cpp's end-of-turn names): its text is a
  // marker, rendered by decode only with render_special.
  bool is_control(int32_t id) const;
  // Id of a token by its stored text, or -1.
  int32_t find_token(std::string_view text) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when the vocabulary has none
  int32_t eos_id() const;
  int32_t eot_id() const;
  // Fill-in-the-middle markers (tokenizer.ggml.fim_*_token_id, else found by their usual
  // texts, as llama.cpp does); -1 where the vocabulary has none.
  enum class Fim { kPrefix, kSuffix, kMiddle, kPad, kRepo, kSep };
  int32_t fim_id(Fim which) const;
  int32_t unk_id() const;
  int32_t pad_id() const;
  bool add_bos() const;  // tokenizer.ggml.add_bos_token, or the model type's default
  bool add_eos() const;
  bool add_space_prefix() const;  // SentencePiece only

  // End-of-generation tokens: eos, eot, eom and the tokens llama.cpp recognises by text
  // (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>...), sorted.
  const std::vector<int32_t>& eog_ids() const;
  bool is_eog(int32_t id) const;

  const std::string& model() const;  // "gpt2" or "llama"
  const std::string& pre() const;    // tokenizer.ggml.pre ("default" for SentencePiece)

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text without ever splitting a UTF-8 character: bytes of
// an incomplete character are held until the rest arrives. Bytes that can never complete a
// character (invalid UTF-8 produced by the model) are passed through as they are.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, DecodeOptions opt = {}) : tok_(&tok), opt_(opt) {}
  // Text that became complete with this token.
  std::string push(int32_t id);
  // Whatever is still held (an incomplete character at the end of generation).
  std::string flush();
  size_t pending() const { return held_.size(); }

 private:
  const Tokenizer* tok_;
  DecodeOptions opt_;
  std::string held_;
  bool first_ = true;
};

}  // namespace minfer
