// The Vulkan compute backend (graph/backend.h) on one device: device buffers behind opaque
// addresses, weights uploaded once in prepare(), each split recorded into one command buffer
// and submitted once. Ops: add, mul, scale, rms_norm (+ fused mul), silu / swiglu, gelu / geglu,
// softcap, rope, matmul and get_rows from every weight type, kv_store and attention over f32 /
// f16 / q8_0 / q4_0 caches; the rest of the graph stays on the CPU with copies at the split
// boundaries (docs/backends.md has the table and the checks).
//
//   auto vk = VulkanBackend::create("Vulkan0");        // vk_devices() names
//   if (!vk) return vk.error();                        // "device 'Vulkan3': there are Vulkan0"
//   cpu::CpuBackend cpu(4);
//   Scheduler sched({vk->get(), &cpu});                 // priority 200 > the CPU's 100
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "graph/backend.h"

namespace minfer::vulkan {

class VulkanBackend final : public Backend {
 public:
  static Expected<std::unique_ptr<VulkanBackend>> create(std::string_view device);
  ~VulkanBackend() override;

  std::string_view name() const override { return "vulkan"; }
  std::string describe() const override;
  int priority() const override { return 200; }
  bool supports_op(const Graph& g, const Node& n) const override;

  Expected<BackendBuffer> alloc(size_t bytes) override;
  void free(BackendBuffer b) override;
  void write(void* dst, const void* host, size_t n_bytes) override;
  void read(void* host, const void* src, size_t n_bytes) override;
  Status prepare(const Graph& g, std::span<const int> nodes) override;
  Status compute(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs) override;
  size_t memory_used() const override;
  // Whether the shaders' exact variants run here (a software device with doubles: its fma() is
  // not fused), making rms_norm, silu and attention's sums round as the CPU backend's.
  bool exact() const;
  BackendCounters counters() const override;

  struct Impl;

 private:
  explicit VulkanBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace minfer::vulkan
