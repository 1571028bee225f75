// One split being recorded into a command buffer (internal to backends/vulkan): its tensors
// bound by node id, and its dispatches, each after a barrier on what the one before wrote.
//
//   Recording rec(m, cb, g, addrs);                 // m.mu held, cb begun
//   auto x = rec.bind(id);                          // x->info: a binding; x->elem: the offset
//   if (!x) return x.error();
//   rec.dispatch(**m.pipeline(Kernel::kScale), bindings, push_constants, groups);
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>

#include "backends/vulkan/vk-device.h"
#include "graph/graph.h"

namespace minfer::vulkan {

// Where a node's data lives: its buffer, bound from the aligned offset at or below it for
// the tensor's bytes (within maxStorageBufferRange), and the element offset left over.
struct Bound {
  VkDescriptorBufferInfo info;
  uint32_t elem = 0;
};

class Recording {
 public:
  Recording(VulkanBackend::Impl& dev, VkCommandBuffer cb, const Graph& graph, std::span<void* const> addrs)
      : m(dev), g(graph), cb_(cb), addrs_(addrs) {}

  // Node id's binding (a weight: its device copy); an error where it has no device memory or
  // is over the device's storage buffer range.
  Expected<Bound> bind(int id) const;
  // One dispatch: a barrier after the previous one (each reads what the one before wrote), the
  // pipeline, its buffers (kBindings), its push constants (kPushWords), its workgroups (past
  // 65535: in rows of 65535).
  void dispatch(const Pipeline& pl, const VkDescriptorBufferInfo* bi, const uint32_t* pc, uint32_t groups);

  VulkanBackend::Impl& m;
  const Graph& g;

 private:
  VkCommandBuffer cb_;
  std::span<void* const> addrs_;
  bool first_ = true;
};

}  // namespace minfer::vulkan
