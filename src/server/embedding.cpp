// Pooling and norms of sentence embeddings (embedding.h).
#include "server/embedding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/status.h"

namespace minfer::server {

std::optional<Pooling> parse_pooling(std::string_view name) {
  if (name == "none") return Pooling::kNone;
  if (name == "mean") return Pooling::kMean;
  if (name == "cls") return Pooling::kCls;
  if (name == "last") return Pooling::kLast;
  return std::nullopt;
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
  }
  return "?";
}

std::optional<Pooling> pooling_from_gguf(int64_t v) {
  switch (v) {
    case 0: return Pooling::kNone;
    case 1: return Pooling::kMean;
    case 2: return Pooling::kCls;
    case 3: return Pooling::kLast;
    default: return std::nullopt;
  }
}

std::vector<float> pool(std::span<const float> rows, int n, int d, Pooling p) {
  MINFER_ASSERT(n >= 1 && d >= 1 && rows.size() == static_cast<size_t>(n) * static_cast<size_t>(d) && p != Pooling::kNone);
  const size_t dz = static_cast<size_t>(d);
  if (p == Pooling::kCls) return {rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(dz)};
  if (p == Pooling::kLast) return {rows.end() - static_cast<std::ptrdiff_t>(dz), rows.end()};
  std::vector<double> sum(dz, 0.0);  // [d]
  for (size_t r = 0; r < static_cast<size_t>(n); ++r)
    for (size_t j = 0; j < dz; ++j) sum[j] += rows[r * dz + j];
  std::vector<float> out(dz);
  for (size_t j = 0; j < dz; ++j) out[j] = static_cast<float>(sum[j] / n);
  return out;
}

void normalize(std::span<float> v, int norm) {
  if (norm < 0) return;
  double scale = 0.0;
  if (norm == 0) {
    for (float x : v) scale = std::max(scale, static_cast<double>(std::fabs(x)));
    scale /= 32760.0;
  } else if (norm == 1) {
    for (float x : v) scale += std::fabs(x);
  } else if (norm == 2) {
    for (float x : v) scale += static_cast<double>(x) * x;
    scale = std::sqrt(scale);
  } else {
    for (float x : v) scale += std::pow(std::fabs(static_cast<double>(x)), norm);
    scale = std::pow(scale, 1.0 / norm);
  }
  if (scale <= 0.0) return;
  for (float& x : v) x = static_cast<float>(x / scale);
}

}  // namespace minfer::server
