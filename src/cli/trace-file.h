// MINFER_TRACE=FILE for one-shot runs: records every computed node and every sampled token
// (viz/trace.h) and writes them with the run's graphs to FILE, which `minfer viz` replays
// (/?trace=FILE) and the page opens from a file picker.
//
//   auto trace = TraceFile::from_env(session, tok);     // null when MINFER_TRACE is unset
//   if (trace) trace->start(model_name, prompt, n_prompt);
//   generate(..., trace ? trace->hooks() : GenerateHooks{});
//   if (trace) trace->finish(text, reason, n_gen);      // writes FILE, says so on stderr
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "viz/trace.h"

namespace minfer::cli {

class TraceFile {
 public:
  static std::unique_ptr<TraceFile> from_env(Session& s, const Tokenizer& tok);
  ~TraceFile();
  void start(const std::string& model, const std::string& prompt, int n_prompt);
  GenerateHooks hooks() { return rec_.hooks(); }
  Status finish(const std::string& text, const std::string& reason, int n_gen);

 private:
  TraceFile(Session& s, const Tokenizer& tok, std::string path);
  Session& s_;
  std::string path_;
  int n_prompt_ = 0;
  viz::TraceRecorder rec_;
};

}  // namespace minfer::cli
