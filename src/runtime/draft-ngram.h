// N-gram self-drafting (prompt lookup): the tokens that followed the most recent earlier
// occurrence of the history's longest suffix are proposed as its continuation. No second model:
// text that copies from the prompt (quoting, rewriting, editing code) drafts itself.
//
//   NgramParams np{.n_min = 2, .n_max = 5};
//   std::vector<int32_t> draft = ngram_draft(history, np, 8);   // up to 8 tokens, maybe none
//
// The search tries suffix lengths n_max down to n_min and takes the first that occurs earlier
// in `history` (the latest such occurrence); its match length is reported so that a caller can
// judge the proposal. When no suffix repeats and `skip` is set, the last token is taken for a
// substitution: the n tokens before it are looked up the same way and the tokens after the
// occurrence's next token are proposed. An edit ("result" renamed "acc", a counter that moves
// on: "items, 4))" then "items, 5") then keeps copying right after the changed token instead of
// waiting for a fresh n-gram to repeat. O(history * n_max) per call: negligible beside a
// forward pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace minfer {

struct NgramParams {
  int n_min = 2;  // shortest suffix that may propose (1 drafts from any repeated token)
  int n_max = 5;  // longest suffix tried
  bool skip = true;  // no repeated suffix: match the tokens before the last one (a substitution)
};

struct NgramDraft {
  std::vector<int32_t> tokens;  // the proposal (empty: no earlier occurrence)
  int match = 0;                // length of the suffix that matched
  bool skipped = false;         // matched before a substituted last token
};

NgramDraft ngram_draft(std::span<const int32_t> history, const NgramParams& p, int n_draft);

}  // namespace minfer
