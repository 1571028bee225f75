// What the main command needs before its first token, one-shot and chat alike: the model loaded
// with the context options (cli/load-model.h), the sampler, speculative decoding when asked,
// and the lines that describe them on stderr:
//
//   [model] SmolLM2 135M: llama, 2 threads, ctx 4096, f16 KV
//   [sampler] seed 8127764: top-k 40 -> top-p 0.95 -> min-p 0.05 -> temp 0.8 -> draw(...)   (-v)
//   [spec] n-gram 2..5, up to 4 tokens                                                      (--spec-*)
//
//   auto run = prepare_main(o, path);
//   if (!run) return fail("", run.error().message);
//   generate(*run->lm.session, *run->lm.tok, *run->sampler, ...);
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli/load-model.h"
#include "cli/main-options.h"
#include "cli/spec-options.h"
#include "core/status.h"
#include "sampling/sampler.h"

namespace minfer::cli {

struct MainSetup {
  RunnableModel lm;
  std::optional<Sampler> sampler;
  std::unique_ptr<SpecSetup> spec;  // null: no speculative decoding
};

Expected<MainSetup> prepare_main(const MainOptions& o, const std::string& path);

}  // namespace minfer::cli
