#include "server/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <future>
#include <optional>
#include <span>

#include "runtime/context.h"
#include "runtime/draft-model.h"
#include "runtime/prefix-reuse.h"
#include "runtime/speculative.h"
#include "runtime/step.h"
#include "runtime/verify.h"
#include "sampling/sampler.h"
#include "server/token-logprobs.h"

namespace minfer::server {

namespace {

using Clock = std::chrono::steady_clock;

// One sequence's state. `cached` are the tokens whose K/V sit in the slot's sequence of the
// context (positions 0 .. cached.size() - 1); they outlive the job so that the next one can
// reuse a common prefix.
struct Slot {
  int id = 0;
  std::vector<int32_t> cached;
  bool active = false;
  Job job;
  std::optional<Sampler> sampler;
  std::optional<TokenStep> step;
  size_t n_fed = 0;       // prompt tokens in the cache (reused + prefilled)
  int n_cached = 0;       // prompt tokens reused (from this slot or copied from another)
  int32_t next = -1;      // sampled, not yet decoded (-1 while prefilling)
  Clock::time_point submitted;
  bool first_token = true;
  std::vector<TokenLogprob> pending_lp;
  std::vector<int32_t> pending_tokens;
  std::optional<Speculator> spec;  // speculative jobs
  Speculator::Plan plan;           // the drafts of the pass being run
  Clock::time_point started, first_at;  // prefill started; first token sampled
  // Set by on_logits when the job ends with the token just sampled (carried out after the
  // pass's rows are walked and the cache rolled back): done with end_text.
  bool ending = false;
  std::string end_text;
  const char* end_reason = nullptr;
  const char* end_stop_type = "limit";
  std::string end_stop_word;
  bool end_context_full = false;  // the job ended because the slot's context was full
  bool shifted = false;           // the job's context was shifted (its reply is "truncated" too)
  // Embedding jobs: the input being read, its kept rows [rows][n_embd], the inputs done.
  size_t e_input = 0;
  std::vector<float> e_rows;
  std::vector<JobEvent::Embedding> e_out;
};

struct Queued {
  Job job;
  Clock::time_point submitted;
};

const char* finish_reason(StopReason r) {
  return r == StopReason::kLength || r == StopReason::kContextFull ? "length" : "stop";
}

// A prefix in another slot is copied instead of prefilled when it is at least this much longer.
constexpr size_t kMinCopyGain = 16;

}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  const Tokenizer* tok = nullptr;
  // The vocabulary's token trie for grammar masks: built on the first job with a grammar.
  std::shared_ptr<const TokenTrie> trie;
  std::shared_ptr<const TokenTrie> grammar_trie() {
    if (!trie) trie = grammar_tokens(*tok);
    return trie;
  }
  EngineParams p;
  int n_vocab = 0;
  std::unique_ptr<Context> ctx;

  std::vector<Slot> slots;
  mutable std::mutex mu;  // guards queue, the flags below, metrics
  std::condition_variable cv;
  std::deque<Queued> queue;
  bool draining = false;
  bool stopping = false;
  std::string cancel_reason;  // cancel_all() asked for, not yet carried out
  bool cancel_pending = false;
  EngineMetrics m;
  std::vector<Engine::SlotInfo> published;  // what slots() returns: refreshed after every step (mu)
  Clock::time_point last_progress = Clock::now();
  std::thread thread;

  // Test hook (MINFER_TEST_STEP_DELAY_MS): every step takes at least this long, so tests can
  // see a slow engine (watchdog, drain timeout) without a slow machine.
  std::chrono::milliseconds step_delay{0};

  Batch batch;
  std::vector<Slot*> owners;  // [batch row] whose token it is
  struct Want {
    Slot* slot;
    int n_rows;               // its logits rows: 1, or 1 + drafts while generating
  };
  std::vector<Want> wants;    // slots whose logits rows come back, in row order
  std::unique_ptr<DraftModel> draft;

  // ---- events ----

