// Byte-level BPE (tokenizer.ggml.model "gpt2"): merges applied to one pre-tokenized word.
//
//   auto bpe = BpeModel::build(vocab, merges);    // Expected<BpeModel>
//   BpeScratch scratch;
//   bpe->encode_word("hello", /*ignore_merges=*/false, scratch, ids);   // appends ids
//
// Everything runs on integer symbols: each raw byte starts as the symbol of its byte-level
// character, and a merge (left, right) -> (rank, result) is one hash lookup. Symbols are
// vocabulary ids; the rare merge operand or result that is not a vocabulary entry gets an id
// past n_vocab, so the merge order is exactly that of the string-based algorithm.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/hash-tables.h"
#include "tokenizer/vocab.h"

namespace minfer {

struct BpeScratch {
  std::vector<uint32_t> sym;   // current symbols of the word
  std::vector<uint32_t> rank;  // rank of the pair (sym[i], sym[i+1]); kNoMerge when none
  std::vector<uint32_t> res;   // the pair's merged symbol
  std::vector<int32_t> prev, next;
  struct Pair {
    uint32_t rank, left, right, left_sym, right_sym, res;
  };
  std::vector<Pair> heap;
};

// GPT-2's reversible map from bytes to printable code points: byte_to_cp[b].
struct ByteLevel {
  uint32_t byte_to_cp[256];
  int16_t cp_to_byte[324];  // -1 for code points no byte maps to
  ByteLevel();
  // Raw bytes of a byte-level token text; false when a character is outside the map.
  bool decode(std::string_view text, std::string& out) const;
};
const ByteLevel& byte_level();

class BpeModel {
 public:
  static constexpr uint32_t kNoMerge = 0xFFFFFFFFu;

  // whole_words: also build the raw-bytes -> id table that encode_word's ignore_merges needs
  // (Llama 3's pre-tokenizer; ~10 MiB for a 150k vocabulary, so only when asked).
  static Expected<BpeModel> build(const Vocab& v, const std::vector<std::string_view>& merges,
                                  bool whole_words = false);

  // Appends the ids of one word (raw bytes, non-empty). With ignore_merges (only on a model
  // built with whole_words) a word that is a whole vocabulary entry is emitted as that entry. Words longer than `heap_from` bytes use a
  // heap instead of rescanning (same result; the parameter exists for tests).
  void encode_word(std::string_view word, bool ignore_merges, BpeScratch& s, std::vector<int32_t>& out,
                   size_t heap_from = 48) const;

  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }  // -1 when absent
  size_t n_merges() const { return n_merges_; }

 private:
  uint64_t lookup(uint32_t left, uint32_t right) const { return merges_.find(pair_key(left, right)); }
  void merge_scan(BpeScratch& s) const;
  void merge_heap(BpeScratch& s) const;
  void emit(uint32_t sym, std::vector<int32_t>& out) const;

  int32_t n_vocab_ = 0;
  size_t n_merges_ = 0;
  uint32_t byte_sym_[256] = {};       // symbol of each raw byte's byte-level character
  int32_t byte_token_[256] = {};      // vocabulary id of that character, or -1
  PairMap merges_;                    // pair_key(left, right) -> rank << 32 | result
  std::vector<std::string> extra_;    // raw bytes of symbols n_vocab.. (not in the vocabulary)
  std::string raw_text_;              // raw bytes of every decodable token, for raw_to_id_
  StringIdMap raw_to_id_;             // raw bytes -> id (ignore_merges lookups; empty without whole_words)
  bool whole_words_ = false;
};

}  // namespace minfer
