#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "runtime/verify.h"

namespace minfer {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

Expected<GenerateStats> generate(Session& session, const Tokenizer& tok, Sampler& sampler,
                                 std::span<const int32_t> prompt, const GenerateParams& params,
                                 const TextSink& on_text, const GenerateHooks& hooks, const GenerateSpec& gs) {
  GenerateStats st;
  if (prompt.empty()) return make_error("generate: the prompt is empty (no tokens to start from)");
  const int room = session.n_ctx() - session.n_past();
  if (static_cast<int>(prompt.size()) >= room)
    return make_error("generate: the prompt has {} tokens but only {} of the context's {} positions are free "
                      "(raise -c or shorten the prompt)",
                      prompt.size(), room, session.n_ctx());
  Speculator* spec = gs.spec;
  if (spec && static_cast<int>(gs.cached.size()) != session.n_past())
    return make_error("generate: {} cached tokens given for a session holding {}", gs.cached.size(), session.n_past());

  auto t0 = Clock::now();
  int n_step = 0;
  if (hooks.before_decode) hooks.before_decode(n_step, static_cast<int>(prompt.size()));
  int n_done = 0;  // prompt tokens through the model when on_prefill stopped it
  bool cancelled = false;
  DecodeProgress progress;
  if (hooks.on_prefill)
    progress = [&](int done, int total) {
      n_done = done;
      cancelled = !hooks.on_prefill(done, total);
      return !cancelled;
    };
  auto logits = session.decode(prompt, 1, progress);
  if (!logits && cancelled) {
    st.n_prompt = n_done;
    st.prompt_s = seconds_since(t0);
    st.prefill_cancelled = true;
    st.reason = StopReason::kCancelled;
    return st;
  }
  if (!logits) return logits.error();
  st.n_prompt = static_cast<int>(prompt.size());
  st.prompt_s = seconds_since(t0);
  sampler.accept_prompt(prompt);
  if (params.n_predict == 0) return st;  // -n 0: the prompt is read, nothing is sampled (reason: length)
  const SpecStats spec0 = spec ? spec->stats() : SpecStats{};

  // history: the tokens in the cache (speculative decoding only: what drafting looks at).
  std::vector<int32_t> history;
  if (spec) {
    history.assign(gs.cached.begin(), gs.cached.end());
    history.insert(history.end(), prompt.begin(), prompt.end());
  }
  TokenStep step(tok, sampler, params);
  std::vector<int32_t> run;  // the last pass's tokens after the prompt: [next, drafts...]
  Speculator::Plan plan;     // its drafts
  double pass_s = 0;
  t0 = Clock::now();
  const std::clock_t cpu0 = std::clock();
  for (;;) {
    // Sample the last pass's rows (row i follows run[i], the prompt's last token for the
    // prefill), keep the drafts the samples agree with, roll the rest back (verify.h).
    auto v = verify_drafts(session.context(), 0, step, *logits, plan, {.spec = spec, .verify_s = pass_s},
                           [&](int, std::span<const float> row, TokenStep::Result& r) {
                             if (hooks.on_token) hooks.on_token(n_step, r.token, r.text, row);
                             if (!r.text.empty() && !on_text(r.text)) {
                               step.end();
                               st.reason = StopReason::kCancelled;
                               return false;
                             }
                             if (r.done) st.reason = r.reason;
                             return true;
                           });
    if (!v) return v.error();
    if (!v->sampled) return v->sampled.error();
    const int j = v->n_accepted;
    if (n_step > 0) st.n_decoded += j + 1;
    if (spec && n_step > 0) history.insert(history.end(), run.begin(), run.begin() + j + 1);
    if (v->next < 0) break;

    // The next pass: `next`, and what the speculator drafts after it.
    run.assign(1, v->next);
    plan = {};
    if (spec) {
      history.push_back(v->next);
      const int n_free = std::min(session.n_ctx() - session.n_past(), session.n_batch());  // the pass: one batch
      auto p = spec->draft(history, draft_limit(n_free, params.n_predict, step.n_gen()));
      history.pop_back();
      if (!p) return p.error();
      plan = std::move(*p);
      run.insert(run.end(), plan.tokens.begin(), plan.tokens.end());  // draft() settled it: usable or empty
    }
    ++n_step;
    if (hooks.before_decode) hooks.before_decode(n_step, static_cast<int>(run.size()));
    const auto tp = Clock::now();
    logits = session.decode(run, static_cast<int>(run.size()));
    if (!logits) return logits.error();
    pass_s = seconds_since(tp);
    st.n_passes++;
  }
  st.gen_s = seconds_since(t0);
  st.gen_cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  st.n_gen = step.n_gen();
  st.tokens = step.tokens();
  if (spec) {
    st.spec = spec->stats().since(spec0);
  }
  return st;
}

}  // namespace minfer
