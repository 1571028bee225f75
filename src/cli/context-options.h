// Options about the KV cache that every command creating a context shares (one declaration,
// one help text). Usage:
//   bool swa_full = false;
//   add_swa_full_flag(app, swa_full);   // then SessionParams::swa_full / EngineParams::swa_full
#pragma once

#include <CLI/CLI.hpp>

namespace minfer::cli {

inline void add_swa_full_flag(CLI::App& app, bool& swa_full) {
  app.add_flag("--swa-full", swa_full,
               "sliding-window layers keep the whole context in their KV cache (default: only the window, "
               "a ring of n_swa + n_batch rows; full caches let any prefix be reused or rolled back)");
}

}  // namespace minfer::cli
