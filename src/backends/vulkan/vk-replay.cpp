#include "backends/vulkan/vk-replay.h"

#include <bit>

#include "backends/vulkan/vk-device.h"

namespace minfer::vulkan {

uint64_t split_fingerprint(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs) {
  uint64_t fp = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { fp = (fp ^ v) * 1099511628211ull; };
  mix(reinterpret_cast<uintptr_t>(&g));
  for (int id : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    mix(static_cast<uint64_t>(id));
    mix(static_cast<uint64_t>(n.op));
    mix(static_cast<uint64_t>(n.type));
    mix(reinterpret_cast<uintptr_t>(addrs[static_cast<size_t>(id)]));
    for (int64_t e : n.ne) mix(static_cast<uint64_t>(e));
    const OpParams& q = n.params;
    for (float f : {q.eps, q.attn_scale, q.rope_freq_base, q.rope_freq_scale, q.attn_softcap, q.scale})
      mix(std::bit_cast<uint32_t>(f));
    for (int32_t i : {q.n_head_kv, q.n_rot, q.attn_window, q.attn_ring, static_cast<int32_t>(q.rope_mode),
                      static_cast<int32_t>(q.attn_ranges), q.block, q.top_k, static_cast<int32_t>(q.moe_norm)})
      mix(static_cast<uint32_t>(i));
    for (int src : n.src) {
      const Node& sn = g.nodes[static_cast<size_t>(src)];
      mix(reinterpret_cast<uintptr_t>(sn.op == Op::kWeight ? sn.data : addrs[static_cast<size_t>(src)]));
      mix(static_cast<uint64_t>(sn.type));
      for (int64_t e : sn.ne) mix(static_cast<uint64_t>(e));
    }
  }
  return fp;
}

void VulkanBackend::Impl::drop_recorded() {
  for (auto& [fp, c] : recorded) vkFreeCommandBuffers(device, pool, 1, &c);
  recorded.clear();
  recorded_dispatches.clear();
}

}  // namespace minfer::vulkan
