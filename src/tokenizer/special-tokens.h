// Finds the text of special tokens (control, user-defined, unknown) inside input text.
//
//   SpecialMatcher m(vocab);
//   auto hit = m.find(text, 0, /*parse_special=*/true);
//   if (hit.id >= 0) { /* text[hit.pos, hit.pos + hit.len) is token hit.id */ }
//
// The leftmost occurrence wins, and among tokens starting there the longest (what Hugging
// Face's added-token matcher does). Without parse_special only user-defined tokens count,
// which is llama.cpp's behaviour (and Hugging Face's for non-special added tokens).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace minfer {

class SpecialMatcher {
 public:
  struct Hit {
    size_t pos = 0, len = 0;
    int32_t id = -1;
  };

  explicit SpecialMatcher(const Vocab& v);

  // First match at or after `from`; id -1 when there is none.
  Hit find(std::string_view text, size_t from, bool parse_special) const;
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    uint32_t off, len;  // text in buf_
    int32_t id;
    bool user_defined;  // matched even without parse_special
  };
  std::string buf_;                 // the special tokens' texts
  std::vector<Entry> entries_;      // grouped by first byte, longest first within a group
  uint32_t group_[257] = {};        // entries_[group_[b] .. group_[b + 1]) start with byte b
  bool any_user_defined_ = false;
};

}  // namespace minfer
