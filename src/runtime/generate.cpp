#include "runtime/generate.h"

#include <chrono>

#include "sampling/stop.h"

namespace minfer {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kLength: return "length";
    case StopReason::kEog: return "eog";
    case StopReason::kStopString: return "stop";
    case StopReason::kContextFull: return "context";
    case StopReason::kCancelled: return "cancelled";
  }
  return "?";
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Expected<GenerateStats> generate(Session& session, const Tokenizer& tok, Sampler& sampler,
                                 std::span<const int32_t> prompt, const GenerateParams& params,
                                 const TextSink& on_text) {
  GenerateStats st;
  if (prompt.empty()) return make_error("generate: the prompt is empty (no tokens to start from)");
  const int room = session.n_ctx() - session.n_past();
  if (static_cast<int>(prompt.size()) >= room)
    return make_error("generate: the prompt has {} tokens but only {} of the context's {} positions are free "
                      "(raise -c or shorten the prompt)",
                      prompt.size(), room, session.n_ctx());

  auto t0 = std::chrono::steady_clock::now();
  auto logits = session.decode(prompt, 1);
  if (!logits) return logits.error();
  st.n_prompt = static_cast<int>(prompt.size());
  st.prompt_s = seconds_since(t0);
  sampler.accept_prompt(prompt);

  StreamDecoder text(tok);
  StopScanner stops(params.stop);
  auto emit = [&](const std::string& s) { return s.empty() || on_text(s); };
  t0 = std::chrono::steady_clock::now();
  for (;;) {
    auto next = sampler.sample(*logits);
    if (!next) return next.error();
    const int32_t id = *next;
    sampler.accept(id);
    st.n_gen++;
    if (tok.is_eog(id) && !params.ignore_eog) {
      st.reason = StopReason::kEog;
      break;
    }
    st.tokens.push_back(id);
    const StopScanner::Step step = stops.feed(text.push(id));
    if (!emit(step.text)) {
      st.reason = StopReason::kCancelled;
      break;
    }
    if (step.stopped) {
      st.reason = StopReason::kStopString;
      break;
    }
    if (params.n_predict >= 0 && st.n_gen >= params.n_predict) {
      st.reason = StopReason::kLength;
      break;
    }
    if (session.n_past() >= session.n_ctx()) {
      st.reason = StopReason::kContextFull;
      break;
    }
    logits = session.decode(std::span<const int32_t>(&id, 1), 1);
    if (!logits) return logits.error();
    st.n_decoded++;
  }
  st.gen_s = seconds_since(t0);
  if (st.reason != StopReason::kStopString && st.reason != StopReason::kCancelled) {
    std::string rest = stops.feed(text.flush()).text;
    if (!stops.stopped()) rest += stops.finish();
    emit(rest);
  }
  return st;
}

}  // namespace minfer
