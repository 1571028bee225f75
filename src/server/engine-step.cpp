// One batched generation step over every generating slot (engine-impl.h): a job's start on its
// slot (prefix reuse, a copied prefix), the jobs that ended from outside, context shift,
// drafts, then one decode of every slot's prompt chunk or [next, drafts...], each slot's rows
// sampled and verified by the runtime's step (runtime/verify.h).
#include <algorithm>

#include "runtime/prefix-reuse.h"
#include "runtime/verify.h"
#include "server/engine-impl.h"
#include "server/token-logprobs.h"

namespace minfer::server {

namespace {

const char* finish_reason(StopReason r) {
  return r == StopReason::kLength || r == StopReason::kContextFull ? "length" : "stop";
}

// A prefix in another slot is copied instead of prefilled when it is at least this much longer.
constexpr size_t kMinCopyGain = 16;

}  // namespace

void Engine::Impl::start(Slot& s, Job job) {
  auto sampler = Sampler::create(job.sampling, n_vocab);
  if (!sampler) {
    s.job = std::move(job);
    return fail(s, sampler.error().message);
  }
  // At least the last prompt token is decoded again: its logits start the generation.
  const size_t limit = job.prompt.size() - 1;
  size_t keep = job.cache_prompt ? reusable_prefix(*ctx, s.id, s.cached, job.prompt, limit) : 0;
  // A longer common prefix in another slot is copied instead of prefilled.
  Slot* donor = nullptr;
  size_t donor_n = 0;
  for (Slot& o : slots) {
    if (&o == &s || !job.cache_prompt) continue;
    const size_t n = std::min(common_prefix(o.cached, job.prompt), limit);
    if (n > donor_n) {
      donor = &o;
      donor_n = n;
    }
  }
  bool copied = false;
  if (donor && donor_n >= keep + kMinCopyGain) {
    if (Status st = ctx->seq_cp(donor->id, s.id, static_cast<int>(donor_n)); st) {
      s.cached.assign(donor->cached.begin(), donor->cached.begin() + static_cast<std::ptrdiff_t>(donor_n));
      keep = donor_n;
      copied = true;
    }
  }
  s.job = std::move(job);
  if (!copied) {
    if (Status st = keep_prefix(*ctx, s.id, s.cached, keep); !st) return fail(s, "cache edit failed: " + st.error().message, false);
  }
  GenRun& g = s.run.emplace<GenRun>();
  g.sampler.emplace(std::move(*sampler));
  g.sampler->accept_prompt(s.job.prompt);
  StepParams sp;
  sp.n_predict = s.job.n_predict;
  sp.stop = s.job.stop;
  sp.ignore_eog = s.job.ignore_eog;
  sp.grammar = s.job.grammar;
  sp.grammar_tokens = s.job.grammar ? grammar_trie() : nullptr;
  sp.grammar_triggers = s.job.grammar_triggers;
  g.step.emplace(*tok, *g.sampler, std::move(sp));
  g.n_fed = keep;
  g.n_cached = static_cast<int>(keep);
  if (s.job.spec) g.spec.emplace(*s.job.spec, s.job.spec->model ? draft.get() : nullptr, s.id);
  progress(s);
  m.n_cached_tokens += static_cast<int64_t>(keep);
}

// The token the slot's step sampled from logits row `raw` (verify_drafts): counted, its logprobs
// and text out. Returns false when the job ends with it; g.ending says how: the caller finishes
// the job once the pass's other rows are settled.
bool Engine::Impl::on_logits(Slot& s, std::span<const float> raw, TokenStep::Result& r) {
  GenRun& g = *s.gen();
  if (g.first_token) {
    m.ttft_s_sum += std::chrono::duration<double>(Clock::now() - s.submitted).count();
    m.ttft_count++;
    m.n_first_tokens++;
    g.first_at = Clock::now();
    g.first_token = false;
  }
  m.n_gen_tokens++;
  if (s.job.top_logprobs >= 0) {
    g.pending_lp.push_back(s.job.post_sampling_probs ? post_sampling_logprob(*g.sampler, r.token, s.job.top_logprobs)
                                                     : logprob_of(raw, r.token, s.job.top_logprobs));
  }
  if (!r.eog) g.pending_tokens.push_back(r.token);
  auto end = [&](std::string text, const char* reason) {
    g.ending = true;
    g.end_text = std::move(text);
    g.end_reason = reason;
    return false;
  };
  if (r.done) {
    g.end_context_full = r.reason == StopReason::kContextFull;
    g.end_stop_type = r.reason == StopReason::kEog ? "eos" : r.reason == StopReason::kStopString ? "word" : "limit";
    g.end_stop_word = r.stop_index >= 0 ? s.job.stop[static_cast<size_t>(r.stop_index)] : std::string();
    return end(std::move(r.text), finish_reason(r.reason));
  }
  g.end_stop_type = "limit";  // a deadline
  if (Clock::now() > s.job.deadline) return end(r.text + g.step->finish(), "length");
  emit(s, std::move(r.text), false, nullptr);
  return true;
}

// Drafts for every generating speculative slot: n-gram lookups here, the draft model's requests
// of all slots in one propose() call (one batch per depth).
void Engine::Impl::plan_drafts() {
  draft_reqs.clear();
  draft_owners.clear();
  std::vector<Slot*> planned;
  for (Slot& s : slots) {
    GenRun* g = s.gen();
    if (!g || g->next < 0 || !g->spec) continue;
    // With context shift a pass leaves the last position free: the shift then comes at the same
    // point as without drafts (the same positions dropped, the same reply).
    const int n_free = p.n_ctx_slot - static_cast<int>(s.cached.size()) - (p.context_shift ? 1 : 0);
    s.cached.push_back(g->next);  // the history a draft continues: the cache and `next`
    planned.push_back(&s);
    g->plan = g->spec->plan(s.cached, draft_limit(n_free, s.job.n_predict, g->step->n_gen()));
    if (g->plan.source == DraftSource::kModel) {
      draft_reqs.push_back({.seq = s.id, .history = s.cached, .n_max = g->plan.n, .p_min = g->spec->params().p_min, .out = {}});
      draft_owners.push_back(&s);
    }
  }
  if (!draft_reqs.empty()) {
    const auto t0 = Clock::now();
    const Status st = draft->propose(draft_reqs);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(draft_reqs.size());
    for (size_t i = 0; i < draft_reqs.size(); ++i) {
      GenRun& g = *draft_owners[i]->gen();
      g.plan.tokens = st ? std::move(draft_reqs[i].out) : std::vector<int32_t>{};  // a failed draft: plain steps
      if (!st) g.spec->note_draft_error(st.error().message);
      g.plan.draft_s = dt;
    }
  }
  for (Slot* s : planned) {
    s->cached.pop_back();
    s->gen()->spec->settle(s->gen()->plan);
  }
}

// Slots whose job ended from outside (client gone, deadline) before this step.
void Engine::Impl::reap(Clock::time_point now) {
  for (Slot& s : slots) {
    if (!s.active) continue;
    if (s.job.channel->cancelled()) {
      m.n_jobs_cancelled++;
      fail(s, "cancelled");
    } else if (now > s.job.deadline) {
      m.n_jobs_timed_out++;
      GenRun* g = s.gen();
      if (g && g->next >= 0) {
        done(s, g->step->finish(), "length");  // generating: what it has is the answer
      } else {
        fail(s, "timed out before the prompt was processed (--timeout)");
      }
    }
  }
}

// Context shift (llama-server's): a generating slot whose next token would leave no free
// position drops n_discard positions after n_keep; the runtime removes them from the cache and
// re-ropes the later ones (Context::seq_rm), the draft model follows on its next sync. A slot
// with nothing left to drop ends as a full context does.
void Engine::Impl::shift_full_slots() {
  for (Slot& s : slots) {
    GenRun* g = s.gen();
    if (!g || g->next < 0 || static_cast<int>(s.cached.size()) + 1 < p.n_ctx_slot) continue;
    int n_keep = s.job.n_keep < 0 ? static_cast<int>(s.job.prompt.size()) : s.job.n_keep;
    if (tok->add_bos()) n_keep += 1;
    n_keep = std::min(p.n_ctx_slot - 4, n_keep);
    const int n_left = static_cast<int>(s.cached.size()) - n_keep;
    const int n_discard = std::clamp(s.job.n_discard > 0 ? s.job.n_discard : n_left / 2, 0, std::max(0, n_left - 1));
    if (n_discard == 0) {
      g->end_context_full = true;
      g->end_stop_type = "limit";
      g->next = -1;
      done(s, g->step->finish(), "length");
      continue;
    }
    if (Status st = ctx->seq_rm(s.id, n_keep, n_keep + n_discard); !st) {
      g->next = -1;
      fail(s, "context shift failed: " + st.error().message, false);
      continue;
    }
    s.cached.erase(s.cached.begin() + n_keep, s.cached.begin() + n_keep + n_discard);
    g->shifted = true;
    m.n_context_shifts++;
  }
}

bool Engine::Impl::step() {
  reap(Clock::now());
  if (p.context_shift) shift_full_slots();
  if (std::any_of(slots.begin(), slots.end(), [](const Slot& x) { return x.gen() && x.gen()->spec; })) plan_drafts();
  batch.clear();
  owners.clear();
  wants.clear();
  // Prompt tokens in this step: at most n_batch (but always one chunk), so the decoding slots'
  // next token is not held up by several long prompts at once.
  int prefill = 0;
  for (Slot& s : slots) {
    GenRun* g = s.gen();
    if (!g) continue;  // free, or an embedding job (embed_step)
    std::span<const int32_t> add;
    bool last = true;
    const bool gen = g->next >= 0;
    if (gen) {
      g->plan.tokens.insert(g->plan.tokens.begin(), g->next);  // the pass: [next, drafts...]
      add = g->plan.tokens;
    } else {
      const size_t left = s.job.prompt.size() - g->n_fed;
      const size_t len = std::min(left, static_cast<size_t>(p.n_batch));
      if (prefill > 0 && prefill + static_cast<int>(len) > p.n_batch) continue;
      prefill += static_cast<int>(len);
      add = std::span<const int32_t>(s.job.prompt).subspan(g->n_fed, len);
      last = len == left;
    }
    const int n_seq = static_cast<int>(add.size());
    for (int i = 0; i < n_seq; ++i) {
      batch.add(add[static_cast<size_t>(i)], static_cast<int32_t>(s.cached.size()) + i, s.id, gen || (last && i == n_seq - 1));
      owners.push_back(&s);
    }
    if (gen) g->plan.tokens.erase(g->plan.tokens.begin());  // back to the drafts alone
    if (last) wants.push_back({&s, gen ? n_seq : 1});
  }
  if (batch.size() == 0) return false;
  if (step_delay.count() > 0) std::this_thread::sleep_for(step_delay);
  const auto t_pass = Clock::now();
  auto logits = ctx->decode(batch);
  const double pass_s = std::chrono::duration<double>(Clock::now() - t_pass).count();
  if (!logits) {
    for (Slot& s : slots)
      if (s.gen()) fail(s, "decode failed: " + logits.error().message, false);
    return true;
  }
  m.n_steps++;
  m.n_step_tokens += batch.size();
  note_progress();
  // Advance each slot's cache past what this step stored.
  int64_t n_prompt = 0;
  Slot* fed = nullptr;
  for (int i = 0; i < batch.size(); ++i) {
    Slot& s = *owners[static_cast<size_t>(i)];
    s.cached.push_back(batch.token[static_cast<size_t>(i)]);
    GenRun& g = *s.gen();
    if (g.next < 0) {
      g.n_fed++;
      ++n_prompt;
      if (&s != fed && fed) progress(*fed);
      fed = &s;
    }
  }
  if (fed) progress(*fed);  // a prompt chunk went through: its slot's progress
  m.n_prompt_tokens += n_prompt;
  const Slot* prev = nullptr;
  for (const Slot* o : owners) {
    if (o != prev) m.n_busy_slot_steps++;
    prev = o;
    m.n_tokens_max = std::max<int64_t>(m.n_tokens_max, static_cast<int64_t>(o->cached.size()));
  }
  const size_t nv = static_cast<size_t>(n_vocab);
  size_t row = 0;
  for (const Want& w : wants) {
    Slot& s = *w.slot;
    GenRun& g = *s.gen();
    g.next = -1;
    const SpecStats before = g.spec ? g.spec->stats() : SpecStats{};
    // A pass that also carried a prompt chunk says nothing about the cost of verifying.
    const VerifyParams vp{.context_shift = p.context_shift, .spec = g.spec ? &*g.spec : nullptr,
                          .verify_s = n_prompt > 0 ? -1.0 : pass_s};
    auto v = verify_drafts(*ctx, s.id, *g.step, logits->subspan(row * nv, static_cast<size_t>(w.n_rows) * nv), g.plan, vp,
                           [&](int, std::span<const float> r, TokenStep::Result& res) { return on_logits(s, r, res); });
    row += static_cast<size_t>(w.n_rows);
    g.plan = {};
    if (g.spec) {
      const SpecStats d = g.spec->stats().since(before);
      m.n_draft_tokens += d.n_drafted;
      m.n_draft_accepted += d.n_accepted;
      m.n_verify_steps += d.n_steps;
    }
    if (!v) {
      fail(s, "cache edit failed: " + v.error().message, false);
      continue;
    }
    s.cached.resize(s.cached.size() - static_cast<size_t>(v->n_rolled_back));
    if (!v->sampled) {
      fail(s, v->sampled.error().message);
    } else if (g.ending) {
      done(s, std::move(g.end_text), g.end_reason);
    } else {
      g.next = v->next;
    }
  }
  return true;
}

}  // namespace minfer::server
