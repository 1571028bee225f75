// The process's Vulkan instance and its devices. The instance is created on first use and
// lives to exit; a machine without a loader or driver gives an empty list, not an error.
//
//   for (const VkDeviceDesc& d : vk_devices()) printf("%s: %s\n", d.name.c_str(), d.description.c_str());
//   VkPhysicalDevice pd = vk_devices()[0].handle;   // "Vulkan0"
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace minfer::vulkan {

struct VkDeviceDesc {
  std::string name;         // "Vulkan0", "Vulkan1", ... in the loader's order
  std::string description;  // the driver's device name: "llvmpipe (LLVM 15.0.6, 256 bits)"
  uint64_t memory_bytes = 0;  // the largest device-local heap
  bool software = false;    // a CPU implementation (lavapipe / llvmpipe)
  VkPhysicalDevice handle = VK_NULL_HANDLE;
};

VkInstance vk_instance();  // VK_NULL_HANDLE when no loader or driver answers
const std::vector<VkDeviceDesc>& vk_devices();

}  // namespace minfer::vulkan
