// The log-probabilities a reply reports per generated token (logprobs, n_probs): of the model's
// logits row, or of the distribution the sampler drew from (post_sampling_probs).
//
//   TokenLogprob lp = logprob_of(logits, token, 5);                // ln softmax, 5 most likely
//   TokenLogprob pp = post_sampling_logprob(sampler, token, 5);  // after top-k/top-p/... and temp
#pragma once

#include <cstdint>
#include <span>

#include "sampling/sampler.h"
#include "server/engine.h"

namespace minfer::server {

// `id`'s log-probability in softmax(logits) ([n_vocab]) and the n_top most likely tokens'.
TokenLogprob logprob_of(std::span<const float> logits, int32_t id, int n_top);

// The same in the distribution the sampler's last sample() drew from: only tokens it could have
// drawn; `id` outside it (a forced token) gets -9999, OpenAI's "not among the candidates".
TokenLogprob post_sampling_logprob(const Sampler& sampler, int32_t id, int n_top);

}  // namespace minfer::server
