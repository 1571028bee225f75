#include "backends/vulkan/vulkan-backend.h"

#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backends/vulkan/vk-device.h"
#include "backends/vulkan/vk-dispatch.h"
#include "backends/vulkan/vk-instance.h"
#include "backends/vulkan/vk-replay.h"
#include "backends/vulkan/vk-rope-table.h"

namespace minfer::vulkan {

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
  auto impl = Impl::open(*d);
  if (!impl) return impl.error();
  return std::unique_ptr<VulkanBackend>(new VulkanBackend(std::move(*impl)));
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
  auto rope_off = fill_rope_tables(m, g, nodes, addrs);
  if (!rope_off) return rope_off.error();
  if (scratch_bytes > m.scratch.size)
    if (Status s = m.remake(m.scratch, scratch_bytes, false); !s) return s;
  // A split of several nodes is recorded once into its own command buffer and replayed while
  // its graph and addresses stay (a decode step: one submission, nothing re-recorded); a lone
  // node (the observer's node-by-node runs) goes through the shared one-time buffer.
  const uint64_t fp = split_fingerprint(g, nodes, addrs);
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
  if (keep)
    if (Status s = m.allocate(cb); !s) return s;
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
  Recording rec(m, cb, g, addrs);
  for (int id : nodes)
    if (Status s = record_node(rec, id, *rope_off); !s) return s;
  if (Status s = m.finish(cb); !s) return s;
  if (keep) {
    m.recorded[fp] = cb;
    m.recorded_dispatches[fp] = m.dispatches - dispatches0;
    guard.armed = false;
  }
  return m.submit(cb);
}

}  // namespace minfer::vulkan
