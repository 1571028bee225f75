#include "viz/node-stats.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/fp16.h"

namespace minfer::viz {

namespace {

template <typename Get>
NodeStats compute(int64_t n, int max_values, Get get) {
  NodeStats s;
  s.numeric = true;
  s.n = n;
  s.stride = n > max_values ? (n + max_values - 1) / max_values : 1;
  double sum = 0, abs_sum = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  int64_t finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = get(i);
    if (!std::isfinite(v)) {
      ++s.n_nonfinite;
      continue;
    }
    ++finite;
    sum += v;
    abs_sum += std::fabs(v);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  if (finite > 0) {
    s.min = lo;
    s.max = hi;
    s.mean = sum / static_cast<double>(finite);
    s.absmean = abs_sum / static_cast<double>(finite);
  }
  for (int64_t i = 0; i < n; i += s.stride) s.values.push_back(static_cast<float>(get(i)));
  return s;
}

}  // namespace

NodeStats node_stats(const Node& node, const void* data, int max_values) {
  const int64_t n = node.n_elements();
  if (!data || n <= 0) return {};
  switch (node.type) {
    case DType::F32: {
      const auto* p = static_cast<const float*>(data);  // [n]
      return compute(n, max_values, [p](int64_t i) { return static_cast<double>(p[i]); });
    }
    case DType::F16: {
      const auto* p = static_cast<const uint16_t*>(data);  // [n]
      return compute(n, max_values, [p](int64_t i) { return static_cast<double>(fp16_to_fp32(p[i])); });
    }
    case DType::BF16: {
      const auto* p = static_cast<const uint16_t*>(data);  // [n]
      return compute(n, max_values, [p](int64_t i) { return static_cast<double>(bf16_to_fp32(p[i])); });
    }
    case DType::I32: {
      const auto* p = static_cast<const int32_t*>(data);  // [n]
      return compute(n, max_values, [p](int64_t i) { return static_cast<double>(p[i]); });
    }
    default:
      return {};
  }
}

}  // namespace minfer::viz
