// The device behind one VulkanBackend (internal to backends/vulkan): its queue, its memory
// behind opaque addresses, the pipelines, the one-time and the recorded command buffers.
// Defined by concern: vk-device.cpp (the device, command buffers, submission), vk-memory.cpp
// (buffers, addresses, staging), vk-pipeline.cpp (shaders to pipelines), vk-replay.cpp
// (recorded splits).
//
//   auto m = VulkanBackend::Impl::open(vk_devices()[0]);   // "Vulkan0", one compute queue
//   if (!m) return m.error();
//   auto a = (*m)->make_buffer(4096, false);                // device memory
//   if (!a) return a.error();
//   void* p = reinterpret_cast<void*>((*m)->add(*a));       // its opaque address
//   if (Status s = (*m)->begin(); !s) return s;             // the shared one-time buffer
//   vkCmdFillBuffer((*m)->cmd, a->buffer, 0, VK_WHOLE_SIZE, 0);
//   if (Status s = (*m)->submit_and_wait(); !s) return s;
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "backends/vulkan/vk-instance.h"
#include "backends/vulkan/vk-kernels.h"
#include "backends/vulkan/vulkan-backend.h"
#include "core/status.h"

namespace minfer::vulkan {

// Opaque addresses handed to the scheduler: each allocation owns a window of this many bytes
// (or more, rounded up) in a range no host pointer uses; an address resolves to (buffer, offset).
inline constexpr uintptr_t kAddressBase = uintptr_t{1} << 46;
inline constexpr uintptr_t kWindow = uintptr_t{1} << 30;

struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  size_t size = 0;          // as asked
  size_t capacity = 0;      // the VkBuffer's size: size rounded up to 16 bytes
  void* mapped = nullptr;  // host-visible memory, mapped for the allocation's lifetime
};

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

struct VulkanBackend::Impl {
  VkDeviceDesc desc;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties mem{};
  PFN_vkCmdPushDescriptorSetKHR push_descriptor = nullptr;
  std::map<uintptr_t, Allocation> allocs;  // by window start
  uintptr_t next = kAddressBase;
  // By (kernel, specialization constant 0 or -1 for none), built on first use.
  std::map<std::pair<Kernel, int>, Pipeline> pipelines;
  // Host tensor (its bytes, their count) -> its device copy. Weights are immutable model memory
  // that outlives the backend's graphs (one backend per Context, one model per Context).
  std::map<std::pair<const void*, size_t>, uintptr_t> weights;
  std::mutex mu;  // one submission at a time (the scheduler may run sessions on threads)
  std::mutex upload_mu;  // one weight upload pass (prepare) at a time
  Allocation scratch;  // rounded matmul activations (act_round), grown to the largest one
  // RoPE's cos and sin, computed on the host before each submission (rope.comp), host-visible.
  Allocation rope_tab;

  // vk-device.cpp: the device on d (Vulkan 1.2, 256 invocations per workgroup, a compute
  // queue, VK_KHR_push_descriptor), its command pool, one-time command buffer and fence.
  static Expected<std::unique_ptr<Impl>> open(const VkDeviceDesc& d);
  ~Impl();

  Status check(VkResult r, const char* what) const;
  Status allocate(VkCommandBuffer& c);  // a primary command buffer from the pool
  // Starts recording into c (the shared one-time buffer, or a split's kept one).
  Status begin(VkCommandBuffer c, bool one_time);
  Status begin() { return begin(cmd, true); }
  // A global memory barrier: writes of `src` by the `from` stages visible to `dst` of `to`.
  static void barrier(VkCommandBuffer c, VkPipelineStageFlags from, VkAccessFlags src, VkPipelineStageFlags to,
                      VkAccessFlags dst);
  // Ends recording: the device's writes made visible to the host before it reads (the fence
  // alone does not).
  Status finish(VkCommandBuffer c);
  // One submission of a recorded buffer, and the wait for it.
  Status submit(VkCommandBuffer c);
  Status submit_and_wait();

  // vk-memory.cpp.
  void release(Allocation& a);
  int memory_type(uint32_t bits, VkMemoryPropertyFlags want) const;
  Expected<Allocation> make_buffer(size_t bytes, bool host);
  // a (scratch, rope_tab) released and made again of `bytes`: recorded splits bind it, so they go.
  Status remake(Allocation& a, size_t bytes, bool host);
  // The allocation holding address p, and p's offset in it.
  std::pair<Allocation*, size_t> resolve(const void* p);
  [[noreturn]] void bad_address(const char* what, const void* p, size_t n) const;
  uintptr_t add(Allocation a);  // a's window: its opaque address
  // Host <-> device copy for memory the host cannot map: a staging buffer and one submission.
  Status staged(Allocation& a, size_t off, void* host, size_t n, bool to_device);

  // vk-pipeline.cpp: the pipeline of kernel k; spec >= 0 sets the shader's specialization
  // constant 0 (matmul: the weight type, so that each pipeline compiles one type's
  // dequantization).
  Expected<Pipeline*> pipeline(Kernel k, int spec = -1);
  Status build_pipeline(Kernel k, int spec, Pipeline& p);

  // vk-replay.cpp: splits recorded once and replayed (what CUDA graphs do for a decode step):
  // by a fingerprint of the graph, its nodes and every address they read and write. Any freed
  // buffer or a new scratch drops them all (a recorded buffer names the VkBuffers it binds).
  std::map<uint64_t, VkCommandBuffer> recorded;
  std::map<uint64_t, int64_t> recorded_dispatches;  // dispatches in each, counted per replay
  int64_t replays = 0;
  void drop_recorded();

  // Software devices (lavapipe) compute fma() as a product and a sum; with shaderFloat64 the
  // shaders that must round as the CPU does use their exact variants (CMakeLists.txt).
  bool exact = false;
  int64_t submissions = 0;
  int64_t dispatches = 0;
  uint64_t bytes_to_device = 0, bytes_to_host = 0;  // write() and read()
  size_t offset_align = 256;           // minStorageBufferOffsetAlignment
  size_t max_range = size_t{1} << 27;  // maxStorageBufferRange
};

}  // namespace minfer::vulkan
