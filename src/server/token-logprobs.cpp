#include "server/token-logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace minfer::server {

TokenLogprob logprob_of(std::span<const float> logits, int32_t id, int n_top) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  TokenLogprob lp;
  lp.id = id;
  lp.logprob = logits[static_cast<size_t>(id)] - lse;
  if (n_top > 0) {
    std::vector<int32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = std::min(idx.size(), static_cast<size_t>(n_top));
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
    for (size_t i = 0; i < k; ++i) lp.top.emplace_back(idx[i], logits[static_cast<size_t>(idx[i])] - lse);
  }
  return lp;
}

TokenLogprob post_sampling_logprob(const Sampler& sampler, int32_t id, int n_top) {
  TokenLogprob lp;
  lp.id = id;
  lp.post_sampling = true;
  lp.logprob = -9999.0f;  // OpenAI's value for "not among the candidates" (JSON has no -inf)
  if (const float p = sampler.last_probability(id); p > 0.0f) lp.logprob = std::log(p);
  for (const auto& [t, p] : sampler.last_distribution(static_cast<size_t>(std::max(n_top, 0)))) lp.top.emplace_back(t, std::log(p));
  return lp;
}

}  // namespace minfer::server
