#include "runtime/generate.h"

#include <chrono>

namespace minfer {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Expected<GenerateStats> generate(Session& session, const Tokenizer& tok, Sampler& sampler,
                                 std::span<const int32_t> prompt, const GenerateParams& params,
                                 const TextSink& on_text, const GenerateHooks& hooks) {
  GenerateStats st;
  if (prompt.empty()) return make_error("generate: the prompt is empty (no tokens to start from)");
  const int room = session.n_ctx() - session.n_past();
  if (static_cast<int>(prompt.size()) >= room)
    return make_error("generate: the prompt has {} tokens but only {} of the context's {} positions are free "
                      "(raise -c or shorten the prompt)",
                      prompt.size(), room, session.n_ctx());

  auto t0 = std::chrono::steady_clock::now();
  int n_step = 0;
  if (hooks.before_decode) hooks.before_decode(n_step, static_cast<int>(prompt.size()));
  auto logits = session.decode(prompt, 1);
  if (!logits) return logits.error();
  st.n_prompt = static_cast<int>(prompt.size());
  st.prompt_s = seconds_since(t0);
  sampler.accept_prompt(prompt);

  TokenStep step(tok, sampler, params);
  t0 = std::chrono::steady_clock::now();
  for (;;) {
    auto r = step.next(*logits, session.n_ctx() - session.n_past());
    if (!r) return r.error();
    if (hooks.on_token) hooks.on_token(n_step, r->token, r->text, *logits);
    if (!r->text.empty() && !on_text(r->text)) {
      step.end();
      st.reason = StopReason::kCancelled;
      break;
    }
    if (r->done) {
      st.reason = r->reason;
      break;
    }
    if (hooks.before_decode) hooks.before_decode(++n_step, 1);
    logits = session.decode(std::span<const int32_t>(&r->token, 1), 1);
    if (!logits) return logits.error();
    st.n_decoded++;
  }
  st.gen_s = seconds_since(t0);
  st.n_gen = step.n_gen();
  st.tokens = step.tokens();
  return st;
}

}  // namespace minfer
