// Backends by name. Code above backends/ (runtime, tools) creates its backends here and sees
// them only as graph/backend.h's Backend; adding a backend is one entry in registry.cpp.
//
//   auto b = create_backend("cpu", {.n_threads = 4});
//   if (!b) return b.error();                        // "unknown backend 'gpu' (available: cpu)"
//   Scheduler sched({b->get()});
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/backend.h"

namespace minfer {

struct BackendOptions {
  int n_threads = 0;  // host threads for compute; 0 = all hardware threads
};

// A new backend of the named kind ("cpu").
Expected<std::unique_ptr<Backend>> create_backend(std::string_view name, const BackendOptions& opt);
// The names create_backend accepts in this build, highest priority first.
std::vector<std::string> backend_names();
// "cpu,cuda" -> {"cpu", "cuda"}: a comma-separated list, each name checked, no duplicates.
Expected<std::vector<std::string>> parse_backend_list(std::string_view list);

}  // namespace minfer
