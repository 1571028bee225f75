#include "cli/trace-file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "viz/graph-json.h"

namespace minfer::cli {

std::unique_ptr<TraceFile> TraceFile::from_env(Session& s, const Tokenizer& tok) {
  const char* p = std::getenv("MINFER_TRACE");
  if (!p || !*p) return nullptr;
  return std::unique_ptr<TraceFile>(new TraceFile(s, tok, p));
}

TraceFile::TraceFile(Session& s, const Tokenizer& tok, std::string path)
    : s_(s), path_(std::move(path)), rec_(tok, {}, /*keep=*/true) {
  s_.set_observer([this](const Node& n, const void* d) { rec_.on_node(n, d); });
}

TraceFile::~TraceFile() { s_.set_observer({}); }

void TraceFile::start(const std::string& model, const std::string& prompt, int n_prompt) {
  n_prompt_ = n_prompt;
  rec_.start(model, prompt, n_prompt);
}

Status TraceFile::finish(const std::string& text, const std::string& reason, int n_gen) {
  rec_.finish(text, reason, n_gen);
  s_.set_observer({});
  // The graphs the run computed: its prefill shape (n_tokens > 1 share node ids) and decode.
  auto prefill = viz::session_graph_json(s_, std::max(2, std::min(n_prompt_, s_.n_batch())), 1);
  if (!prefill) return prefill.error();
  auto decode = viz::session_graph_json(s_, 1, 1);
  if (!decode) return decode.error();
  const nlohmann::json graphs = {{"prefill", nlohmann::json::parse(*prefill)}, {"decode", nlohmann::json::parse(*decode)}};
  std::ofstream out(path_, std::ios::binary);
  out << rec_.trace_json(graphs).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out.close();
  if (!out) return make_error("MINFER_TRACE: cannot write '{}'", path_);
  std::fprintf(stderr, "[trace] %zu events written to %s\n", rec_.n_events(), path_.c_str());
  return Status::ok();
}

}  // namespace minfer::cli
