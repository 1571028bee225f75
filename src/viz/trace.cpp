#include "viz/trace.h"

#include <algorithm>
#include <cmath>

#include "graph/ops.h"
#include "viz/node-stats.h"

using nlohmann::json;

namespace minfer::viz {

std::vector<std::pair<int32_t, float>> top_probabilities(std::span<const float> logits, int k) {
  std::vector<std::pair<int32_t, float>> out;
  if (logits.empty()) return out;
  const float mx = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l - mx));
  std::vector<int32_t> idx(logits.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  const size_t kk = std::min<size_t>(static_cast<size_t>(k), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(kk), idx.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (size_t i = 0; i < kk; ++i)
    out.emplace_back(idx[i], static_cast<float>(std::exp(static_cast<double>(logits[idx[i]] - mx)) / z));
  return out;
}

TraceRecorder::TraceRecorder(const Tokenizer& tok, Sink sink, bool keep)
    : tok_(tok), sink_(std::move(sink)), keep_(keep), last_(std::chrono::steady_clock::now()) {}

void TraceRecorder::emit(json e) {
  if (sink_) sink_(e);
  if (keep_) events_.push_back(std::move(e));
}

void TraceRecorder::start(const std::string& model, const std::string& prompt, int prompt_tokens) {
  model_ = model;
  prompt_ = prompt;
  emit({{"type", "start"}, {"model", model}, {"prompt", prompt}, {"prompt_tokens", prompt_tokens}});
}

void TraceRecorder::on_node(const Node& n, const void* host_data) {
  const auto now = std::chrono::steady_clock::now();
  const double us = std::chrono::duration<double, std::micro>(now - last_).count();
  const NodeStats s = node_stats(n, host_data);
  json e = {{"type", "node"},
            {"step", step_},
            {"id", n.id},
            {"name", n.name},
            {"op", std::string(op_name(n.op))},
            {"dtype", std::string(dtype_name(n.type))},
            {"shape", {n.ne[0], n.ne[1], n.ne[2], n.ne[3]}},
            {"us", std::round(us * 10) / 10}};
  if (s.numeric) {
    // Values to 4 significant digits (a heatmap cell), stats to 6: a live page parses thousands
    // of these a second, and a float's 17 printed digits made each event ~3x larger.
    auto finite = [](double v, int digits) {
      if (!std::isfinite(v)) return json(nullptr);
      if (v == 0) return json(0.0);
      const double m = std::pow(10.0, digits - 1 - std::floor(std::log10(std::fabs(v))));
      return json(std::round(v * m) / m);
    };
    json values = json::array();
    for (float v : s.values) values.push_back(finite(v, 4));
    e["stats"] = {{"min", finite(s.min, 6)}, {"max", finite(s.max, 6)}, {"mean", finite(s.mean, 6)}, {"absmean", finite(s.absmean, 6)}};
    e["values"] = std::move(values);
    e["stride"] = s.stride;
    e["n"] = s.n;
    if (s.n_nonfinite) e["nonfinite"] = s.n_nonfinite;
  }
  emit(std::move(e));
  last_ = std::chrono::steady_clock::now();  // the time spent here is not the next node's
}

GenerateHooks TraceRecorder::hooks() {
  GenerateHooks h;
  h.before_decode = [this](int step, int n_tokens) {
    step_ = step;
    emit({{"type", "step"}, {"step", step}, {"phase", step == 0 ? "prefill" : "decode"}, {"n_tokens", n_tokens}});
    last_ = std::chrono::steady_clock::now();
  };
  h.on_token = [this](int step, int32_t token, std::string_view text, std::span<const float> logits) {
    json top = json::array();
    for (const auto& [id, p] : top_probabilities(logits, 5))
      top.push_back({id, std::string(tok_.piece(id)), std::round(static_cast<double>(p) * 1e6) / 1e6});
    emit({{"type", "token"}, {"step", step}, {"token", token}, {"piece", std::string(tok_.piece(token))}, {"text", text},
          {"top", std::move(top)}});
  };
  return h;
}

void TraceRecorder::finish(const std::string& text, const std::string& finish_reason, int completion_tokens) {
  emit({{"type", "finish"}, {"text", text}, {"finish_reason", finish_reason}, {"completion_tokens", completion_tokens}});
}

json TraceRecorder::trace_json(const json& graphs) const {
  return {{"format", "minfer-trace"}, {"version", 1}, {"model", model_}, {"prompt", prompt_}, {"graphs", graphs},
          {"events", events_}};
}

}  // namespace minfer::viz
