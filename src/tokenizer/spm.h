// SentencePiece-style tokenizer (tokenizer.ggml.model "llama"), as llama.cpp runs it:
// characters are merged greedily by the score of the vocabulary entry they would form
// (highest first, leftmost on ties); a character with no entry falls back to <0xNN> tokens.
//
//   SpmModel spm(vocab);
//   SpmScratch s;
//   spm.encode(vocab, "▁Hello▁world", s, ids);   // spaces already escaped as U+2581
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace minfer {

struct SpmScratch {
  struct Sym {
    uint32_t start, len;  // bytes of the escaped text
    int32_t prev, next;
  };
  struct Pair {
    float score;
    int32_t left, right;
    uint32_t len;  // left.len + right.len when pushed
  };
  std::vector<Sym> sym;
  std::vector<Pair> heap;
};

class SpmModel {
 public:
  explicit SpmModel(const Vocab& v);

  // Appends the ids of `text` (spaces already replaced by U+2581 and any prefix added).
  void encode(const Vocab& v, std::string_view text, SpmScratch& s, std::vector<int32_t>& out) const;

  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }

 private:
  int32_t byte_token_[256];  // <0xNN> (else the one-byte token), or -1
};

// "<0xNN>" -> NN; -1 when the text is not a byte token name.
int parse_byte_token(std::string_view text);

}  // namespace minfer
