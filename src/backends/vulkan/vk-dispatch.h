// Per node, the dispatch that runs it (internal to backends/vulkan): its shader, bindings,
// push constants and workgroup count, in the layout shaders/<name>.comp declares. A new op
// is one case in vk-dispatch.cpp's kernel_for() and, for a new shader, one function there.
//
//   Recording rec(m, cb, g, addrs);                       // vk-recording.h
//   for (int id : nodes)
//     if (Status s = record_node(rec, id, rope_off); !s) return s;
#pragma once

#include "backends/vulkan/vk-recording.h"
#include "backends/vulkan/vk-rope-table.h"

namespace minfer::vulkan {

// Records node id's dispatches into rec: none for a view (reshape), else one (a matmul of
// rounded activations: act_round's first; a weight over the storage buffer range: one per row
// range). rope_off: fill_rope_tables()'s offsets for the split.
Status record_node(Recording& rec, int id, const RopeOffsets& rope_off);

}  // namespace minfer::vulkan
