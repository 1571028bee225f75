// What the visualizer shows of one computed tensor: min / max / mean / mean |x| over every
// element, and a preview of at most `max_values` of them (every stride-th element), for F32,
// F16, BF16 and I32 results. Other types (quantized weights are never computed) have no stats.
//
//   NodeStats s = node_stats(node, host_data);   // from a Context observer
//   if (s.numeric) plot(s.values);               // s.values[i] = element i * s.stride
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace minfer::viz {

struct NodeStats {
  bool numeric = false;
  int64_t n = 0;           // elements
  double min = 0, max = 0, mean = 0, absmean = 0;
  int64_t stride = 1;      // values[i] is element i * stride
  std::vector<float> values;
  int64_t n_nonfinite = 0; // NaN / inf elements (not in the statistics)
};

NodeStats node_stats(const Node& n, const void* host_data, int max_values = 64);

}  // namespace minfer::viz