  void emit(Slot& s, std::string text, bool done, const char* reason) {
    JobEvent ev;
    ev.kind = done ? JobEvent::kDone : JobEvent::kText;
    ev.index = s.job.index;
    ev.text = std::move(text);
    ev.logprobs = std::move(s.pending_lp);
    s.pending_lp.clear();
    ev.tokens = std::move(s.pending_tokens);
    s.pending_tokens.clear();
    // Usage and times so far (the final ones on kDone; timings_per_token streams them).
    ev.n_prompt = static_cast<int>(s.job.prompt.size());
    ev.n_cached = s.n_cached;
    ev.n_gen = s.step ? s.step->n_gen() : 0;
    if (s.spec) {
      ev.n_draft = s.spec->stats().n_drafted;
      ev.n_draft_accepted = s.spec->stats().n_accepted;
    }
    const auto now = Clock::now();
    const Clock::time_point first = s.first_token ? now : s.first_at;
    ev.prompt_ms = std::chrono::duration<double, std::milli>(first - s.started).count();
    ev.predicted_ms = std::chrono::duration<double, std::milli>(now - first).count();
    if (done) {
      ev.finish_reason = reason;
      ev.truncated = s.end_context_full || s.shifted;
      ev.n_kv = ctx->seq_len(s.id);
      std::lock_guard<std::mutex> lk(mu);
      m.prompt_s += ev.prompt_ms / 1000.0;
      m.predicted_s += ev.predicted_ms / 1000.0;
    }
    if (done) {
      ev.stop_type = s.end_stop_type;
      ev.stop_word = s.end_stop_word;
      ev.slot = s.id;
    }
    if (!done && ev.text.empty() && ev.logprobs.empty() && ev.tokens.empty()) return;
    s.job.channel->push(std::move(ev));
  }

  void progress(Slot& s) {
    if (!s.job.return_progress) return;
    JobEvent ev;
    ev.kind = JobEvent::kProgress;
    ev.index = s.job.index;
    ev.progress_total = static_cast<int>(s.job.prompt.size());
    ev.progress_cache = s.n_cached;
    ev.progress_processed = static_cast<int>(s.n_fed);
    // The first event comes before any prompt token is decoded: no time has gone into it yet.
    ev.progress_ms = s.n_fed == static_cast<size_t>(s.n_cached) ? 0.0
                                                                 : std::chrono::duration<double, std::milli>(Clock::now() - s.started).count();
    s.job.channel->push(std::move(ev));
  }

  static void push_error(Job& job, const std::string& msg) {
    JobEvent ev;
    ev.kind = JobEvent::kError;
    ev.index = job.index;
    ev.error = msg;
    job.channel->push(std::move(ev));
  }

