#include "backends/vulkan/vk-instance.h"

#include <algorithm>
#include <mutex>

namespace minfer::vulkan {
namespace {

struct Instance {
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<VkDeviceDesc> devices;

  Instance() {
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "minfer";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ci.pApplicationInfo = &app;
    if (vkCreateInstance(&ci, nullptr, &instance) != VK_SUCCESS) {
      instance = VK_NULL_HANDLE;
      return;
    }
    uint32_t n = 0;
    if (vkEnumeratePhysicalDevices(instance, &n, nullptr) != VK_SUCCESS || n == 0) return;
    std::vector<VkPhysicalDevice> pds(n);
    if (vkEnumeratePhysicalDevices(instance, &n, pds.data()) != VK_SUCCESS) return;
    for (uint32_t i = 0; i < n; ++i) {
      VkPhysicalDeviceProperties p{};
      vkGetPhysicalDeviceProperties(pds[i], &p);
      VkPhysicalDeviceMemoryProperties m{};
      vkGetPhysicalDeviceMemoryProperties(pds[i], &m);
      VkDeviceDesc d;
      d.name = "Vulkan" + std::to_string(devices.size());
      d.description = p.deviceName;
      for (uint32_t h = 0; h < m.memoryHeapCount; ++h)
        if (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d.memory_bytes = std::max<uint64_t>(d.memory_bytes, m.memoryHeaps[h].size);
      d.software = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
      d.handle = pds[i];
      devices.push_back(std::move(d));
    }
  }
};

// Never destroyed: backends owned by static objects may outlive any destruction order.
Instance& get() {
  static Instance* inst = new Instance;
  return *inst;
}

}  // namespace

VkInstance vk_instance() { return get().instance; }
const std::vector<VkDeviceDesc>& vk_devices() { return get().devices; }

}  // namespace minfer::vulkan
