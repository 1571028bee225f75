// Tokenizer internals shared by tokenizer.cpp (loading, encoding) and decode.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pre-tokenizer.h"
#include "tokenizer/special-tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace minfer {

struct Tokenizer::Impl {
  Vocab vocab;
  bool spm = false;                  // SentencePiece; else byte-level BPE
  std::optional<PreTokenizer> pre;   // BPE only
  std::optional<BpeModel> bpe;       // BPE only
  std::optional<SpmModel> spm_model; // SentencePiece only
  std::optional<SpecialMatcher> special;

  // Decoded bytes of every token (see Tokenizer::piece): piece_off[id]..piece_off[id + 1].
  std::string pieces;
  std::vector<uint32_t> piece_off;
  std::vector<uint8_t> piece_special;  // control/unknown: rendered only on request

  void build_pieces();
};

}  // namespace minfer