  void count_busy() {  // mu held
    m.slots_busy = static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const Slot& x) { return x.active; }));
  }

  // The engine thread's view of every slot, for slots() (engine thread; takes mu).
  void publish() {
    std::lock_guard<std::mutex> lk(mu);
    published.resize(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      const Slot& s = slots[i];
      Engine::SlotInfo& o = published[i];
      o = {};
      o.id = s.id;
      o.processing = s.active;
      o.n_cached = static_cast<int>(s.cached.size());
      if (s.active) {
        o.n_prompt = static_cast<int>(s.job.prompt.size());
        o.n_decoded = s.step ? s.step->n_gen() : 0;
        o.n_predict = s.job.n_predict;
      }
    }
  }

  void release(Slot& s) {
    s.step.reset();
    s.spec.reset();
    s.plan = {};
    s.ending = false;
    s.end_text.clear();
    s.sampler.reset();
    s.job = Job{};
    s.pending_lp.clear();
    s.pending_tokens.clear();
    s.end_stop_type = "limit";
    s.end_stop_word.clear();
    s.end_context_full = false;
    s.shifted = false;
    s.e_input = 0;
    s.e_rows.clear();
    s.e_out.clear();
    std::lock_guard<std::mutex> lk(mu);
    s.active = false;
    count_busy();
  }

  // Ends the slot's job with an error event. `keep_cache`: what the cache holds is intact.
  void fail(Slot& s, const std::string& msg, bool keep_cache = true) {
    mark_idle(s);
    push_error(s.job, msg);
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_jobs_failed++;
    }
    if (!keep_cache || s.job.embed) {  // an embedding job's rows are no conversation to keep
      s.cached.clear();
      ctx->seq_clear(s.id);
    }
    release(s);
  }

  void mark_idle(const Slot& s) {  // in slots() and metrics() before the job's last event can be read
    std::lock_guard<std::mutex> lk(mu);
    count_busy();
    if (s.active) m.slots_busy--;
    if (static_cast<size_t>(s.id) < published.size())
      published[static_cast<size_t>(s.id)] = {.id = s.id, .processing = false, .n_cached = static_cast<int>(s.cached.size())};
  }

  void done(Slot& s, std::string text, const char* reason) {
    mark_idle(s);
    emit(s, std::move(text), true, reason);
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_jobs_done++;
    }
    release(s);
  }

  // ---- admission ----

  // Ends queued jobs that are cancelled or past their deadline or the queue timeout. mu held.
  void expire_queued(Clock::time_point now) {
    for (auto it = queue.begin(); it != queue.end();) {
      const char* why = nullptr;
      if (it->job.channel->cancelled()) {
        why = "cancelled";
        m.n_jobs_cancelled++;
      } else if (now > it->job.deadline) {
        why = "timed out waiting for a slot (--timeout)";
        m.n_jobs_timed_out++;
      } else if (p.queue_timeout_s > 0 && now - it->submitted > std::chrono::duration<double>(p.queue_timeout_s)) {
        why = "timed out waiting for a slot (queue timeout)";
        m.n_jobs_timed_out++;
      }
      if (!why) {
        ++it;
        continue;
      }
      push_error(it->job, why);
      m.n_jobs_failed++;
      it = queue.erase(it);
    }
    m.queued = static_cast<int>(queue.size());
  }

  // Moves queued jobs into free slots, in queue order, each to the free slot with the longest
  // cached common prefix; a job pinned to a busy slot (id_slot) waits without holding back the
  // jobs behind it.
  void admit() {
    for (;;) {
      Queued q;
      Slot* best = nullptr;
      size_t best_n = 0;
      {
        std::lock_guard<std::mutex> lk(mu);
        expire_queued(Clock::now());
        auto it = queue.begin();
        for (; it != queue.end() && !best; ++it) {
          const Job& job = it->job;
          for (Slot& s : slots) {
            if (s.active || (job.id_slot >= 0 && s.id != job.id_slot)) continue;
            const size_t n = job.cache_prompt ? common_prefix(s.cached, job.prompt) : 0;
            if (!best || n > best_n || (n == best_n && s.cached.size() < best->cached.size())) {
              best = &s;
              best_n = n;
            }
          }
          if (best) break;
        }
        if (!best) return;
        q = std::move(*it);
        queue.erase(it);
        m.queued = static_cast<int>(queue.size());
        best->active = true;
        count_busy();
      }
      start(*best, std::move(q));
    }
  }

  void start(Slot& s, Queued q) {
    if (q.job.embed) return start_embed(s, std::move(q));
    Job& job = q.job;
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
    if (!copied) {
      if (Status st = keep_prefix(*ctx, s.id, s.cached, keep); !st) {
        s.job = std::move(job);
        return fail(s, "cache edit failed: " + st.error().message, false);
      }
    }
    s.job = std::move(job);
    s.sampler.emplace(std::move(*sampler));
    s.sampler->accept_prompt(s.job.prompt);
    s.step.emplace(*tok, *s.sampler, StepParams{.n_predict = s.job.n_predict, .stop = s.job.stop, .ignore_eog = s.job.ignore_eog, .grammar = s.job.grammar, .grammar_tokens = s.job.grammar ? grammar_trie() : nullptr, .grammar_triggers = s.job.grammar_triggers});
    s.n_fed = keep;
    s.n_cached = static_cast<int>(keep);
    s.next = -1;
    s.submitted = q.submitted;
    s.first_token = true;
    s.pending_lp.clear();
    s.pending_tokens.clear();
    if (s.job.spec) s.spec.emplace(*s.job.spec, s.job.spec->model ? draft.get() : nullptr, s.id);
    s.plan = {};
    s.started = Clock::now();
    progress(s);
    std::lock_guard<std::mutex> lk(mu);
    m.n_cached_tokens += static_cast<int64_t>(keep);
  }

  // ---- embeddings ----

  // An embedding job starts on slot s: the slot's cached conversation is given up; its inputs
  // are read one after another by embed_step().
  void start_embed(Slot& s, Queued q) {
    s.job = std::move(q.job);
    s.submitted = q.submitted;
    s.started = Clock::now();
    s.n_cached = 0;
    s.n_fed = 0;
    s.cached.clear();
    ctx->seq_clear(s.id);
    s.e_input = 0;
    s.e_rows.clear();
    s.e_out.clear();
  }

  Batch ebatch;
  std::vector<Slot*> eowners;                 // [kept row] whose row it is
  std::vector<std::pair<Slot*, int>> efed;    // slots in this pass and how many tokens each

  // One pass of decode_embeddings over the next chunk of every embedding slot (at most n_batch
  // tokens in all, but always one chunk), between generation steps, so a long embedding
  // request never holds generation up for more than a chunk. Returns whether it ran.
  bool embed_step() {
    ebatch.clear();
    eowners.clear();
    efed.clear();
    int n = 0;
    for (Slot& s : slots) {
      if (!s.active || !s.job.embed) continue;
      const Job::Embed& how = *s.job.embed;
      const std::vector<int32_t>& in = how.inputs[s.e_input].ids;
      const int pos = ctx->seq_len(s.id);
      const int len = std::min(static_cast<int>(in.size()) - pos, p.n_batch);
      if (n > 0 && n + len > p.n_batch) continue;
      const bool all_rows = how.pooling == Pooling::kMean || how.pooling == Pooling::kNone;
      for (int i = pos; i < pos + len; ++i) {
        const bool keep = all_rows || (how.pooling == Pooling::kCls && i == 0) ||
                          (how.pooling == Pooling::kLast && i + 1 == static_cast<int>(in.size()));
        ebatch.add(in[static_cast<size_t>(i)], i, s.id, keep);
        if (keep) eowners.push_back(&s);
      }
      efed.emplace_back(&s, len);
      n += len;
    }
    if (n == 0) return false;
    auto out = ctx->decode_embeddings(ebatch);
    if (!out) {
      for (auto& [s, len] : efed) fail(*s, "decode failed: " + out.error().message, false);
      return true;
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_steps++;
      m.n_step_tokens += n;
      m.n_prompt_tokens += n;
      last_progress = Clock::now();
    }
    const size_t d = static_cast<size_t>(ctx->n_embd());
    for (size_t r = 0; r < eowners.size(); ++r)
      eowners[r]->e_rows.insert(eowners[r]->e_rows.end(), out->begin() + static_cast<std::ptrdiff_t>(r * d),
                                out->begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
    for (auto& [sp, len] : efed) {
      Slot& s = *sp;
      const Job::Embed& how = *s.job.embed;
      const Job::Embed::Input& in = how.inputs[s.e_input];
      if (ctx->seq_len(s.id) < static_cast<int>(in.ids.size())) continue;  // more chunks to come
      JobEvent::Embedding e;  // this input is read: its vector(s)
      e.input = in.index;
      e.n_tokens = static_cast<int>(in.ids.size());
      const int n_rows = static_cast<int>(s.e_rows.size() / d);
      if (how.pooling == Pooling::kNone) {
        for (int r = 0; r < n_rows; ++r)
          e.rows.emplace_back(s.e_rows.begin() + static_cast<std::ptrdiff_t>(r * d), s.e_rows.begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
      } else {
        std::vector<float> v = pool(s.e_rows, n_rows, static_cast<int>(d), how.pooling == Pooling::kMean ? Pooling::kMean : Pooling::kLast);
        normalize(v, how.normalize);
        e.rows.push_back(std::move(v));
      }
      s.e_out.push_back(std::move(e));
      s.e_rows.clear();
      ctx->seq_clear(s.id);
      if (++s.e_input < how.inputs.size()) continue;
      JobEvent ev;  // every input is read: the job is done
      ev.kind = JobEvent::kDone;
      ev.index = s.job.index;
      ev.finish_reason = "stop";
      ev.stop_type = "eos";
      ev.slot = s.id;
      for (const JobEvent::Embedding& x : s.e_out) ev.n_prompt += x.n_tokens;
      ev.embeddings = std::move(s.e_out);
      ev.prompt_ms = std::chrono::duration<double, std::milli>(Clock::now() - s.started).count();
      mark_idle(s);
      {
        std::lock_guard<std::mutex> lk(mu);
        m.prompt_s += ev.prompt_ms / 1000.0;
        m.n_jobs_done++;
      }
      s.job.channel->push(std::move(ev));
      release(s);
    }
    return true;
  }

  // ---- one step ----

  // The token the slot's step sampled from logits row `raw` (verify_drafts): counted, its
  // logprobs and text out. Returns false when the job ends with it; s.ending says how: the
  // caller finishes the job once the pass's other rows are settled.
  bool on_logits(Slot& s, std::span<const float> raw, TokenStep::Result& r) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (s.first_token) {
        m.ttft_s_sum += std::chrono::duration<double>(Clock::now() - s.submitted).count();
        m.ttft_count++;
        m.n_first_tokens++;
      }
      m.n_gen_tokens++;
    }
    if (s.first_token) s.first_at = Clock::now();
    s.first_token = false;
    if (s.job.top_logprobs >= 0) {
      s.pending_lp.push_back(s.job.post_sampling_probs ? post_sampling_logprob(*s.sampler, r.token, s.job.top_logprobs)
                                                       : logprob_of(raw, r.token, s.job.top_logprobs));
    }
    if (!r.eog) s.pending_tokens.push_back(r.token);
    auto end = [&](std::string text, const char* reason) {
      s.ending = true;
      s.end_text = std::move(text);
      s.end_reason = reason;
      return false;
    };
    if (r.done) {
      s.end_context_full = r.reason == StopReason::kContextFull;
      s.end_stop_type = r.reason == StopReason::kEog ? "eos" : r.reason == StopReason::kStopString ? "word" : "limit";
      s.end_stop_word = r.stop_index >= 0 ? s.job.stop[static_cast<size_t>(r.stop_index)] : std::string();
      return end(std::move(r.text), finish_reason(r.reason));
    }
    s.end_stop_type = "limit";  // a deadline
    if (Clock::now() > s.job.deadline) return end(r.text + s.step->finish(), "length");
    emit(s, std::move(r.text), false, nullptr);
    return true;
  }

  // Drafts for every generating speculative slot: n-gram lookups here, the draft model's
  // requests of all slots in one propose() call (one batch per depth).
  std::vector<DraftRequest> draft_reqs;
  std::vector<Slot*> draft_owners;
  void plan_drafts() {
    draft_reqs.clear();
    draft_owners.clear();
    std::vector<Slot*> planned;
    for (Slot& s : slots) {
      if (!s.active || s.next < 0 || !s.spec) continue;
      // With context shift a pass leaves the last position free: the shift then comes at the same
      // point as without drafts (the same positions dropped, the same reply).
      const int n_free = p.n_ctx_slot - static_cast<int>(s.cached.size()) - (p.context_shift ? 1 : 0);
      s.cached.push_back(s.next);  // the history a draft continues: the cache and `next`
      planned.push_back(&s);
      s.plan = s.spec->plan(s.cached, draft_limit(n_free, s.job.n_predict, s.step->n_gen()));
      if (s.plan.source == DraftSource::kModel) {
        draft_reqs.push_back({.seq = s.id, .history = s.cached, .n_max = s.plan.n, .p_min = s.spec->params().p_min, .out = {}});
        draft_owners.push_back(&s);
      }
    }
    if (!draft_reqs.empty()) {
      const auto t0 = Clock::now();
      const Status st = draft->propose(draft_reqs);
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(draft_reqs.size());
      for (size_t i = 0; i < draft_reqs.size(); ++i) {
        Speculator::Plan& pl = draft_owners[i]->plan;
        pl.tokens = st ? std::move(draft_reqs[i].out) : std::vector<int32_t>{};  // a failed draft: plain steps
        if (!st) draft_owners[i]->spec->note_draft_error(st.error().message);
        pl.draft_s = dt;
      }
    }
    for (Slot* s : planned) {
      s->cached.pop_back();
      s->spec->settle(s->plan);
    }
  }

  // Slots whose job ended from outside (client gone, deadline) before this step.
  void reap(Clock::time_point now) {
    for (Slot& s : slots) {
      if (!s.active) continue;
      if (s.job.channel->cancelled()) {
        {
          std::lock_guard<std::mutex> lk(mu);
          m.n_jobs_cancelled++;
        }
        fail(s, "cancelled");
      } else if (now > s.job.deadline) {
        {
          std::lock_guard<std::mutex> lk(mu);
          m.n_jobs_timed_out++;
        }
        if (s.next >= 0) {
          done(s, s.step->finish(), "length");  // generating: what it has is the answer
        } else {
          fail(s, "timed out before the prompt was processed (--timeout)");
        }
      }
    }
  }

  // Context shift (llama-server's): a generating slot whose next token would leave no free
  // position drops n_discard positions after n_keep; the runtime removes them from the cache
  // and re-ropes the later ones (Context::seq_rm), the draft model follows on its next sync.
  // A slot with nothing left to drop ends as a full context does.
  void shift_full_slots() {
    for (Slot& s : slots) {
      if (!s.active || s.job.embed || s.next < 0 || static_cast<int>(s.cached.size()) + 1 < p.n_ctx_slot) continue;
      int n_keep = s.job.n_keep < 0 ? static_cast<int>(s.job.prompt.size()) : s.job.n_keep;
      if (tok->add_bos()) n_keep += 1;
      n_keep = std::min(p.n_ctx_slot - 4, n_keep);
      const int n_left = static_cast<int>(s.cached.size()) - n_keep;
      const int n_discard = std::clamp(s.job.n_discard > 0 ? s.job.n_discard : n_left / 2, 0, std::max(0, n_left - 1));
      if (n_discard == 0) {
        s.end_context_full = true;
        s.end_stop_type = "limit";
        s.next = -1;
        done(s, s.step->finish(), "length");
        continue;
      }
      if (Status st = ctx->seq_rm(s.id, n_keep, n_keep + n_discard); !st) {
        s.next = -1;
        fail(s, "context shift failed: " + st.error().message, false);
        continue;
      }
      s.cached.erase(s.cached.begin() + n_keep, s.cached.begin() + n_keep + n_discard);
      s.shifted = true;
      std::lock_guard<std::mutex> lk(mu);
      m.n_context_shifts++;
    }
  }

  // One batched forward over every active slot. Returns false when there was nothing to run.
  bool step() {
    reap(Clock::now());
    if (p.context_shift) shift_full_slots();
    if (std::any_of(slots.begin(), slots.end(), [](const Slot& x) { return x.active && x.spec; })) plan_drafts();
    batch.clear();
    owners.clear();
    wants.clear();
    // Prompt tokens in this step: at most n_batch (but always one chunk), so the decoding slots'
    // next token is not held up by several long prompts at once.
    int prefill = 0;
    for (Slot& s : slots) {
      if (!s.active || s.job.embed) continue;  // embedding jobs: embed_step()
      std::span<const int32_t> add;
      bool last = true;
      if (s.next >= 0) {
        s.plan.tokens.insert(s.plan.tokens.begin(), s.next);  // the pass: [next, drafts...]
        add = s.plan.tokens;
      } else {
        const size_t left = s.job.prompt.size() - s.n_fed;
        const size_t len = std::min(left, static_cast<size_t>(p.n_batch));
        if (prefill > 0 && prefill + static_cast<int>(len) > p.n_batch) continue;
        prefill += static_cast<int>(len);
        add = std::span<const int32_t>(s.job.prompt).subspan(s.n_fed, len);
        last = len == left;
      }
      const int n_seq = static_cast<int>(add.size());
      const bool gen = s.next >= 0;
      for (int i = 0; i < n_seq; ++i) {
        batch.add(add[static_cast<size_t>(i)], static_cast<int32_t>(s.cached.size()) + i, s.id, gen || (last && i == n_seq - 1));
        owners.push_back(&s);
      }
      if (gen) s.plan.tokens.erase(s.plan.tokens.begin());  // back to the drafts alone
      if (last) wants.push_back({&s, gen ? n_seq : 1});
    }
    if (batch.size() == 0) return false;
    if (step_delay.count() > 0) std::this_thread::sleep_for(step_delay);
    const auto t_pass = Clock::now();
    auto logits = ctx->decode(batch);
    const double pass_s = std::chrono::duration<double>(Clock::now() - t_pass).count();
    if (!logits) {
      for (Slot& s : slots)
        if (s.active) fail(s, "decode failed: " + logits.error().message, false);
      return true;
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_steps++;
      m.n_step_tokens += batch.size();
      last_progress = Clock::now();
    }
    // Advance each slot's cache past what this step stored.
    int64_t n_prompt = 0;
    Slot* fed = nullptr;
    for (int i = 0; i < batch.size(); ++i) {
      Slot& s = *owners[static_cast<size_t>(i)];
      s.cached.push_back(batch.token[static_cast<size_t>(i)]);
      if (s.next < 0) {
        s.n_fed++;
        ++n_prompt;
        if (&s != fed && fed) progress(*fed);
        fed = &s;
      }
    }
    if (fed) progress(*fed);  // a prompt chunk went through: its slot's progress
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_prompt_tokens += n_prompt;
      const Slot* prev = nullptr;
      for (const Slot* o : owners) {
        if (o != prev) m.n_busy_slot_steps++;
        prev = o;
        m.n_tokens_max = std::max<int64_t>(m.n_tokens_max, static_cast<int64_t>(o->cached.size()));
      }
    }
    const size_t nv = static_cast<size_t>(n_vocab);
    size_t row = 0;
    for (const Want& w : wants) {
      Slot& s = *w.slot;
      s.next = -1;
      const SpecStats before = s.spec ? s.spec->stats() : SpecStats{};
      // A pass that also carried a prompt chunk says nothing about the cost of verifying.
      const VerifyParams vp{.context_shift = p.context_shift, .spec = s.spec ? &*s.spec : nullptr,
                            .verify_s = n_prompt > 0 ? -1.0 : pass_s};
      auto v = verify_drafts(*ctx, s.id, *s.step, logits->subspan(row * nv, static_cast<size_t>(w.n_rows) * nv), s.plan, vp,
                             [&](int, std::span<const float> r, TokenStep::Result& res) { return on_logits(s, r, res); });
      row += static_cast<size_t>(w.n_rows);
      s.plan = {};
      if (s.spec) {
        const SpecStats d = s.spec->stats().since(before);
        std::lock_guard<std::mutex> lk(mu);
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
      } else if (s.ending) {
        done(s, std::move(s.end_text), s.end_reason);
      } else {
        s.next = v->next;
      }
    }
    return true;
  }

  // ---- slot edits (edit_idle_slot) ----

  struct SlotTask {
    int slot = 0;
    Engine::SlotEdit fn;
    Clock::time_point deadline;
    std::promise<Status> done;
  };
  std::vector<std::shared_ptr<SlotTask>> tasks;  // mu

  // Runs the tasks whose slot is idle; ends those past their deadline.
  void run_slot_tasks() {
    std::vector<std::shared_ptr<SlotTask>> pending;
    {
      std::lock_guard<std::mutex> lk(mu);
      pending.swap(tasks);
    }
    std::vector<std::shared_ptr<SlotTask>> later;
    for (auto& t : pending) {
      Slot& s = slots[static_cast<size_t>(t->slot)];
      if (s.active) {
        if (Clock::now() > t->deadline) t->done.set_value(make_error("slot {} stayed busy (a request is running on it)", t->slot));
        else later.push_back(std::move(t));
        continue;
      }
      Status st;
      try {
        st = t->fn(*ctx, s.id, s.cached);
      } catch (const std::exception& e) {  // never let an edit take the engine thread down
        st = make_error("slot {}: {}", t->slot, e.what());
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        last_progress = Clock::now();
      }
      publish();  // GET /slots shows the edit once its reply is out
      t->done.set_value(std::move(st));
    }
    std::lock_guard<std::mutex> lk(mu);
    tasks.insert(tasks.begin(), later.begin(), later.end());
  }

  // mu held. slots_busy follows `active`, which changes under mu only.
  bool has_work_locked() const { return !queue.empty() || m.slots_busy > 0 || !tasks.empty(); }

  void cancel_everything(const std::string& reason) {
    for (Slot& s : slots)
      if (s.active) fail(s, reason);
    std::lock_guard<std::mutex> lk(mu);
    for (Queued& q : queue) {
      push_error(q.job, reason);
      m.n_jobs_failed++;
    }
    queue.clear();
    m.queued = 0;
    for (auto& t : tasks) t->done.set_value(make_error("{}", reason));
    tasks.clear();
  }

  void loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu);
        // Wake at least every 100 ms while jobs wait: queued deadlines are checked here.
        cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return stopping || cancel_pending || has_work_locked(); });
        if (stopping) break;
        if (!has_work_locked()) last_progress = Clock::now();  // idle is not stalled
      }
      bool cancel = false;
      std::string reason;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (cancel_pending) {
          cancel = true;
          reason = cancel_reason;
          cancel_pending = false;
        }
      }
      if (cancel) cancel_everything(reason);
      run_slot_tasks();
      admit();
      step();
      embed_step();
      publish();
      cv.notify_all();
    }
    cancel_everything("server shutting down");
    cv.notify_all();
  }
};

