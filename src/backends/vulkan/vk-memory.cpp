#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/vulkan/vk-device.h"

namespace minfer::vulkan {

void VulkanBackend::Impl::release(Allocation& a) {
  if (a.mapped) vkUnmapMemory(device, a.memory);
  vkDestroyBuffer(device, a.buffer, nullptr);
  vkFreeMemory(device, a.memory, nullptr);
}

int VulkanBackend::Impl::memory_type(uint32_t bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
  return -1;
}

Expected<Allocation> VulkanBackend::Impl::make_buffer(size_t bytes, bool host) {
  Allocation a;
  a.size = bytes;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = (std::max<size_t>(bytes, 16) + 15) & ~size_t{15};
  a.capacity = bi.size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (Status s = check(vkCreateBuffer(device, &bi, nullptr, &a.buffer), "vkCreateBuffer"); !s) return s.error();
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device, a.buffer, &req);
  const VkMemoryPropertyFlags visible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Staging: host-visible, coherent. Device buffers: device-local memory the host can map
  // when it is the device's main memory (integrated GPUs, resizable BAR, lavapipe), written
  // and read with memcpy; else (a discrete GPU's 256 MiB BAR window) device-only memory
  // through a staging buffer. An allocation the mappable kind cannot hold retries device-only.
  std::vector<int> types;
  if (host) {
    types.push_back(memory_type(req.memoryTypeBits, visible));
  } else {
    const int mappable = memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | visible);
    if (mappable >= 0 && mem.memoryHeaps[mem.memoryTypes[mappable].heapIndex].size * 2 >= desc.memory_bytes)
      types.push_back(mappable);
    types.push_back(memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT));
  }
  Status last = make_error("vulkan {}: no memory type for a {} buffer of {} bytes", desc.name,
                           host ? "staging" : "device", bytes);
  int type = -1;
  for (int t : types) {
    if (t < 0) continue;
    VkMemoryAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = static_cast<uint32_t>(t);
    last = check(vkAllocateMemory(device, &ai, nullptr, &a.memory), "vkAllocateMemory");
    if (last) {
      type = t;
      break;
    }
  }
  if (type < 0) {
    vkDestroyBuffer(device, a.buffer, nullptr);
    return make_error("{} ({} bytes)", last.error().message, bytes);
  }
  vkBindBufferMemory(device, a.buffer, a.memory, 0);
  if ((mem.memoryTypes[type].propertyFlags & visible) == visible) {
    if (Status s = check(vkMapMemory(device, a.memory, 0, VK_WHOLE_SIZE, 0, &a.mapped), "vkMapMemory"); !s) {
      release(a);
      return s.error();
    }
  }
  return a;
}

Status VulkanBackend::Impl::remake(Allocation& a, size_t bytes, bool host) {
  drop_recorded();
  if (a.buffer) release(a);
  a = {};
  auto made = make_buffer(bytes, host);
  if (!made) return made.error();
  a = *made;
  return {};
}

std::pair<Allocation*, size_t> VulkanBackend::Impl::resolve(const void* p) {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  auto it = allocs.upper_bound(u);
  if (it == allocs.begin()) return {nullptr, 0};
  --it;
  if (u - it->first > it->second.size) return {nullptr, 0};
  return {&it->second, u - it->first};
}

void VulkanBackend::Impl::bad_address(const char* what, const void* p, size_t n) const {
  std::fprintf(stderr, "minfer: vulkan %s: %s of %zu bytes at %p, outside every buffer of this backend\n",
               desc.name.c_str(), what, n, p);
  std::abort();
}

uintptr_t VulkanBackend::Impl::add(Allocation a) {
  const uintptr_t base = next;
  next += (a.size / kWindow + 1) * kWindow;
  allocs.emplace(base, a);
  return base;
}

Status VulkanBackend::Impl::staged(Allocation& a, size_t off, void* host, size_t n, bool to_device) {
  auto st = make_buffer(n, true);
  if (!st) return st.error();
  if (to_device) std::memcpy(st->mapped, host, n);
  Status s = begin();
  if (s) {
    VkBufferCopy c{};
    c.size = n;
    if (to_device) {
      c.dstOffset = off;
      vkCmdCopyBuffer(cmd, st->buffer, a.buffer, 1, &c);
    } else {
      c.srcOffset = off;
      vkCmdCopyBuffer(cmd, a.buffer, st->buffer, 1, &c);
    }
    s = submit_and_wait();
  }
  if (s && !to_device) std::memcpy(host, st->mapped, n);
  release(*st);
  return s;
}

}  // namespace minfer::vulkan
