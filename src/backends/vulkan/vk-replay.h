// Recorded splits (internal to backends/vulkan): the fingerprint a split's command buffer is
// kept under in VulkanBackend::Impl::recorded, replayed while it stays the same.
//
//   const uint64_t fp = split_fingerprint(g, nodes, addrs);
//   if (auto it = m.recorded.find(fp); it != m.recorded.end()) return m.submit(it->second);
#pragma once

#include <cstdint>
#include <span>

#include "graph/graph.h"

namespace minfer::vulkan {

// FNV-1a over the graph's identity and, per node, its id, op, type, address, shape and
// parameters, and its sources' addresses (a weight's host bytes), types and shapes.
uint64_t split_fingerprint(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs);

}  // namespace minfer::vulkan
