#include "backends/registry/registry.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/cpu/cpu-backend.h"
#include "core/thread-pool.h"
#ifdef MINFER_HAVE_VULKAN
#include "backends/vulkan/vk-instance.h"
#include "backends/vulkan/vulkan-backend.h"
#endif

namespace minfer {
namespace {

struct Entry {
  const char* name;
  Expected<std::unique_ptr<Backend>> (*make)(const BackendOptions& opt);
};

const Entry kBackends[] = {
#ifdef MINFER_HAVE_VULKAN
    {"vulkan",
     [](const BackendOptions& o) -> Expected<std::unique_ptr<Backend>> {
       // No device named: the first hardware GPU. A software device (lavapipe) is slower than
       // the CPU backend and runs only when named.
       std::string name = o.device;
       for (const vulkan::VkDeviceDesc& d : vulkan::vk_devices())
         if (name.empty() && !d.software) name = d.name;
       if (name.empty()) return make_error("vulkan: no hardware GPU here (a software device runs only when named)");
       auto b = vulkan::VulkanBackend::create(name);
       if (!b) return b.error();
       return std::unique_ptr<Backend>(std::move(*b));
     }},
#endif
    {"cpu",
     [](const BackendOptions& o) -> Expected<std::unique_ptr<Backend>> {
       return std::unique_ptr<Backend>(std::make_unique<cpu::CpuBackend>(o.n_threads > 0 ? o.n_threads : hardware_threads()));
     }},
};

std::string joined_names() {
  std::string s;
  for (const Entry& e : kBackends) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace

Expected<std::unique_ptr<Backend>> create_backend(std::string_view name, const BackendOptions& opt) {
  if (opt.n_threads < 0) return make_error("backend '{}': n_threads {} is negative", name, opt.n_threads);
  for (const Entry& e : kBackends)
    if (name == e.name) return e.make(opt);
  return make_error("unknown backend '{}' (available: {})", name, joined_names());
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> v;
#ifdef MINFER_HAVE_VULKAN
  for (const vulkan::VkDeviceDesc& d : vulkan::vk_devices())
    v.push_back({d.name, "vulkan", d.description, d.memory_bytes, d.software});
#endif
  return v;
}

std::string_view device_support_note() {
#ifdef MINFER_HAVE_VULKAN
  return "";
#else
  return "this build has no GPU backend (Vulkan needs libvulkan-dev and glslc at build time)";
#endif
}

Expected<std::vector<DeviceInfo>> select_devices(std::string_view list) {
  const std::vector<DeviceInfo> all = list_devices();
  std::vector<DeviceInfo> out;
  if (list == "none") return out;
  if (list.empty()) {
    for (const DeviceInfo& d : all)
      if (!d.software) return std::vector<DeviceInfo>{d};
    return out;
  }
  std::string have;
  for (const DeviceInfo& d : all)
    have += fmt::format("{}{} ({}{})", have.empty() ? "" : ", ", d.name, d.description, d.software ? ", software" : "");
  size_t i = 0;
  while (i <= list.size()) {
    const size_t j = std::min(list.find(',', i), list.size());
    const std::string_view name = list.substr(i, j - i);
    auto it = std::find_if(all.begin(), all.end(), [&](const DeviceInfo& d) { return d.name == name; });
    if (it == all.end()) {
      const std::string_view note = device_support_note();
      return make_error("--device {}: no device '{}' here ({})", list, name,
                        !note.empty() ? std::string(note) : have.empty() ? std::string("no GPU found") : "devices: " + have);
    }
    if (std::any_of(out.begin(), out.end(), [&](const DeviceInfo& d) { return d.name == name; }))
      return make_error("--device {}: '{}' given twice", list, name);
    out.push_back(*it);
    i = j + 1;
  }
  return out;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> v;
  for (const Entry& e : kBackends) v.emplace_back(e.name);
  return v;
}

Expected<std::vector<std::string>> parse_backend_list(std::string_view list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= list.size()) {
    const size_t j = std::min(list.find(',', i), list.size());
    const std::string name(list.substr(i, j - i));
    if (name.empty()) return make_error("backend list '{}': empty name", list);
    const auto known = backend_names();
    if (std::find(known.begin(), known.end(), name) == known.end())
      return make_error("backend list '{}': unknown backend '{}' (available: {})", list, name, joined_names());
    if (std::find(out.begin(), out.end(), name) != out.end())
      return make_error("backend list '{}': '{}' given twice", list, name);
    out.push_back(name);
    i = j + 1;
  }
  return out;
}

}  // namespace minfer
