// Sentence embeddings from a model's hidden states (the server's /embeddings): the pooling of
// the rows of one input, and llama-server's embd_normalize norms.
//
//   std::vector<float> v = pool(rows, n_tokens, n_embd, Pooling::kMean);  // rows [n_tokens][n_embd]
//   normalize(v, 2);                                                       // unit Euclidean length
//
// Pooling: kNone keeps every token's row; kMean averages them; kCls takes the first, kLast the
// last. A causal model's last row is the only one that has seen the whole input, so kLast is
// the default for models whose GGUF does not name a pooling ({arch}.pooling_type).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::server {

enum class Pooling { kNone, kMean, kCls, kLast };

std::optional<Pooling> parse_pooling(std::string_view name);  // "none", "mean", "cls", "last"
const char* pooling_name(Pooling p);
// The pooling a GGUF's {arch}.pooling_type value names (llama.cpp's numbering: 0 none, 1 mean,
// 2 cls, 3 last, 4 rank); nullopt for rank and unknown values.
std::optional<Pooling> pooling_from_gguf(int64_t v);

// The pooled vector of n rows of width d (rows [n][d], n >= 1); kNone is not a pooling (asserts).
std::vector<float> pool(std::span<const float> rows, int n, int d, Pooling p);

// llama-server's embd_normalize, in place: -1 none; 0 max absolute value scaled to 32760 (int16
// range); 1 taxicab; 2 Euclidean; k > 2 the k-norm. A zero vector stays zero.
void normalize(std::span<float> v, int norm);

}  // namespace minfer::server
