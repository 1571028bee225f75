// The generation loop shared by the CLI, the chat REPL and the server: prefill a prompt, then
// sample, check end-of-generation and stop strings, stream UTF-8-safe text, decode the token,
// until -n tokens, a stop, an end-of-generation token or a full context. With a Speculator each
// pass also carries drafted tokens: the target samples every drafted position in turn (its own
// sampler chain and RNG, exactly as plain decoding would), keeps the drafts while they agree and
// rolls the rest back (verify_drafts, verify.h: the server's slots run the same step), so the
// text is that of plain decoding, only sooner.
//
//   GenerateParams gp; gp.n_predict = 128; gp.stop = {"\nUser:"};
//   auto st = generate(*session, tok, sampler, prompt_ids, gp,
//                      [](std::string_view text) { fwrite(text.data(), 1, text.size(), stdout);
//                                                  return true; });   // false = stop now
//   if (st) fprintf(stderr, "%d tokens, %.1f tok/s\n", st->n_gen, st->gen_tps());
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "runtime/step.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

// n_predict, stop strings, ignore_eog: the step's parameters (step.h).
using GenerateParams = StepParams;

struct GenerateStats {
  int n_prompt = 0;        // tokens prefilled by this call
  double prompt_s = 0;     // prefill time
  int n_gen = 0;           // tokens sampled (the end-of-generation token included)
  int n_decoded = 0;       // generated tokens decoded into the cache (every one but the last)
  int n_passes = 0;        // forward passes after the prompt (fewer than n_decoded when drafts hold)
  double gen_s = 0;        // time in those passes, drafting and sampling
  double gen_cpu_s = 0;    // the process's CPU time in them (every thread's: with one thread, the work done)
  StopReason reason = StopReason::kLength;
  bool prefill_cancelled = false;  // on_prefill stopped the prompt: nothing was added to the session
  std::vector<int32_t> tokens;  // the generated tokens (without a final end-of-generation)
  SpecStats spec;               // drafts of this call (speculative decoding)
  double prompt_tps() const { return prompt_s > 0 ? n_prompt / prompt_s : 0; }
  double gen_tps() const { return gen_s > 0 ? n_decoded / gen_s : 0; }
};

// Called with text that is final (never half a UTF-8 character, never part of a stop string).
// Return false to cancel.
using TextSink = std::function<bool(std::string_view)>;

// Optional observers of a generation, for tracing and the visualizer (viz/): before_decode runs
// before each forward pass (step 0 is the prompt, of n_tokens; then one token per step, or with
// speculative decoding the token and its drafts, some of which may be rolled back after), and
// on_token after each sampled token with the logits row it was sampled from and the text that
// became final with it (possibly empty): with drafts, several tokens share a step.
struct GenerateHooks {
  std::function<void(int step, int n_tokens)> before_decode;
  std::function<void(int step, int32_t token, std::string_view text, std::span<const float> logits)> on_token;
  // After each batch of a prompt longer than one batch: tokens done of the prompt's. false stops
  // the prefill (Ctrl-C): the session is left as before the call, and generate() returns stats
  // with reason kCancelled, prefill_cancelled set and n_prompt the tokens that had been done.
  std::function<bool(int n_done, int n_total)> on_prefill;
};

// Speculative decoding for generate() (speculative.h): the drafting policy, and the tokens the
// session holds before the prompt (all n_past() of them: drafting looks at the whole sequence).
// The output is the same as without it, token for token.
struct GenerateSpec {
  Speculator* spec = nullptr;
  std::span<const int32_t> cached;
};

// Appends `prompt` to the session (at its current n_past) and generates. The sampler's window
// is seeded with the prompt. Errors: a prompt that does not fit the context, a decode failure.
Expected<GenerateStats> generate(Session& session, const Tokenizer& tok, Sampler& sampler,
                                 std::span<const int32_t> prompt, const GenerateParams& params,
                                 const TextSink& on_text, const GenerateHooks& hooks = {},
                                 const GenerateSpec& spec = {});

}  // namespace minfer