Expected<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Model> model, const Tokenizer& tok,
                                                 const EngineParams& p, const EngineDraft& dm) {
  if (p.n_slots < 1) return make_error("engine: --parallel {} must be at least 1", p.n_slots);
  if (p.n_ctx_slot < 8) return make_error("engine: context per slot {} is below 8", p.n_ctx_slot);
  if (p.n_batch < 1) return make_error("engine: n_batch {} must be at least 1", p.n_batch);
  std::unique_ptr<Engine> e(new Engine(p));
  e->params_.n_batch = std::min(p.n_batch, p.n_ctx_slot);
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  impl->tok = &tok;
  impl->p = e->params_;
  ContextParams cp;
  cp.n_seq = p.n_slots;
  cp.n_ctx_seq = p.n_ctx_slot;
  // One prompt chunk plus a pass of every other slot: its token and up to kSpecMaxDraft drafts.
  cp.n_batch = e->params_.n_batch + p.n_slots * (1 + kSpecMaxDraft);
  cp.n_threads = p.n_threads;
  cp.kv_type = p.kv_type;
  cp.backends = p.backends;
  cp.attn = AttnArith::kInvariant;
  cp.swa_full = p.swa_full;
  auto ctx = Context::create(std::move(model), cp);
  if (!ctx) return make_error("engine: {}", ctx.error().message);
  impl->ctx = std::move(*ctx);
  if (dm.model) {
    MINFER_ASSERT(dm.tok != nullptr);
    ContextParams dcp = cp;  // the target's arithmetic too: a model drafting for itself agrees exactly
    auto d = DraftModel::create(dm.model, *dm.tok, tok, dcp);
    if (!d) return make_error("engine: draft model: {}", d.error().message);
    impl->draft = std::move(*d);
  }
  impl->n_vocab = impl->ctx->n_vocab();
  impl->slots.resize(static_cast<size_t>(p.n_slots));
  for (int i = 0; i < p.n_slots; ++i) impl->slots[static_cast<size_t>(i)].id = i;
  impl->m.n_slots = p.n_slots;
  impl->publish();
  if (const char* d = std::getenv("MINFER_TEST_STEP_DELAY_MS")) impl->step_delay = std::chrono::milliseconds(std::atoi(d));
  // Build the decode graph now: allocates the KV cache and fails early if it does not fit.
  if (auto g = impl->ctx->graph(1, 1); !g) return make_error("engine: {}", g.error().message);
  e->impl_ = std::move(impl);
  Impl* raw = e->impl_.get();
  e->impl_->thread = std::thread([raw] { raw->loop(); });
  return e;
}

