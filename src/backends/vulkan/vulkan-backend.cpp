#include "backends/vulkan/vulkan-backend.h"

#include <vulkan/vulkan.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "backends/vulkan/vk-instance.h"

namespace minfer::vulkan {

std::string_view embedded_file(std::string_view name);  // shaders-assets.cpp (generated)

namespace {

// Opaque addresses handed to the scheduler: each allocation owns a window of this many bytes
// (or more, rounded up) in a range no host pointer uses; an address resolves to (buffer, offset).
constexpr uintptr_t kAddressBase = uintptr_t{1} << 46;
constexpr uintptr_t kWindow = uintptr_t{1} << 30;
// The compute shaders (shaders/<name>.comp), one pipeline each, built on first use.
enum class Kernel : uint8_t {
  kBinary, kScale, kRmsNorm, kUnary, kRope, kMatmul, kGetRows, kKvStore, kAttn, kActRound, kMoe, kHadamard, kCount
};
constexpr const char* kKernelNames[] = {"binary",   "scale",    "rms_norm", "unary",     "rope", "matmul",
                                        "get_rows", "kv_store", "attn",     "act_round", "moe", "hadamard"};
static_assert(std::size(kKernelNames) == static_cast<size_t>(Kernel::kCount));

// Storage buffers per dispatch: src0, src1, dst, src2, src3 (a shader declares those it reads).
constexpr uint32_t kBindings = 5;
// Push constants per dispatch: 32 words (Vulkan guarantees 128 bytes).
constexpr uint32_t kPushWords = 32;

// The KV cache types the kv_store and attn shaders read and write (their type numbers are
// dequant.glsl's: 0 F32, 1 F16, 2 Q8_0, 3 Q4_0). A cache row is written in whole 32-bit words:
// f16 rows of an even length, quantized rows of whole pairs of blocks.
bool kv_cache_ok(const Node& c) {
  switch (c.type) {
    case DType::F32: return true;
    case DType::F16: return c.ne[0] % 2 == 0;
    case DType::Q8_0:
    case DType::Q4_0: return c.ne[0] % 64 == 0;
    default: return false;
  }
}

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

// How shaders/act_round.comp rounds a matmul's activations for this weight type: as the CPU
// backend does before its dot products (cpu/kernels.h): 0 not at all (F32), 1 f16, 2 bf16,
// 3 Q8_0 blocks, 5 Q8_1 blocks (Q8_0's values and each block's sum), 4 Q8_K blocks.
uint32_t act_round_mode(DType weight) {
  switch (weight) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 2;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL: return 3;
    case DType::Q4_1:
    case DType::Q5_1: return 5;
    default: return 4;  // Q2_K .. Q6_K, IQ4_XS
  }
}

// shaders/dequant.glsl's type numbers, in its order; -1: a type it does not read.
int dequant_type(DType t) {
  constexpr DType kTypes[] = {DType::F32,  DType::F16,  DType::Q8_0, DType::Q4_0, DType::BF16,
                              DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K,
                              DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  for (size_t i = 0; i < std::size(kTypes); ++i)
    if (kTypes[i] == t) return static_cast<int>(i);
  return -1;
}

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

  ~Impl() {
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

  void release(Allocation& a) {
    if (a.mapped) vkUnmapMemory(device, a.memory);
    vkDestroyBuffer(device, a.buffer, nullptr);
    vkFreeMemory(device, a.memory, nullptr);
  }

  Status check(VkResult r, const char* what) const {
    if (r == VK_SUCCESS) return {};
    return make_error("vulkan {}: {} failed: {} ({})", desc.name, what, vk_result_name(r), static_cast<int>(r));
  }

  int memory_type(uint32_t bits, VkMemoryPropertyFlags want) const {
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
    return -1;
  }

  Expected<Allocation> make_buffer(size_t bytes, bool host) {
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

  // The allocation holding address p, and p's offset in it.
  std::pair<Allocation*, size_t> resolve(const void* p) {
    const uintptr_t u = reinterpret_cast<uintptr_t>(p);
    auto it = allocs.upper_bound(u);
    if (it == allocs.begin()) return {nullptr, 0};
    --it;
    if (u - it->first > it->second.size) return {nullptr, 0};
    return {&it->second, u - it->first};
  }

  [[noreturn]] void bad_address(const char* what, const void* p, size_t n) const {
    std::fprintf(stderr, "minfer: vulkan %s: %s of %zu bytes at %p, outside every buffer of this backend\n",
                 desc.name.c_str(), what, n, p);
    std::abort();
  }

  uintptr_t add(Allocation a) {
    const uintptr_t base = next;
    next += (a.size / kWindow + 1) * kWindow;
    allocs.emplace(base, a);
    return base;
  }

  // Starts recording into c (the shared one-time buffer, or a split's kept one).
  Status begin(VkCommandBuffer c, bool one_time) {
    if (Status s = check(vkResetCommandBuffer(c, 0), "vkResetCommandBuffer"); !s) return s;
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
    return check(vkBeginCommandBuffer(c, &bi), "vkBeginCommandBuffer");
  }
  Status begin() { return begin(cmd, true); }

  // A global memory barrier: writes of `src` by the `from` stages visible to `dst` of `to`.
  static void barrier(VkCommandBuffer c, VkPipelineStageFlags from, VkAccessFlags src, VkPipelineStageFlags to,
                      VkAccessFlags dst) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = src;
    mb.dstAccessMask = dst;
    vkCmdPipelineBarrier(c, from, to, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }

  // Ends recording: the device's writes made visible to the host before it reads (the fence
  // alone does not).
  Status finish(VkCommandBuffer c) {
    barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    return check(vkEndCommandBuffer(c), "vkEndCommandBuffer");
  }

  // One submission of a recorded buffer, and the wait for it.
  Status submit(VkCommandBuffer c) {
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &c;
    if (Status s = check(vkResetFences(device, 1, &fence), "vkResetFences"); !s) return s;
    if (Status s = check(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit"); !s) return s;
    ++submissions;
    return check(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  }

  Status submit_and_wait() {
    if (Status s = finish(cmd); !s) return s;
    return submit(cmd);
  }

  // Splits recorded once and replayed (what CUDA graphs do for a decode step): by a fingerprint
  // of the graph, its nodes and every address they read and write. Any freed buffer or a new
  // scratch drops them all (a recorded buffer names the VkBuffers it binds).
  std::map<uint64_t, VkCommandBuffer> recorded;
  std::map<uint64_t, int64_t> recorded_dispatches;  // dispatches in each, counted per replay
  int64_t replays = 0;
  void drop_recorded() {
    for (auto& [fp, c] : recorded) vkFreeCommandBuffers(device, pool, 1, &c);
    recorded.clear();
    recorded_dispatches.clear();
  }

  // Host <-> device copy for memory the host cannot map: a staging buffer and one submission.
  Status staged(Allocation& a, size_t off, void* host, size_t n, bool to_device) {
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

  // The pipeline of kernel k; spec >= 0 sets the shader's specialization constant 0 (matmul:
  // the weight type, so that each pipeline compiles one type's dequantization).
  Expected<Pipeline*> pipeline(Kernel k, int spec = -1) {
    if (auto it = pipelines.find({k, spec}); it != pipelines.end()) return &it->second;
    Pipeline p;
    auto built = build_pipeline(k, spec, p);
    if (!built) {  // nothing half-made is kept: the next call tries again from scratch
      vkDestroyPipelineLayout(device, p.layout, nullptr);
      vkDestroyDescriptorSetLayout(device, p.set_layout, nullptr);
      return built.error();
    }
    return &(pipelines[{k, spec}] = p);
  }

  Status build_pipeline(Kernel k, int spec, Pipeline& p) {
    // The exact variant (`<name>_exact.spv`: fused multiply-adds and the CPU's double sums in
    // double precision) where the device's own fma() is not fused and it has doubles.
    std::string shader = kKernelNames[static_cast<size_t>(k)];
    if (exact && !embedded_file(shader + "_exact.spv").empty()) shader += "_exact";
    const std::string_view spv = embedded_file(shader + ".spv");
    if (spv.empty()) return make_error("vulkan: no shader '{}' in this build", shader);
    VkDescriptorSetLayoutBinding b[kBindings]{};
    for (uint32_t i = 0; i < kBindings; ++i) {
      b[i].binding = i;
      b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      b[i].descriptorCount = 1;
      b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{};
    dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    dl.bindingCount = kBindings;
    dl.pBindings = b;
    if (Status s = check(vkCreateDescriptorSetLayout(device, &dl, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout"); !s)
      return s;
    VkPushConstantRange pc{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushWords * 4};
    VkPipelineLayoutCreateInfo pl{};
    pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &p.set_layout;
    pl.pushConstantRangeCount = 1;
    pl.pPushConstantRanges = &pc;
    if (Status s = check(vkCreatePipelineLayout(device, &pl, nullptr, &p.layout), "vkCreatePipelineLayout"); !s)
      return s;
    VkShaderModuleCreateInfo mi{};
    mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    mi.codeSize = spv.size();
    std::vector<uint32_t> code(spv.size() / 4);
    std::memcpy(code.data(), spv.data(), code.size() * 4);
    mi.pCode = code.data();
    VkShaderModule module = VK_NULL_HANDLE;
    if (Status s = check(vkCreateShaderModule(device, &mi, nullptr, &module), "vkCreateShaderModule"); !s)
      return s;
    VkComputePipelineCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    const uint32_t spec_value = static_cast<uint32_t>(spec);
    const VkSpecializationMapEntry entry{0, 0, 4};
    const VkSpecializationInfo si{1, &entry, 4, &spec_value};
    if (spec >= 0) ci.stage.pSpecializationInfo = &si;
    ci.layout = p.layout;
    const VkResult r = vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipeline);
    vkDestroyShaderModule(device, module, nullptr);
    return check(r, "vkCreateComputePipelines");
  }

  // Software devices (lavapipe) compute fma() as a product and a sum; with shaderFloat64 the
  // shaders that must round as the CPU does use their exact variants (CMakeLists.txt).
  bool exact = false;
  int64_t submissions = 0;
  int64_t dispatches = 0;
  uint64_t bytes_to_device = 0, bytes_to_host = 0;  // write() and read()
  size_t offset_align = 256;           // minStorageBufferOffsetAlignment
  size_t max_range = size_t{1} << 27;  // maxStorageBufferRange
};

Expected<std::unique_ptr<VulkanBackend>> VulkanBackend::create(std::string_view name) {
  const auto& devs = vk_devices();
  const VkDeviceDesc* d = nullptr;
  std::string have;
  for (const VkDeviceDesc& x : devs) {
    if (x.name == name) d = &x;
    have += (have.empty() ? "" : ", ") + x.name;
  }
  if (!d)
    return make_error("device '{}': {}", name, devs.empty() ? std::string("no Vulkan device here") : "there are " + have);
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(d->handle, &props);
  if (props.apiVersion < VK_API_VERSION_1_2)
    return make_error("vulkan {} ({}): Vulkan {}.{} (the shaders need 1.2)", d->name, d->description,
                      VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
  if (props.limits.maxComputeWorkGroupInvocations < 256)
    return make_error("vulkan {} ({}): {} invocations per workgroup (the shaders use 256)", d->name, d->description,
                      props.limits.maxComputeWorkGroupInvocations);
  auto impl = std::make_unique<Impl>();
  impl->desc = *d;
  impl->offset_align = std::max<size_t>(4, props.limits.minStorageBufferOffsetAlignment);
  impl->max_range = props.limits.maxStorageBufferRange;
  vkGetPhysicalDeviceMemoryProperties(d->handle, &impl->mem);
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d->handle, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(d->handle, &nq, qf.data());
  bool found = false;
  for (uint32_t i = 0; i < nq && !found; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) impl->queue_family = i, found = true;
  if (!found) return make_error("vulkan {} ({}): no compute queue", d->name, d->description);
  uint32_t ne = 0;
  vkEnumerateDeviceExtensionProperties(d->handle, nullptr, &ne, nullptr);
  std::vector<VkExtensionProperties> exts(ne);
  vkEnumerateDeviceExtensionProperties(d->handle, nullptr, &ne, exts.data());
  bool push = false;
  for (const auto& e : exts) push |= std::strcmp(e.extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0;
  if (!push) return make_error("vulkan {} ({}): needs {}", d->name, d->description, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
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
  vkGetPhysicalDeviceFeatures(d->handle, &feats);
  VkPhysicalDeviceFeatures want{};
  want.shaderFloat64 = feats.shaderFloat64;
  di.pEnabledFeatures = &want;
  impl->exact = d->software && feats.shaderFloat64;
  if (Status s = impl->check(vkCreateDevice(d->handle, &di, nullptr, &impl->device), "vkCreateDevice"); !s)
    return s.error();
  vkGetDeviceQueue(impl->device, impl->queue_family, 0, &impl->queue);
  impl->push_descriptor = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
      vkGetDeviceProcAddr(impl->device, "vkCmdPushDescriptorSetKHR"));
  if (!impl->push_descriptor) return make_error("vulkan {}: vkCmdPushDescriptorSetKHR is missing", d->name);
  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = impl->queue_family;
  if (Status s = impl->check(vkCreateCommandPool(impl->device, &pi, nullptr, &impl->pool), "vkCreateCommandPool"); !s)
    return s.error();
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = impl->pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  if (Status s = impl->check(vkAllocateCommandBuffers(impl->device, &ai, &impl->cmd), "vkAllocateCommandBuffers"); !s)
    return s.error();
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  if (Status s = impl->check(vkCreateFence(impl->device, &fi, nullptr, &impl->fence), "vkCreateFence"); !s)
    return s.error();
  return std::unique_ptr<VulkanBackend>(new VulkanBackend(std::move(impl)));
}

VulkanBackend::VulkanBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VulkanBackend::~VulkanBackend() = default;

std::string VulkanBackend::describe() const {
  std::lock_guard lock(impl_->mu);
  const VkDeviceDesc& d = impl_->desc;
  return "vulkan: " + d.name + " " + d.description + " (" + std::to_string(d.memory_bytes >> 20) + " MiB" +
         (d.software ? ", software" : "") + "), " + std::to_string(impl_->submissions) + " submissions, " +
         std::to_string(impl_->dispatches) + " dispatches so far (" + std::to_string(impl_->replays) +
         " submissions replayed a recorded split)";
}

bool VulkanBackend::supports_op(const Graph& g, const Node& n) const {
  auto f32_srcs = [&] {
    if (n.type != DType::F32) return false;
    for (int s : n.src)
      if (g.nodes[static_cast<size_t>(s)].type != DType::F32) return false;
    return true;
  };
  auto src = [&](size_t i) -> const Node& { return g.nodes[static_cast<size_t>(n.src[i])]; };
  if (n.n_elements() >= (int64_t{1} << 31)) return false;  // 32-bit indices in the shaders
  // Every tensor a dispatch binds whole fits one storage-buffer binding (a matmul's weight
  // excepted: bound in row ranges); a matmul's rounded activations too (the scratch).
  const size_t range = impl_->max_range - impl_->offset_align;
  if (!op_is_view(n.op) && n.n_bytes() > range) return false;
  for (size_t i = 0; i < n.src.size(); ++i)
    if (!(n.op == Op::kMatmul && i == 0) && src(i).n_bytes() > range) return false;
  if ((n.op == Op::kMatmul || n.op == Op::kMatmulId) && src(1).n_bytes() * 9 / 8 + 16 > range) return false;
  // Weights the shaders read from their raw bytes (shaders/dequant.glsl), byte offsets in 32 bits.
  auto dequantizes = [](const Node& w) {
    return dequant_type(w.type) >= 0 && w.ne[0] % dtype_info(w.type).block_elems == 0 && w.n_bytes() < (size_t{1} << 32);
  };
  switch (n.op) {
    case Op::kAdd:
    case Op::kMul:
      return f32_srcs() && src(1).ne[0] == n.ne[0] && (src(1).n_rows() == 1 || src(1).n_rows() == n.n_rows());
    case Op::kScale:
    case Op::kRmsNorm:
    case Op::kSilu:
    case Op::kGelu:
    case Op::kSoftcap: return f32_srcs();
    case Op::kSwiglu:
    case Op::kGeglu: return f32_srcs() && src(1).n_elements() == n.n_elements();
    case Op::kMatmul:
      return n.type == DType::F32 && src(1).type == DType::F32 && dequantizes(src(0));
    case Op::kMatmulId:  // the experts' weights bound whole
      return n.type == DType::F32 && src(1).type == DType::F32 && src(2).type == DType::I32 && dequantizes(src(0)) &&
             src(0).n_bytes() + impl_->offset_align <= impl_->max_range;
    case Op::kGetRows:  // rows of a KV cache (a KV move) only where its kv_store can run here too
      return n.type == DType::F32 && src(1).type == DType::I32 && dequantizes(src(0)) &&
             (src(0).op != Op::kKvCache || kv_cache_ok(src(0)));
    case Op::kRope:  // frequency factors read on the host for the angle table: a weight
      return n.type == DType::F32 && src(0).type == DType::F32 && src(1).type == DType::I32 &&
             (n.src.size() < 3 || (src(2).type == DType::F32 && src(2).op == Op::kWeight));
    case Op::kRmsNormMul: return f32_srcs() && src(1).n_elements() == n.ne[0];
    case Op::kKvStore:  // the cache, x f32 [ne0, n] (or [hd, n_head_kv, n]), rows I32 [n]
      return kv_cache_ok(src(0)) && src(1).type == DType::F32 && src(1).n_elements() == src(0).ne[0] * src(2).ne[0] &&
             src(2).type == DType::I32 && n.n_bytes() < (size_t{1} << 32);
    case Op::kReshape: return true;  // a view: nothing to run
    case Op::kTopK: return src(0).type == DType::F32 && n.type == DType::I32 && src(0).ne[0] <= 256 && n.ne[0] <= 8;
    case Op::kMoeWeights:
      return n.type == DType::F32 && src(0).type == DType::F32 && src(1).type == DType::I32 &&
             n.ne[0] <= 8;
    case Op::kMoeSum: return f32_srcs();
    case Op::kHadamard: return f32_srcs() && n.params.block >= 1 && n.params.block <= 256;
    case Op::kAttn: {  // q [hd, n_head, n_tokens], K and V (kv_store views of the caches), pos or ranges
      const int64_t hd = src(0).ne[0], n_head = src(0).ne[1], n_kv = n.params.n_head_kv;
      if (n_kv <= 0 || n_head % n_kv != 0 || src(2).ne[0] % n_kv != 0) return false;
      const int64_t hd_v = src(2).ne[0] / n_kv;
      const bool blocks = (src(1).type != DType::Q8_0 && src(1).type != DType::Q4_0) || (hd % 32 == 0 && hd_v % 32 == 0);
      return n.type == DType::F32 && src(0).type == DType::F32 && src(1).type == src(2).type && kv_cache_ok(src(1)) &&
             kv_cache_ok(src(2)) && src(3).type == DType::I32 && hd <= 256 && hd_v <= 256 && blocks &&
             (src(1).type != DType::F16 || (hd % 2 == 0 && hd_v % 2 == 0)) && src(1).n_bytes() < (size_t{1} << 32) &&
             src(2).n_bytes() < (size_t{1} << 32);
    }
    default: return false;
  }
}

bool VulkanBackend::exact() const { return impl_->exact; }

BackendCounters VulkanBackend::counters() const {
  std::lock_guard lock(impl_->mu);
  return {impl_->submissions, impl_->dispatches, impl_->replays, impl_->bytes_to_device, impl_->bytes_to_host};
}

size_t VulkanBackend::memory_used() const {
  std::lock_guard lock(impl_->mu);
  size_t n = 0;
  for (const auto& [base, a] : impl_->allocs) n += a.capacity;
  return n;
}

Expected<BackendBuffer> VulkanBackend::alloc(size_t bytes) {
  std::lock_guard lock(impl_->mu);
  auto a = impl_->make_buffer(bytes, false);
  if (!a) return a.error();
  if (a->mapped) {
    std::memset(a->mapped, 0, bytes);
  } else {
    Status s = impl_->begin();
    if (s) {
      vkCmdFillBuffer(impl_->cmd, a->buffer, 0, VK_WHOLE_SIZE, 0);
      s = impl_->submit_and_wait();
    }
    if (!s) {
      impl_->release(*a);
      return s.error();
    }
  }
  const uintptr_t base = impl_->add(*a);
  return BackendBuffer{reinterpret_cast<void*>(base), bytes};
}

void VulkanBackend::free(BackendBuffer b) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->allocs.find(reinterpret_cast<uintptr_t>(b.base));
  if (it == impl_->allocs.end()) return;
  vkDeviceWaitIdle(impl_->device);
  impl_->drop_recorded();
  impl_->release(it->second);
  impl_->allocs.erase(it);
}

// write() and read() return nothing (graph/backend.h): an address outside every buffer is a
// bug in the caller and stops the process with its description; a failed staging copy (the
// device lost) says so on stderr.
void VulkanBackend::write(void* dst, const void* host, size_t n) {
  if (n == 0) return;
  std::lock_guard lock(impl_->mu);
  auto [a, off] = impl_->resolve(dst);
  if (!a || off + n > a->size) impl_->bad_address("write", dst, n);
  impl_->bytes_to_device += n;
  if (a->mapped) std::memcpy(static_cast<char*>(a->mapped) + off, host, n);
  else if (Status s = impl_->staged(*a, off, const_cast<void*>(host), n, true); !s)
    std::fprintf(stderr, "minfer: %s\n", s.error().message.c_str());
}

void VulkanBackend::read(void* host, const void* src, size_t n) {
  if (n == 0) return;
  std::lock_guard lock(impl_->mu);
  auto [a, off] = impl_->resolve(src);
  if (!a || off + n > a->size) impl_->bad_address("read", src, n);
  impl_->bytes_to_host += n;
  if (a->mapped) std::memcpy(host, static_cast<const char*>(a->mapped) + off, n);
  else if (Status s = impl_->staged(*a, off, host, n, false); !s)
    std::fprintf(stderr, "minfer: %s\n", s.error().message.c_str());
}

Status VulkanBackend::prepare(const Graph& g, std::span<const int> nodes) {
  // Weights the nodes read, uploaded once per tensor for the backend's lifetime. One prepare at
  // a time (sessions on threads share the backend), so a weight is never uploaded twice.
  std::lock_guard uploading(impl_->upload_mu);
  for (int id : nodes) {
    for (int s : g.nodes[static_cast<size_t>(id)].src) {
      const Node& w = g.nodes[static_cast<size_t>(s)];
      if (w.op != Op::kWeight) continue;
      {
        std::lock_guard lock(impl_->mu);
        if (impl_->weights.count({w.data, w.n_bytes()})) continue;
      }
      auto b = alloc(w.n_bytes());
      if (!b) return make_error("vulkan: weight '{}': {}", w.name, b.error().message);
      write(b->base, w.data, w.n_bytes());
      std::lock_guard lock(impl_->mu);
      impl_->weights[{w.data, w.n_bytes()}] = reinterpret_cast<uintptr_t>(b->base);
    }
  }
  return {};
}

Status VulkanBackend::compute(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  // The scratch for rounded activations: the largest x of the split's matmuls that round theirs.
  size_t scratch_bytes = 0;
  for (int id : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    if ((n.op == Op::kMatmul || n.op == Op::kMatmulId) && act_round_mode(g.nodes[static_cast<size_t>(n.src[0])].type) != 0)
      scratch_bytes = std::max(scratch_bytes, g.nodes[static_cast<size_t>(n.src[1])].n_bytes() * 9 / 8 + 16);
  }
  // RoPE tables: per rope node an offset into rope_tab (nodes of the same positions and
  // parameters share one), filled now from the positions the host wrote, as the CPU backend
  // computes them (cpu/ops-rope.cpp: the power by repeated f32 products, libm's cos and sin).
  std::map<int, uint32_t> rope_off;  // node id -> float offset
  {
    struct Key {
      const void* pos;
      int64_t n_tok;
      int n_rot;
      float base, scale;
      const void* factors;
      bool operator<(const Key& o) const {
        return std::tie(pos, n_tok, n_rot, base, scale, factors) < std::tie(o.pos, o.n_tok, o.n_rot, o.base, o.scale, o.factors);
      }
    };
    std::map<Key, uint32_t> seen;
    std::vector<std::pair<Key, uint32_t>> fills;
    size_t total = 0;
    for (int id : nodes) {
      const Node& n = g.nodes[static_cast<size_t>(id)];
      if (n.op != Op::kRope) continue;
      const Node* f = n.src.size() > 2 ? &g.nodes[static_cast<size_t>(n.src[2])] : nullptr;
      const Key k{addrs[static_cast<size_t>(n.src[1])], n.ne[2], n.params.n_rot, n.params.rope_freq_base,
                  n.params.rope_freq_scale, f ? f->data : nullptr};
      auto it = seen.find(k);
      if (it == seen.end()) {
        it = seen.emplace(k, static_cast<uint32_t>(total)).first;
        fills.emplace_back(k, static_cast<uint32_t>(total));
        total += static_cast<size_t>(k.n_tok) * static_cast<size_t>(k.n_rot / 2) * 2;
      }
      rope_off[id] = it->second;
    }
    if (total * 4 > m.rope_tab.size) {
      m.drop_recorded();
      if (m.rope_tab.buffer) m.release(m.rope_tab);
      m.rope_tab = {};
      auto a = m.make_buffer(std::max<size_t>(total * 4, 4096), true);
      if (!a) return a.error();
      m.rope_tab = *a;
    }
    std::vector<int32_t> pos;
    for (const auto& [k, off] : fills) {
      pos.resize(static_cast<size_t>(k.n_tok));
      auto [pa, poff] = m.resolve(k.pos);
      if (!pa || poff + pos.size() * 4 > pa->size) return make_error("vulkan: rope positions have no device memory");
      if (pa->mapped) std::memcpy(pos.data(), static_cast<const char*>(pa->mapped) + poff, pos.size() * 4);
      else if (Status st = m.staged(*pa, poff, pos.data(), pos.size() * 4, false); !st) return st;
      // Counted as copies between the host and the device: the positions read, the table written.
      m.bytes_to_host += pos.size() * 4;
      m.bytes_to_device += static_cast<uint64_t>(k.n_tok) * static_cast<uint64_t>(k.n_rot / 2) * 8;
      const int64_t half = k.n_rot / 2;
      const float theta_scale = std::pow(k.base, -2.0f / static_cast<float>(k.n_rot));
      const float* factors = static_cast<const float*>(k.factors);
      float* tab = static_cast<float*>(m.rope_tab.mapped) + off;
      for (int64_t t = 0; t < k.n_tok; ++t) {
        float theta = static_cast<float>(pos[static_cast<size_t>(t)]);
        float* ft = tab + t * half * 2;
        for (int64_t i = 0; i < half; ++i) {
          const float th = k.scale * (factors ? theta / factors[i] : theta);
          ft[i] = std::cos(th);
          ft[half + i] = std::sin(th);
          theta *= theta_scale;
        }
      }
    }
  }
  if (scratch_bytes > m.scratch.size) {
    m.drop_recorded();
    if (m.scratch.buffer) m.release(m.scratch);
    m.scratch = {};
    auto a = m.make_buffer(scratch_bytes, false);
    if (!a) return a.error();
    m.scratch = *a;
  }
  // A split of several nodes is recorded once into its own command buffer and replayed while
  // its graph and addresses stay (a decode step: one submission, nothing re-recorded); a lone
  // node (the observer's node-by-node runs) goes through the shared one-time buffer.
  uint64_t fp = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { fp = (fp ^ v) * 1099511628211ull; };
  mix(reinterpret_cast<uintptr_t>(&g));
  for (int id : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    mix(static_cast<uint64_t>(id));
    mix(static_cast<uint64_t>(n.op));
    mix(static_cast<uint64_t>(n.type));
    mix(reinterpret_cast<uintptr_t>(addrs[static_cast<size_t>(id)]));
    for (int64_t e : n.ne) mix(static_cast<uint64_t>(e));
    const OpParams& q = n.params;
    for (float f : {q.eps, q.attn_scale, q.rope_freq_base, q.rope_freq_scale, q.attn_softcap, q.scale})
      mix(std::bit_cast<uint32_t>(f));
    for (int32_t i : {q.n_head_kv, q.n_rot, q.attn_window, q.attn_ring, static_cast<int32_t>(q.rope_mode),
                      static_cast<int32_t>(q.attn_ranges), q.block, q.top_k, static_cast<int32_t>(q.moe_norm)})
      mix(static_cast<uint32_t>(i));
    for (int src : n.src) {
      const Node& sn = g.nodes[static_cast<size_t>(src)];
      mix(reinterpret_cast<uintptr_t>(sn.op == Op::kWeight ? sn.data : addrs[static_cast<size_t>(src)]));
      mix(static_cast<uint64_t>(sn.type));
      for (int64_t e : sn.ne) mix(static_cast<uint64_t>(e));
    }
  }
  const bool keep = nodes.size() >= 2;
  if (keep) {
    if (auto it = m.recorded.find(fp); it != m.recorded.end()) {
      ++m.replays;
      m.dispatches += m.recorded_dispatches[fp];
      return m.submit(it->second);
    }
    if (m.recorded.size() >= 64) m.drop_recorded();
  }
  VkCommandBuffer cb = m.cmd;
  if (keep) {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = m.pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    if (Status s = m.check(vkAllocateCommandBuffers(m.device, &ai, &cb), "vkAllocateCommandBuffers"); !s) return s;
  }
  // A recording that fails frees its buffer.
  struct Guard {
    Impl& m;
    VkCommandBuffer cb;
    bool armed;
    ~Guard() {
      if (armed) vkFreeCommandBuffers(m.device, m.pool, 1, &cb);
    }
  } guard{m, cb, keep};
  const int64_t dispatches0 = m.dispatches;
  if (Status s = m.begin(cb, !keep); !s) return s;
  // Where node id's data lives: its buffer, bound from the aligned offset at or below it for
  // the tensor's bytes (within maxStorageBufferRange), and the element offset left over.
  struct Bound {
    VkDescriptorBufferInfo info;
    uint32_t elem = 0;
  };
  auto at = [&](int id) -> Expected<Bound> {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    const void* p = addrs[static_cast<size_t>(id)];
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
  };
  bool first = true;
  // One dispatch: a barrier after the previous one (each reads what the one before wrote), the
  // pipeline, its buffers, its push constants.
  auto record = [&](const Pipeline& pl, const VkDescriptorBufferInfo* bi, const uint32_t* pc, uint32_t groups) {
    // First the host's writes (mapped memory, RoPE tables) and staged copies, then each
    // dispatch's reads of what the one before wrote.
    const VkAccessFlags rw = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    if (first)
      Impl::barrier(cb, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                    VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, rw);
    else
      Impl::barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, rw);
    first = false;
    VkWriteDescriptorSet w[kBindings]{};
    for (uint32_t i = 0; i < kBindings; ++i) {
      w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      w[i].dstBinding = i;
      w[i].descriptorCount = 1;
      w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w[i].pBufferInfo = &bi[i];
    }
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.pipeline);
    m.push_descriptor(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout, 0, kBindings, w);
    vkCmdPushConstants(cb, pl.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushWords * 4, pc);
    const uint32_t gx = std::min<uint32_t>(groups, 65535), gy = (groups + 65534) / 65535;
    vkCmdDispatch(cb, gx, gy, 1);
    ++m.dispatches;
  };
  for (int id : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    if (op_is_view(n.op) && n.op != Op::kKvStore) continue;  // reshape: the same bytes
    Kernel kernel;
    switch (n.op) {
      case Op::kAdd:
      case Op::kMul: kernel = Kernel::kBinary; break;
      case Op::kScale: kernel = Kernel::kScale; break;
      case Op::kRmsNorm:
      case Op::kRmsNormMul: kernel = Kernel::kRmsNorm; break;
      case Op::kSilu:
      case Op::kSwiglu:
      case Op::kGelu:
      case Op::kGeglu:
      case Op::kSoftcap: kernel = Kernel::kUnary; break;
      case Op::kRope: kernel = Kernel::kRope; break;
      case Op::kMatmul:
      case Op::kMatmulId: kernel = Kernel::kMatmul; break;
      case Op::kGetRows: kernel = Kernel::kGetRows; break;
      case Op::kKvStore: kernel = Kernel::kKvStore; break;
      case Op::kAttn: kernel = Kernel::kAttn; break;
      case Op::kTopK:
      case Op::kMoeWeights:
      case Op::kMoeSum: kernel = Kernel::kMoe; break;
      case Op::kHadamard: kernel = Kernel::kHadamard; break;
      default: return make_error("vulkan: node '{}': op {} is not supported here", n.name, op_name(n.op));
    }
    auto pl = kernel == Kernel::kMatmul ? m.pipeline(kernel, dequant_type(g.nodes[static_cast<size_t>(n.src[0])].type))
                                        : m.pipeline(kernel);
    if (!pl) return pl.error();
    auto d = at(id);
    if (!d) return d.error();
    // A matmul weight over the storage buffer range (a large vocabulary's LM head) is bound
    // in row ranges below, one dispatch each.
    const Node& n0 = g.nodes[static_cast<size_t>(n.src[0])];
    const bool chunked = n.op == Op::kMatmul && n0.n_bytes() + m.offset_align > m.max_range;
    auto s0 = chunked ? at(n.src[1]) : at(n.src[0]);  // chunked: bound per range below; x stands in
    if (!s0) return s0.error();
    auto s1 = n.src.size() > 1 ? at(n.src[1]) : s0;
    if (!s1) return s1.error();
    auto s2 = n.src.size() > 2 ? at(n.src[2]) : s0;
    if (!s2) return s2.error();
    auto s3 = n.src.size() > 3 ? at(n.src[3]) : s0;
    if (!s3) return s3.error();
    VkDescriptorBufferInfo bi[kBindings] = {s0->info, s1->info, d->info, s2->info, s3->info};
    uint32_t pc[kPushWords] = {};
    uint32_t groups = 0;
    const uint32_t n_el = static_cast<uint32_t>(n.n_elements());
    if (kernel == Kernel::kBinary) {
      const Node& b = g.nodes[static_cast<size_t>(n.src[1])];
      const uint32_t v[] = {n_el, static_cast<uint32_t>(n.ne[0]), static_cast<uint32_t>(b.n_rows()),
                            n.op == Op::kAdd ? 0u : 1u, s0->elem, s1->elem, d->elem};
      std::memcpy(pc, v, sizeof(v));
      groups = (n_el + 255) / 256;
    } else if (kernel == Kernel::kScale) {
      float c = n.params.scale;
      pc[0] = n_el;
      std::memcpy(&pc[1], &c, 4);
      pc[2] = s0->elem;
      pc[3] = d->elem;
      groups = (n_el + 255) / 256;
    } else if (kernel == Kernel::kMatmul) {
      const Node& wn = g.nodes[static_cast<size_t>(n.src[0])];
      pc[0] = static_cast<uint32_t>(wn.ne[0]);
      pc[1] = static_cast<uint32_t>(wn.ne[1]);
      pc[2] = static_cast<uint32_t>(n.n_rows());
      pc[3] = static_cast<uint32_t>(dequant_type(wn.type));
      pc[4] = static_cast<uint32_t>(row_bytes(wn.type, wn.ne[0]));
      pc[5] = s0->elem * 4;
      pc[6] = s1->elem;
      pc[7] = d->elem;
      pc[8] = static_cast<uint32_t>((wn.ne[1] + 63) / 64);  // row groups
      pc[9] = static_cast<uint32_t>(wn.ne[1]);               // output row stride
      const bool by_id = n.op == Op::kMatmulId;
      if (by_id) {  // slots (j, t) of ids [k, T]; x rows: one per token or per slot
        const Node& xn = g.nodes[static_cast<size_t>(n.src[1])];
        pc[2] = static_cast<uint32_t>(xn.n_rows());
        pc[10] = 1u;
        pc[11] = static_cast<uint32_t>(n.ne[1]);
        pc[12] = xn.ne[1] == 1 ? 0u : 1u;
        pc[13] = s2->elem;
        pc[14] = static_cast<uint32_t>(n.ne[1] * n.ne[2]);
      }
      if (const uint32_t mode = act_round_mode(wn.type); mode != 0) {  // x rounded into the scratch first
        auto ar = m.pipeline(Kernel::kActRound);
        if (!ar) return ar.error();
        const Node& xn = g.nodes[static_cast<size_t>(n.src[1])];
        const uint32_t n_x = static_cast<uint32_t>(xn.n_elements());
        const VkDescriptorBufferInfo sc{m.scratch.buffer, 0, xn.n_bytes() * 9 / 8 + 16};
        const VkDescriptorBufferInfo abi[kBindings] = {s1->info, s1->info, sc, s1->info, s1->info};
        uint32_t apc[kPushWords] = {n_x, mode, s1->elem, 0};
        const uint32_t per = mode <= 2 ? 1 : mode == 4 ? 256 : 32;
        record(**ar, abi, apc, (n_x / per + 63) / 64);
        bi[1] = sc;
        pc[6] = 0;
      }
      groups = pc[8] * (by_id ? pc[14] : static_cast<uint32_t>((n.n_rows() + 7) / 8));
      if (chunked) {  // row ranges whose bytes start at aligned offsets and fit the range
        auto wit = m.weights.find({wn.data, wn.n_bytes()});
        if (wit == m.weights.end()) return make_error("vulkan: node '{}' has no device memory", wn.name);
        auto [wa, woff] = m.resolve(reinterpret_cast<const void*>(wit->second));
        const size_t rb = row_bytes(wn.type, wn.ne[0]);
        size_t per = (m.max_range - m.offset_align) / rb;
        const size_t step = m.offset_align / std::gcd(rb, m.offset_align);  // rows per aligned offset
        per -= per % step;
        if (!wa || woff % m.offset_align != 0 || per == 0)
          return make_error("vulkan {}: weight '{}' ({} bytes) cannot be bound in parts", m.desc.name, wn.name, wn.n_bytes());
        for (size_t r0 = 0; r0 < static_cast<size_t>(wn.ne[1]); r0 += per) {
          const size_t rows = std::min(per, static_cast<size_t>(wn.ne[1]) - r0);
          bi[0] = {wa->buffer, woff + r0 * rb, (rows * rb + 3) & ~size_t{3}};
          uint32_t cpc[kPushWords];
          std::memcpy(cpc, pc, sizeof(cpc));
          cpc[1] = static_cast<uint32_t>(rows);
          cpc[5] = 0;
          cpc[7] = pc[7] + static_cast<uint32_t>(r0);
          cpc[8] = static_cast<uint32_t>((rows + 63) / 64);
          record(**pl, bi, cpc, cpc[8] * static_cast<uint32_t>((n.n_rows() + 7) / 8));
        }
        continue;
      }
    } else if (kernel == Kernel::kGetRows) {
      const Node& t = g.nodes[static_cast<size_t>(n.src[0])];
      pc[0] = static_cast<uint32_t>(t.ne[0]);
      pc[1] = static_cast<uint32_t>(t.n_rows());
      pc[2] = static_cast<uint32_t>(n.n_rows());
      pc[3] = static_cast<uint32_t>(dequant_type(t.type));
      pc[4] = static_cast<uint32_t>(row_bytes(t.type, t.ne[0]));
      pc[5] = s0->elem * 4;
      pc[6] = s1->elem;
      pc[7] = d->elem;
      groups = (n_el + 255) / 256;
    } else if (kernel == Kernel::kKvStore) {
      const Node& c = g.nodes[static_cast<size_t>(n.src[0])];
      const uint32_t n_tok = static_cast<uint32_t>(g.nodes[static_cast<size_t>(n.src[2])].ne[0]);
      pc[0] = static_cast<uint32_t>(c.ne[0]);
      pc[1] = n_tok;
      pc[2] = static_cast<uint32_t>(c.n_rows());
      pc[3] = static_cast<uint32_t>(dequant_type(c.type));
      pc[4] = static_cast<uint32_t>(row_bytes(c.type, c.ne[0]));
      pc[5] = s1->elem;
      pc[6] = d->elem * 4;
      pc[7] = s2->elem;
      const uint32_t units = c.type == DType::F32 ? pc[0] : c.type == DType::F16 ? pc[0] / 2 : pc[0] / 64;
      groups = (units * n_tok + 63) / 64;
    } else if (kernel == Kernel::kHadamard) {
      const uint32_t blk = static_cast<uint32_t>(n.params.block);
      const float sc = 1.0f / std::sqrt(static_cast<float>(blk));  // the CPU's
      pc[0] = blk;
      pc[1] = n_el / blk;
      pc[2] = s0->elem;
      pc[3] = d->elem;
      std::memcpy(&pc[4], &sc, 4);
      groups = (pc[1] + 63) / 64;
    } else if (kernel == Kernel::kMoe) {
      const Node& a0 = g.nodes[static_cast<size_t>(n.src[0])];
      pc[0] = n.op == Op::kTopK ? 0u : n.op == Op::kMoeWeights ? 1u : 2u;
      pc[1] = static_cast<uint32_t>(a0.ne[0]);
      pc[2] = static_cast<uint32_t>(n.op == Op::kMoeSum ? a0.ne[1] : n.ne[0]);
      pc[3] = static_cast<uint32_t>(n.op == Op::kMoeSum ? a0.ne[2] : a0.n_rows());
      pc[4] = n.params.moe_norm ? 1u : 0u;
      pc[5] = s0->elem;
      pc[6] = s1->elem;
      pc[7] = d->elem;
      groups = ((n.op == Op::kMoeSum ? pc[1] * pc[3] : pc[3]) + 63) / 64;
    } else if (kernel == Kernel::kAttn) {
      const Node& qn = g.nodes[static_cast<size_t>(n.src[0])];
      const Node& kn = g.nodes[static_cast<size_t>(n.src[1])];
      const Node& vn = g.nodes[static_cast<size_t>(n.src[2])];
      const float softcap = n.params.attn_softcap;
      const float scale = softcap > 0.0f ? n.params.attn_scale / softcap : n.params.attn_scale;
      pc[0] = static_cast<uint32_t>(qn.ne[0]);
      pc[1] = static_cast<uint32_t>(qn.ne[1]);
      pc[2] = static_cast<uint32_t>(qn.ne[2]);
      pc[3] = static_cast<uint32_t>(n.params.n_head_kv);
      pc[4] = static_cast<uint32_t>(vn.ne[0] / n.params.n_head_kv);
      pc[5] = static_cast<uint32_t>(dequant_type(kn.type));
      pc[6] = static_cast<uint32_t>(row_bytes(kn.type, kn.ne[0]));
      pc[7] = static_cast<uint32_t>(row_bytes(vn.type, vn.ne[0]));
      std::memcpy(&pc[8], &scale, 4);
      std::memcpy(&pc[9], &softcap, 4);
      pc[10] = static_cast<uint32_t>(n.params.attn_window);
      pc[11] = static_cast<uint32_t>(n.params.attn_ring);
      pc[12] = n.params.attn_ranges ? 1u : 0u;
      pc[13] = s0->elem;
      pc[14] = s1->elem * 4;
      pc[15] = s2->elem * 4;
      pc[16] = s3->elem;
      pc[17] = d->elem;
      groups = static_cast<uint32_t>(qn.ne[1] * qn.ne[2]);
    } else if (kernel == Kernel::kRope) {
      const int n_rot = n.params.n_rot;
      const float theta_scale = std::pow(n.params.rope_freq_base, -2.0f / static_cast<float>(n_rot));
      const float freq_scale = n.params.rope_freq_scale;
      pc[0] = static_cast<uint32_t>(n.ne[0]);
      pc[1] = static_cast<uint32_t>(n.ne[1]);
      pc[2] = static_cast<uint32_t>(n.ne[2]);
      pc[3] = static_cast<uint32_t>(n_rot);
      pc[4] = n.params.rope_mode == RopeMode::kNeox ? 1u : 0u;
      std::memcpy(&pc[5], &theta_scale, 4);
      std::memcpy(&pc[6], &freq_scale, 4);
      pc[7] = n.src.size() > 2 ? 1u : 0u;
      pc[8] = s0->elem;
      pc[9] = s1->elem;
      pc[10] = d->elem;
      pc[11] = s2->elem;
      pc[12] = rope_off.at(id);
      pc[13] = 1u;
      bi[4] = {m.rope_tab.buffer, 0, VK_WHOLE_SIZE};
      const uint32_t per_head = static_cast<uint32_t>(n_rot / 2 + (n.ne[0] - n_rot));
      groups = (per_head * static_cast<uint32_t>(n.ne[1] * n.ne[2]) + 255) / 256;
    } else if (kernel == Kernel::kUnary) {
      const bool gelu = n.op == Op::kGelu || n.op == Op::kGeglu;
      const float c = n.params.scale;
      pc[0] = n_el;
      pc[1] = n.op == Op::kSoftcap ? 2u : gelu ? 1u : 0u;
      pc[2] = n.op == Op::kSwiglu || n.op == Op::kGeglu ? 1u : 0u;
      std::memcpy(&pc[3], &c, 4);
      pc[4] = s0->elem;
      pc[5] = s1->elem;
      pc[6] = d->elem;
      pc[7] = static_cast<uint32_t>(n.ne[0]);
      groups = (n_el + 255) / 256;
    } else {
      const float eps = n.params.eps;
      pc[0] = static_cast<uint32_t>(n.ne[0]);
      pc[1] = static_cast<uint32_t>(n.n_rows());
      std::memcpy(&pc[2], &eps, 4);
      pc[3] = n.op == Op::kRmsNormMul ? 1u : 0u;
      pc[4] = s0->elem;
      pc[5] = s1->elem;
      pc[6] = d->elem;
      groups = static_cast<uint32_t>(n.n_rows());
    }
    record(**pl, bi, pc, groups);
  }
  if (Status s = m.finish(cb); !s) return s;
  if (keep) {
    m.recorded[fp] = cb;
    m.recorded_dispatches[fp] = m.dispatches - dispatches0;
    guard.armed = false;
  }
  return m.submit(cb);
}

}  // namespace minfer::vulkan
