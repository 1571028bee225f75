// llama-server's code infill (POST /infill; docs/server-api.md#infill): the fill-in-the-middle
// prompt of a code model from the text before and after the cursor and other files of the
// project. Pure function, no I/O.
//
//   auto ids = infill_prompt(body, tok, {.n_batch = 512, .n_ctx = 4096, .n_predict = -1});
//   if (auto* e = std::get_if<ApiError>(&ids)) return reply(*e);
//   body["prompt"] = std::get<std::vector<int32_t>>(ids);   // then as /completion
//
// The layout is the repository-level FIM pattern that llama-server builds (Qwen2.5-Coder's
// report, arXiv 2409.12186), with the model's FIM tokens:
//
//   [REPO]myproject\n [SEP]FILENAME\nTEXT ... [SEP]filename\n     (input_extra; where the vocabulary
//   [BOS] [PRE]input_prefix prompt [SUF]input_suffix [MID]         has them)
//
// Without a repo or separator token the extra files are joined by "\n\n--- snippet ---\n\n".
// The prefix keeps its last 3/4 of a batch, the suffix its first batch/4 - 2 - |prompt| tokens,
// the extra context its last n_ctx - n_batch - 2 n_predict tokens (llama-server's budget).
// input_prefix, input_suffix and the files are tokenized as plain text (special-token texts
// are not markers); "prompt" (text after the prefix) with special tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "server/api.h"

namespace minfer::server {

struct InfillLimits {
  int n_batch = 512;   // the server's -b
  int n_ctx = 4096;    // a slot's context
  int n_predict = -1;  // the request's n_predict (-1: none)
  bool spm = false;    // --spm-infill: suffix before prefix ([SUF]suffix [PRE]prefix prompt [MID])
};

// The prompt's token ids, or a 400 naming the bad field (input_extra chunks, prefix/suffix not
// text or ids) or saying the model has no prefix, suffix or middle token (llama-server: 501).
ApiResult<std::vector<int32_t>> infill_prompt(const json& body, const Tokenizer& tok, const InfillLimits& lim);

}  // namespace minfer::server
