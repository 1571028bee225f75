// `minfer --list-devices` (llama.cpp's flag, accepted before or after any command): one line per
// compute device this build can use besides the host CPU, then exit 0.
//
//   Available devices:
//     Vulkan0: llvmpipe (LLVM 15.0.6, 256 bits) (24011 MiB, software)
//
// A software device (lavapipe) runs only when named with --device: our CPU kernels are faster.
#include <fmt/format.h>

#include <cstdio>

#include "backends/registry/registry.h"
#include "cli/commands.h"

namespace minfer::cli {

int cmd_list_devices() {
  const std::vector<DeviceInfo> devices = list_devices();
  std::printf("Available devices:\n");
  for (const DeviceInfo& d : devices)
    std::printf("  %s: %s (%llu MiB%s)\n", d.name.c_str(), d.description.c_str(),
                static_cast<unsigned long long>(d.memory_bytes >> 20), d.software ? ", software" : "");
  if (devices.empty()) {
    const std::string_view note = device_support_note();
    std::printf("  (none: every layer runs on the CPU%s%s)\n", note.empty() ? "" : "; ",
                std::string(note).c_str());
  }
  return 0;
}

}  // namespace minfer::cli
