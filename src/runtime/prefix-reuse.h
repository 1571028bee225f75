// Prefix reuse: what a sequence's KV cache already holds of new tokens. The chat REPL (a
// conversation's next turn), every server slot (the previous request's prompt and reply) and
// the draft model (the target's tokens) keep the longest common prefix of the cached tokens and
// the new ones, cut the cache back to it and prefill only the rest.
//
//   // at least the prompt's last token is decoded again: its logits start the generation
//   size_t n = reusable_prefix(ctx, seq, cached, prompt, prompt.size() - 1);
//   if (Status st = keep_prefix(ctx, seq, cached, n); !st) return st;   // cache and `cached` cut to n
//   ... decode prompt[n ..] at positions n ..
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/context.h"

namespace minfer {

// How many leading elements a and b share.
size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);
size_t common_prefix(std::string_view a, std::string_view b);

// The tokens of a new prompt sequence `seq` can keep: the common prefix of `cached` (the tokens
// its cache holds) and `prompt`, at most `limit`; 0 when its sliding-window cache no longer
// holds the window before that prefix (Context::can_keep): the prompt is then prefilled from
// the start, as llama-server does.
size_t reusable_prefix(const Context& ctx, int seq, std::span<const int32_t> cached, std::span<const int32_t> prompt,
                       size_t limit = std::numeric_limits<size_t>::max());

// Cuts sequence seq of the cache back to its first n positions and `cached` to n tokens
// (n <= cached.size()). An error leaves both as they were.
Status keep_prefix(Context& ctx, int seq, std::vector<int32_t>& cached, size_t n);

}  // namespace minfer
