// Loading a model for a command that runs it, with what the user sees meanwhile: on a terminal a
// "[load] NAME (105 MB) 1.2 s" line that ticks while the file is mapped, checked and its weights
// repacked for the CPU kernels; then, on every stderr (not with -q), the time it took:
//
//   [load] SmolLM2-135M-Instruct-Q4_1.gguf (105 MB) in 0.31 s
//
//   auto lm = load_runnable(path, ctx_options);   // model, tokenizer, session, ready to decode
//   if (!lm) return fail("", lm.error().message);
//   Session& s = *lm->session;
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cli/options.h"
#include "core/status.h"
#include "models/model.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

// The ticking line; done() prints the final one. Quiet (-q) or not a terminal: no ticking.
class LoadProgress {
 public:
  explicit LoadProgress(const std::string& path);
  ~LoadProgress();
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;
  // Stops the ticking and prints "[load] NAME (SIZE) in S s"; returns the seconds.
  double done();
  // Stops the ticking and clears its line (an error follows).
  void abandon();

 private:
  void stop();
  std::string label_;
  double t0_ = 0;
  std::atomic<bool> stop_{false};
  bool ticking_ = false;
  std::thread ticker_;
};

struct RunnableModel {
  std::shared_ptr<const Model> model;
  std::optional<Tokenizer> tok;
  std::unique_ptr<Session> session;
  double load_s = 0;
};

// Maps PATH, reads its tokenizer, creates a session with the context options (-c capped at the
// model's, 0 = the model's) and prepares the one-token graph, so that every weight is repacked
// before the prompt is timed. --mlock is applied after.
Expected<RunnableModel> load_runnable(const std::string& path, const ContextOptions& co);

}  // namespace minfer::cli
