// Records a generation for the visualizer: one event per forward pass ("step"), per computed
// node (statistics, a value preview and the time since the previous node), per sampled token
// (text and top-5 probabilities), and start / finish. Events go to a sink as they happen (the
// live page, through EventHub) and, when keeping, into a trace that MINFER_TRACE writes.
//
//   TraceRecorder rec(tok, [&](const json& e) { hub.publish(e.dump()); }, /*keep=*/false);
//   session.set_observer([&](const Node& n, const void* d) { rec.on_node(n, d); });
//   GenerateHooks hooks = rec.hooks();           // step and token events from generate()
//   rec.start(model_name, prompt, n_prompt);  ... generate(..., hooks) ...;  rec.finish(...);
//   write(rec.trace_json(graphs));               // {"format": "minfer-trace", ...}
//
// Event shapes (docs/viz.md): {"type":"start", model, prompt, prompt_tokens},
// {"type":"step", step, phase:"prefill"|"decode", n_tokens}, {"type":"node", step, id, name, op,
// dtype, shape, stats:{min,max,mean,absmean}, values, stride, n, us}, {"type":"token", step,
// token, text, top:[[id, piece, p]...]}, {"type":"finish", text, finish_reason, completion_tokens}.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"

namespace minfer::viz {

class TraceRecorder {
 public:
  using Sink = std::function<void(const nlohmann::json& event)>;
  TraceRecorder(const Tokenizer& tok, Sink sink, bool keep);

  void start(const std::string& model, const std::string& prompt, int prompt_tokens);
  void on_node(const Node& n, const void* host_data);
  GenerateHooks hooks();
  void finish(const std::string& text, const std::string& finish_reason, int completion_tokens);

  // {"format":"minfer-trace","version":1, model, prompt, graphs:{prefill, decode}, events:[...]}
  // graphs: the two graph JSON documents (graph/export.h) as parsed JSON.
  nlohmann::json trace_json(const nlohmann::json& graphs) const;
  size_t n_events() const { return events_.size(); }

 private:
  void emit(nlohmann::json e);
  const Tokenizer& tok_;
  Sink sink_;
  bool keep_;
  std::vector<nlohmann::json> events_;
  std::string model_, prompt_;
  int step_ = 0;
  std::chrono::steady_clock::time_point last_;
};

// The top `k` probabilities of a logits row (softmax over the whole row): [[id, p]...].
std::vector<std::pair<int32_t, float>> top_probabilities(std::span<const float> logits, int k);

}  // namespace minfer::viz
