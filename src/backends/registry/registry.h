// Backends by name. Code above backends/ (runtime, tools) creates its backends here and sees
// them only as graph/backend.h's Backend; adding a backend is one entry in registry.cpp.
//
//   auto b = create_backend("cpu", {.n_threads = 4});
//   if (!b) return b.error();                        // "unknown backend 'gpu' (available: cpu)"
//   Scheduler sched({b->get()});
//   for (const DeviceInfo& d : list_devices()) ...   // "Vulkan0", its backend "vulkan", memory
//   auto vk = create_backend("vulkan", {.device = "Vulkan0"});
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/backend.h"

namespace minfer {

struct BackendOptions {
  int n_threads = 0;   // host threads for compute; 0 = all hardware threads
  std::string device;  // device backends: which device (a list_devices() name); "" = the first
};

// A compute device other than the host CPU: llama.cpp's --list-devices line.
struct DeviceInfo {
  std::string name;         // "Vulkan0"
  std::string backend;      // the create_backend() name that runs on it: "vulkan"
  std::string description;  // the driver's name for it
  uint64_t memory_bytes = 0;
  bool software = false;    // a CPU implementation of the API (lavapipe): slower than our CPU kernels
};

// The devices this build can use, in the order their APIs list them (empty: CPU only).
std::vector<DeviceInfo> list_devices();
// Why a build lists no devices at all ("" when it has device backends).
std::string_view device_support_note();
// The devices of a --device list ("Vulkan0,Vulkan1"; "none": no device), each by its
// list_devices() name, in the order given; "" picks the first hardware GPU (none: an empty list).
// A name this machine lacks is an error naming the devices there are.
Expected<std::vector<DeviceInfo>> select_devices(std::string_view list);

// A new backend of the named kind ("cpu").
Expected<std::unique_ptr<Backend>> create_backend(std::string_view name, const BackendOptions& opt);
// The names create_backend accepts in this build, highest priority first.
std::vector<std::string> backend_names();
// "cpu,cuda" -> {"cpu", "cuda"}: a comma-separated list, each name checked, no duplicates.
Expected<std::vector<std::string>> parse_backend_list(std::string_view list);

}  // namespace minfer