Engine::Engine(const EngineParams& p) : params_(p) {}

bool Engine::has_draft_model() const { return impl_->draft != nullptr; }

const Context& Engine::context() const { return *impl_->ctx; }

Engine::~Engine() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Status Engine::edit_idle_slot(int id, SlotEdit fn, std::chrono::milliseconds timeout) {
  if (id < 0 || id >= params_.n_slots) return make_error("slot {} does not exist (0 .. {})", id, params_.n_slots - 1);
  auto t = std::make_shared<Impl::SlotTask>();
  t->slot = id;
  t->fn = std::move(fn);
  t->deadline = Clock::now() + timeout;
  std::future<Status> f = t->done.get_future();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->stopping) return make_error("the server is shutting down");
    impl_->tasks.push_back(std::move(t));
  }
  impl_->cv.notify_all();
  return f.get();  // the engine thread ends every task: run, timed out, or cancelled at shutdown
}

bool Engine::submit(std::vector<Job> jobs) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->draining || impl_->stopping) return false;
    // Room: the free slots (a job passes through the queue on its way to one) plus max_queue.
    const size_t free_slots = static_cast<size_t>(std::max(0, params_.n_slots - impl_->m.slots_busy));
    if (impl_->queue.size() + jobs.size() > static_cast<size_t>(params_.max_queue) + free_slots) return false;
    const auto now = Clock::now();
    if (!impl_->has_work_locked()) impl_->last_progress = now;
    for (Job& j : jobs) impl_->queue.push_back({std::move(j), now});
    impl_->m.queued = static_cast<int>(impl_->queue.size());
  }
  impl_->cv.notify_all();
  return true;
}

void Engine::drain() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->draining = true;
}

bool Engine::wait_idle(std::chrono::milliseconds timeout) {
  drain();
  std::unique_lock<std::mutex> lk(impl_->mu);
  auto idle = [&] { return !impl_->has_work_locked() && !impl_->cancel_pending; };
  if (timeout == std::chrono::milliseconds::max()) {
    impl_->cv.wait(lk, idle);
    return true;
  }
  return impl_->cv.wait_for(lk, timeout, idle);
}

void Engine::cancel_all(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->cancel_pending = true;
    impl_->cancel_reason = reason;
  }
  impl_->cv.notify_all();
}

bool Engine::stalled() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (!impl_->has_work_locked()) return false;
  return Clock::now() - impl_->last_progress > std::chrono::duration<double>(impl_->p.watchdog_s);
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->m;
}

std::vector<Engine::SlotInfo> Engine::slots() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->published;
}

}  // namespace minfer::server
