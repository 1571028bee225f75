// RoPE's cos and sin tables (internal to backends/vulkan): computed on the host before each
// submission into VulkanBackend::Impl::rope_tab, which shaders/rope.comp reads at the offset
// its push constants give.
//
//   auto rope_off = fill_rope_tables(m, g, nodes, addrs);   // with m.mu held
//   if (!rope_off) return rope_off.error();
//   pc[12] = rope_off->at(id);                               // this rope node's table
#pragma once

#include <cstdint>
#include <map>
#include <span>

#include "backends/vulkan/vk-device.h"
#include "graph/graph.h"

namespace minfer::vulkan {

using RopeOffsets = std::map<int, uint32_t>;  // rope node id -> float offset in rope_tab

// Per rope node an offset into m.rope_tab (nodes of the same positions and parameters share
// one), filled now from the positions the host wrote, as the CPU backend computes them
// (cpu/ops-rope.cpp: the power by repeated f32 products, libm's cos and sin). rope_tab grows
// (dropping the recorded splits) where the tables need more room.
Expected<RopeOffsets> fill_rope_tables(VulkanBackend::Impl& m, const Graph& g, std::span<const int> nodes,
                                       std::span<void* const> addrs);

}  // namespace minfer::vulkan
