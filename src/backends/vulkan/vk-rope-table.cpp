#include "backends/vulkan/vk-rope-table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

namespace minfer::vulkan {

Expected<RopeOffsets> fill_rope_tables(VulkanBackend::Impl& m, const Graph& g, std::span<const int> nodes,
                                       std::span<void* const> addrs) {
  RopeOffsets rope_off;
  struct Key {
    const void* pos;
    int64_t n_tok;
    int n_rot;
    float base, scale;
    const void* factors;
    bool operator<(const Key& o) const {
      return std::tie(pos, n_tok, n_rot, base, scale, factors) < std::tie(o.pos, o.n_tok, o.n_rot, o.base, o.scale, o.factors);
    }
  };
  std::map<Key, uint32_t> seen;
  std::vector<std::pair<Key, uint32_t>> fills;
  size_t total = 0;
  for (int id : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    if (n.op != Op::kRope) continue;
    const Node* f = n.src.size() > 2 ? &g.nodes[static_cast<size_t>(n.src[2])] : nullptr;
    const Key k{addrs[static_cast<size_t>(n.src[1])], n.ne[2], n.params.n_rot, n.params.rope_freq_base,
                n.params.rope_freq_scale, f ? f->data : nullptr};
    auto it = seen.find(k);
    if (it == seen.end()) {
      it = seen.emplace(k, static_cast<uint32_t>(total)).first;
      fills.emplace_back(k, static_cast<uint32_t>(total));
      total += static_cast<size_t>(k.n_tok) * static_cast<size_t>(k.n_rot / 2) * 2;
    }
    rope_off[id] = it->second;
  }
  if (total * 4 > m.rope_tab.size)
    if (Status s = m.remake(m.rope_tab, std::max<size_t>(total * 4, 4096), true); !s) return s.error();
  std::vector<int32_t> pos;
  for (const auto& [k, off] : fills) {
    pos.resize(static_cast<size_t>(k.n_tok));
    auto [pa, poff] = m.resolve(k.pos);
    if (!pa || poff + pos.size() * 4 > pa->size) return make_error("vulkan: rope positions have no device memory");
    if (pa->mapped) std::memcpy(pos.data(), static_cast<const char*>(pa->mapped) + poff, pos.size() * 4);
    else if (Status st = m.staged(*pa, poff, pos.data(), pos.size() * 4, false); !st) return st.error();
    // Counted as copies between the host and the device: the positions read, the table written.
    m.bytes_to_host += pos.size() * 4;
    m.bytes_to_device += static_cast<uint64_t>(k.n_tok) * static_cast<uint64_t>(k.n_rot / 2) * 8;
    const int64_t half = k.n_rot / 2;
    const float theta_scale = std::pow(k.base, -2.0f / static_cast<float>(k.n_rot));
    const float* factors = static_cast<const float*>(k.factors);
    float* tab = static_cast<float*>(m.rope_tab.mapped) + off;
    for (int64_t t = 0; t < k.n_tok; ++t) {
      float theta = static_cast<float>(pos[static_cast<size_t>(t)]);
      float* ft = tab + t * half * 2;
      for (int64_t i = 0; i < half; ++i) {
        const float th = k.scale * (factors ? theta / factors[i] : theta);
        ft[i] = std::cos(th);
        ft[half + i] = std::sin(th);
        theta *= theta_scale;
      }
    }
  }
  return rope_off;
}

}  // namespace minfer::vulkan
