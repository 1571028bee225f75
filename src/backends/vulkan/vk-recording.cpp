#include "backends/vulkan/vk-recording.h"

#include <algorithm>

namespace minfer::vulkan {

Expected<Bound> Recording::bind(int id) const {
  const Node& n = g.nodes[static_cast<size_t>(id)];
  const void* p = addrs_[static_cast<size_t>(id)];
  if (n.op == Op::kWeight) {
    auto it = m.weights.find({n.data, n.n_bytes()});
    p = it == m.weights.end() ? nullptr : reinterpret_cast<const void*>(it->second);
  }
  auto [a, off] = m.resolve(p);
  if (!a || off % 4 != 0 || off + n.n_bytes() > a->size)
    return make_error("vulkan: node '{}' has no device memory", n.name);
  const size_t base = off - off % m.offset_align;
  const size_t range = std::min(a->capacity - base, (off - base + std::max<size_t>(n.n_bytes(), 4) + 3) & ~size_t{3});
  if (range > m.max_range)
    return make_error("vulkan {}: node '{}' ({} bytes) is over the device's storage buffer range ({} bytes)",
                      m.desc.name, n.name, n.n_bytes(), m.max_range);
  return Bound{{a->buffer, base, range}, static_cast<uint32_t>((off - base) / 4)};
}

void Recording::dispatch(const Pipeline& pl, const VkDescriptorBufferInfo* bi, const uint32_t* pc, uint32_t groups) {
  // First the host's writes (mapped memory, RoPE tables) and staged copies, then each
  // dispatch's reads of what the one before wrote.
  const VkAccessFlags rw = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  if (first_)
    VulkanBackend::Impl::barrier(cb_, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, rw);
  else
    VulkanBackend::Impl::barrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, rw);
  first_ = false;
  VkWriteDescriptorSet w[kBindings]{};
  for (uint32_t i = 0; i < kBindings; ++i) {
    w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w[i].dstBinding = i;
    w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &bi[i];
  }
  vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pl.pipeline);
  m.push_descriptor(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout, 0, kBindings, w);
  vkCmdPushConstants(cb_, pl.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushWords * 4, pc);
  const uint32_t gx = std::min<uint32_t>(groups, 65535), gy = (groups + 65534) / 65535;
  vkCmdDispatch(cb_, gx, gy, 1);
  ++m.dispatches;
}

}  // namespace minfer::vulkan
