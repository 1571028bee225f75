#include "backends/vulkan/vk-device.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace minfer::vulkan {
namespace {

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    default: return "VkResult";
  }
}

}  // namespace

Expected<std::unique_ptr<VulkanBackend::Impl>> VulkanBackend::Impl::open(const VkDeviceDesc& d) {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(d.handle, &props);
  if (props.apiVersion < VK_API_VERSION_1_2)
    return make_error("vulkan {} ({}): Vulkan {}.{} (the shaders need 1.2)", d.name, d.description,
                      VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
  if (props.limits.maxComputeWorkGroupInvocations < 256)
    return make_error("vulkan {} ({}): {} invocations per workgroup (the shaders use 256)", d.name, d.description,
                      props.limits.maxComputeWorkGroupInvocations);
  auto impl = std::make_unique<Impl>();
  impl->desc = d;
  impl->offset_align = std::max<size_t>(4, props.limits.minStorageBufferOffsetAlignment);
  impl->max_range = props.limits.maxStorageBufferRange;
  vkGetPhysicalDeviceMemoryProperties(d.handle, &impl->mem);
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d.handle, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(d.handle, &nq, qf.data());
  bool found = false;
  for (uint32_t i = 0; i < nq && !found; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) impl->queue_family = i, found = true;
  if (!found) return make_error("vulkan {} ({}): no compute queue", d.name, d.description);
  uint32_t ne = 0;
  vkEnumerateDeviceExtensionProperties(d.handle, nullptr, &ne, nullptr);
  std::vector<VkExtensionProperties> exts(ne);
  vkEnumerateDeviceExtensionProperties(d.handle, nullptr, &ne, exts.data());
  bool push = false;
  for (const auto& e : exts) push |= std::strcmp(e.extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0;
  if (!push) return make_error("vulkan {} ({}): needs {}", d.name, d.description, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = impl->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  const char* ext_names[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = 1;
  di.ppEnabledExtensionNames = ext_names;
  VkPhysicalDeviceFeatures feats{};
  vkGetPhysicalDeviceFeatures(d.handle, &feats);
  VkPhysicalDeviceFeatures want{};
  want.shaderFloat64 = feats.shaderFloat64;
  di.pEnabledFeatures = &want;
  impl->exact = d.software && feats.shaderFloat64;
  if (Status s = impl->check(vkCreateDevice(d.handle, &di, nullptr, &impl->device), "vkCreateDevice"); !s)
    return s.error();
  vkGetDeviceQueue(impl->device, impl->queue_family, 0, &impl->queue);
  impl->push_descriptor = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
      vkGetDeviceProcAddr(impl->device, "vkCmdPushDescriptorSetKHR"));
  if (!impl->push_descriptor) return make_error("vulkan {}: vkCmdPushDescriptorSetKHR is missing", d.name);
  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = impl->queue_family;
  if (Status s = impl->check(vkCreateCommandPool(impl->device, &pi, nullptr, &impl->pool), "vkCreateCommandPool"); !s)
    return s.error();
  if (Status s = impl->allocate(impl->cmd); !s) return s.error();
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  if (Status s = impl->check(vkCreateFence(impl->device, &fi, nullptr, &impl->fence), "vkCreateFence"); !s)
    return s.error();
  return impl;
}

VulkanBackend::Impl::~Impl() {
  if (!device) return;
  vkDeviceWaitIdle(device);
  drop_recorded();
  for (auto& [base, a] : allocs) release(a);
  if (scratch.buffer) release(scratch);
  if (rope_tab.buffer) release(rope_tab);
  for (auto& [key, p] : pipelines) {  // vkDestroy* of a null handle does nothing
    vkDestroyPipeline(device, p.pipeline, nullptr);
    vkDestroyPipelineLayout(device, p.layout, nullptr);
    vkDestroyDescriptorSetLayout(device, p.set_layout, nullptr);
  }
  if (fence) vkDestroyFence(device, fence, nullptr);
  if (pool) vkDestroyCommandPool(device, pool, nullptr);
  vkDestroyDevice(device, nullptr);
}

Status VulkanBackend::Impl::check(VkResult r, const char* what) const {
  if (r == VK_SUCCESS) return {};
  return make_error("vulkan {}: {} failed: {} ({})", desc.name, what, vk_result_name(r), static_cast<int>(r));
}

Status VulkanBackend::Impl::allocate(VkCommandBuffer& c) {
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  return check(vkAllocateCommandBuffers(device, &ai, &c), "vkAllocateCommandBuffers");
}

Status VulkanBackend::Impl::begin(VkCommandBuffer c, bool one_time) {
  if (Status s = check(vkResetCommandBuffer(c, 0), "vkResetCommandBuffer"); !s) return s;
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
  return check(vkBeginCommandBuffer(c, &bi), "vkBeginCommandBuffer");
}

void VulkanBackend::Impl::barrier(VkCommandBuffer c, VkPipelineStageFlags from, VkAccessFlags src,
                                  VkPipelineStageFlags to, VkAccessFlags dst) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = src;
  mb.dstAccessMask = dst;
  vkCmdPipelineBarrier(c, from, to, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

Status VulkanBackend::Impl::finish(VkCommandBuffer c) {
  barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  return check(vkEndCommandBuffer(c), "vkEndCommandBuffer");
}

Status VulkanBackend::Impl::submit(VkCommandBuffer c) {
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &c;
  if (Status s = check(vkResetFences(device, 1, &fence), "vkResetFences"); !s) return s;
  if (Status s = check(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit"); !s) return s;
  ++submissions;
  return check(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

Status VulkanBackend::Impl::submit_and_wait() {
  if (Status s = finish(cmd); !s) return s;
  return submit(cmd);
}

}  // namespace minfer::vulkan
