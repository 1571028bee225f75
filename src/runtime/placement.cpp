#include "runtime/placement.h"

#include <algorithm>
#include <charconv>

namespace minfer {

int64_t node_layer(std::string_view name, int64_t n_layer) {
  if (name.starts_with("inp_")) return -1;
  if (!name.starts_with("blk.")) return n_layer;
  int64_t il = -1;
  const char* b = name.data() + 4;
  const auto [p, ec] = std::from_chars(b, name.data() + name.size(), il);
  if (ec != std::errc() || p == b || p == name.data() + name.size() || *p != '.' || il < 0 || il >= n_layer) return n_layer;
  return il;
}

int64_t LayerPlacement::n_offloaded() const {
  if (n_devices <= 0 || n_gpu_layers == 0) return 0;
  return n_gpu_layers == kAllLayers ? n_layer : std::min<int64_t>(n_gpu_layers, n_layer);
}

bool LayerPlacement::output_offloaded() const {
  return n_devices > 0 && (n_gpu_layers == kAllLayers || n_gpu_layers > n_layer);
}

int LayerPlacement::device_of_layer(int64_t il) const {
  const int64_t first = n_layer - n_offloaded();  // first offloaded repeating layer
  const int64_t count = n_offloaded() + (output_offloaded() ? 1 : 0);
  if (count == 0 || il < first || il > n_layer || (il == n_layer && !output_offloaded())) return -1;
  return static_cast<int>((il - first) * n_devices / count);
}

int LayerPlacement::device_of(std::string_view name) const { return device_of_layer(node_layer(name, n_layer)); }

}  // namespace minfer
