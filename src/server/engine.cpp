#include "server/engine.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <span>

#include "backends/cpu/cpu-backend.h"
#include "core/thread-pool.h"
#include "graph/scheduler.h"
#include "sampling/sampler.h"
#include "sampling/stop.h"
#include "server/json-prefix.h"

namespace minfer::server {

void EventChannel::push(JobEvent ev) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (ev.kind != JobEvent::kText) --open_jobs_;
    q_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

EventChannel::PopResult EventChannel::pop(JobEvent& ev, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !q_.empty() || open_jobs_ <= 0; })) return kTimeout;
  if (q_.empty()) return kClosed;
  ev = std::move(q_.front());
  q_.pop_front();
  return kEvent;
}

namespace {

using Clock = std::chrono::steady_clock;

// One sequence's state. `cached` are the tokens whose K/V sit in the slot's cache rows
// [0, cached.size()); they outlive the job so that the next one can reuse a common prefix.
struct Slot {
  int id = 0;
  std::vector<int32_t> cached;
  bool active = false;
  Job job;
  std::optional<Sampler> sampler;
  std::optional<StreamDecoder> text;
  std::optional<StopScanner> stops;
  size_t n_fed = 0;       // prompt tokens in the cache (reused + prefilled)
  int n_cached = 0;       // prompt tokens reused from the previous job
  int32_t next = -1;      // sampled, not yet decoded (-1 while prefilling)
  int n_gen = 0;
  Clock::time_point submitted;
  bool first_token = true;
  std::vector<TokenLogprob> pending_lp;
  std::optional<JsonPrefix> json;  // json_object jobs: the output so far
};

// What one row of a step's batch belongs to.
struct RowOwner {
  Slot* slot = nullptr;
  bool wants_logits = false;
};

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TokenLogprob logprob_of(std::span<const float> logits, int32_t id, int n_top) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  TokenLogprob lp;
  lp.id = id;
  lp.logprob = logits[static_cast<size_t>(id)] - lse;
  if (n_top > 0) {
    std::vector<int32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = std::min(idx.size(), static_cast<size_t>(n_top));
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
    for (size_t i = 0; i < k; ++i) lp.top.emplace_back(idx[i], logits[static_cast<size_t>(idx[i])] - lse);
  }
  return lp;
}

}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  const Tokenizer* tok = nullptr;
  EngineParams p;
  int n_vocab = 0;
  std::unique_ptr<cpu::CpuBackend> cpu;
  std::unique_ptr<Scheduler> sched;

  struct GraphEntry {
    std::unique_ptr<PreparedGraph> pg;
    int tokens = -1, pos = -1, out_ids = -1, kv_rows = -1, kv_ranges = -1, logits = -1;
    uint64_t last_use = 0;
  };
  static constexpr size_t kMaxGraphs = 16;
  std::map<std::pair<int, int>, GraphEntry> graphs;
  uint64_t clock = 0;

  std::vector<Slot> slots;
  mutable std::mutex mu;  // guards queue, draining, stopping, metrics
  std::condition_variable cv;
  std::deque<std::pair<Job, Clock::time_point>> queue;
  bool draining = false;
  bool stopping = false;
  EngineMetrics m;
  std::thread thread;

  // Step buffers.
  std::vector<int32_t> b_tokens, b_pos, b_rows, b_ranges, b_out;
  std::vector<RowOwner> owners;
  std::vector<float> logits;

  Expected<GraphEntry*> graph(int n_tokens, int n_out) {
    const auto key = std::make_pair(n_tokens, n_out);
    auto it = graphs.find(key);
    if (it == graphs.end()) {
      if (graphs.size() >= kMaxGraphs) {
        auto lru = std::min_element(graphs.begin(), graphs.end(),
                                    [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
        graphs.erase(lru);
      }
      GraphParams gp;
      gp.n_tokens = n_tokens;
      gp.n_out = n_out;
      gp.n_ctx = static_cast<int64_t>(p.n_slots) * p.n_ctx_slot;
      gp.kv_type = p.kv_type;
      gp.multi_seq = true;
      auto pg = sched->prepare(model->build_graph(gp), {.fuse = true});
      if (!pg) return pg.error();
      GraphEntry e;
      e.pg = std::move(*pg);
      const Graph& g = e.pg->graph;
      e.tokens = g.find(kInpTokens);
      e.pos = g.find(kInpPos);
      e.out_ids = g.find(kInpOutIds);
      e.kv_rows = g.find(kInpKvRows);
      e.kv_ranges = g.find(kInpKvRanges);
      e.logits = g.outputs.at(0);
      MINFER_ASSERT(e.tokens >= 0 && e.pos >= 0 && e.kv_rows >= 0 && e.kv_ranges >= 0 &&
                    (n_out == n_tokens || e.out_ids >= 0));
      it = graphs.emplace(key, std::move(e)).first;
    }
    it->second.last_use = ++clock;
    return &it->second;
  }

  void emit(Slot& s, std::string text, bool done, const char* reason) {
    JobEvent ev;
    ev.kind = done ? JobEvent::kDone : JobEvent::kText;
    ev.index = s.job.index;
    ev.text = std::move(text);
    ev.logprobs = std::move(s.pending_lp);
    s.pending_lp.clear();
    if (done) {
      ev.finish_reason = reason;
      ev.n_prompt = static_cast<int>(s.job.prompt.size());
      ev.n_cached = s.n_cached;
      ev.n_gen = s.n_gen;
    }
    if (!done && ev.text.empty() && ev.logprobs.empty()) return;
    s.job.channel->push(std::move(ev));
  }

  void release(Slot& s) {
    s.active = false;
    s.sampler.reset();
    s.text.reset();
    s.stops.reset();
    s.job = Job{};
    s.pending_lp.clear();
    s.json.reset();
  }

  // json_object: the logits with every token masked that cannot continue the JSON object.
  // Candidates are tried best first; the kJsonCandidates best valid ones are kept (enough for
  // greedy and the default top-k 40; top-p / min-p then see that truncated set).
  static constexpr size_t kJsonCandidates = 64;
  std::vector<float> json_row;
  std::vector<int32_t> json_order;
  std::span<const float> mask_json(const Slot& s, std::span<const float> row) {
    json_order.resize(row.size());
    std::iota(json_order.begin(), json_order.end(), 0);
    std::sort(json_order.begin(), json_order.end(),
              [&](int32_t a, int32_t b) { return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)]; });
    json_row.assign(row.size(), -INFINITY);
    size_t kept = 0;
    for (int32_t id : json_order) {
      if (kept == kJsonCandidates || std::isinf(row[static_cast<size_t>(id)])) break;
      bool ok = false;
      if (tok->is_eog(id)) {
        ok = s.json->done();
      } else {
        const std::string_view piece = tok->piece(id);
        JsonPrefix t = *s.json;
        ok = !piece.empty() && t.push(piece);
      }
      if (ok) {
        json_row[static_cast<size_t>(id)] = row[static_cast<size_t>(id)];
        ++kept;
      }
    }
    return json_row;
  }

  void fail(Slot& s, const std::string& msg) {
    JobEvent ev;
    ev.kind = JobEvent::kError;
    ev.index = s.job.index;
    ev.error = msg;
    s.job.channel->push(std::move(ev));
    s.cached.clear();
    release(s);
  }

  // Ends a job that did not stop on a stop string: what the decoder and scanner still hold
  // is final now.
  void finish(Slot& s, const char* reason, bool hit_stop) {
    std::string rest;
    if (!hit_stop) {
      rest = s.stops->feed(s.text->flush()).text;
      if (!s.stops->stopped()) rest += s.stops->finish();
    }
    emit(s, std::move(rest), true, reason);
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_jobs_done++;
    }
    release(s);
  }

  // Moves queued jobs into free slots, the one with the longest cached common prefix first.
  void admit() {
    std::lock_guard<std::mutex> lk(mu);
    while (!queue.empty()) {
      if (queue.front().first.channel->cancelled()) {
        Job job = std::move(queue.front().first);
        queue.pop_front();
        JobEvent ev;
        ev.kind = JobEvent::kError;
        ev.index = job.index;
        ev.error = "cancelled";
        job.channel->push(std::move(ev));
        m.n_jobs_cancelled++;
        continue;
      }
      Slot* best = nullptr;
      size_t best_n = 0;
      const std::vector<int32_t>& prompt = queue.front().first.prompt;
      for (Slot& s : slots) {
        if (s.active) continue;
        const size_t n = common_prefix(s.cached, prompt);
        if (!best || n > best_n || (n == best_n && s.cached.size() < best->cached.size())) {
          best = &s;
          best_n = n;
        }
      }
      if (!best) break;
      Job job = std::move(queue.front().first);
      const Clock::time_point t_submit = queue.front().second;
      queue.pop_front();
      Slot& s = *best;
      auto sampler = Sampler::create(job.sampling, n_vocab);
      if (!sampler) {
        JobEvent ev;
        ev.kind = JobEvent::kError;
        ev.index = job.index;
        ev.error = sampler.error().message;
        job.channel->push(std::move(ev));
        continue;
      }
      // At least the last prompt token is decoded again: its logits start the generation.
      const size_t keep = std::min(best_n, job.prompt.size() - 1);
      s.cached.resize(keep);
      s.job = std::move(job);
      s.active = true;
      s.sampler.emplace(std::move(*sampler));
      s.sampler->accept_prompt(s.job.prompt);
      s.text.emplace(*tok);
      s.stops.emplace(s.job.stop);
      s.n_fed = keep;
      s.n_cached = static_cast<int>(keep);
      s.next = -1;
      s.n_gen = 0;
      s.submitted = t_submit;
      s.first_token = true;
      s.pending_lp.clear();
      if (s.job.json_object) s.json.emplace();
      m.n_cached_tokens += static_cast<int64_t>(keep);
    }
    m.queued = static_cast<int>(queue.size());
    m.slots_busy = static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const Slot& s) { return s.active; }));
  }

  // One token sampled for slot s from its logits row; mirrors generate() (runtime/generate.cpp).
  void on_logits(Slot& s, std::span<const float> row) {
    const std::span<const float> raw = row;
    if (s.json) row = mask_json(s, row);
    auto next = s.sampler->sample(row);
    if (!next) return fail(s, next.error().message);
    const int32_t id = *next;
    s.sampler->accept(id);
    s.n_gen++;
    if (s.first_token) {
      s.first_token = false;
      std::lock_guard<std::mutex> lk(mu);
      m.ttft_s_sum += std::chrono::duration<double>(Clock::now() - s.submitted).count();
      m.ttft_count++;
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_gen_tokens++;
    }
    if (s.job.top_logprobs >= 0) s.pending_lp.push_back(logprob_of(raw, id, s.job.top_logprobs));
    if (tok->is_eog(id)) return finish(s, "stop", false);
    if (s.json) s.json->push(tok->piece(id));
    const StopScanner::Step step = s.stops->feed(s.text->push(id));
    if (step.stopped) {
      emit(s, step.text, true, "stop");
      std::lock_guard<std::mutex> lk(mu);
      m.n_jobs_done++;
      release(s);
      return;
    }
    emit(s, step.text, false, nullptr);
    if (s.json && s.json->done()) return finish(s, "stop", false);
    if (s.job.n_predict >= 0 && s.n_gen >= s.job.n_predict) return finish(s, "length", false);
    if (static_cast<int>(s.cached.size()) + 1 >= p.n_ctx_slot) return finish(s, "length", false);
    if (Clock::now() > s.job.deadline) return finish(s, "length", false);
    s.next = id;
  }

  // One batched forward over every active slot. Returns false when there was nothing to run.
  bool step() {
    b_tokens.clear();
    b_pos.clear();
    b_rows.clear();
    b_ranges.clear();
    b_out.clear();
    owners.clear();
    // Prompt tokens in this step: at most n_batch (but always one chunk), so the decoding slots'
    // next token is not held up by several long prompts at once. Deferring a chunk never
    // changes how a prompt is split, only when its chunks run.
    int prefill = 0;
    for (Slot& s : slots) {
      if (!s.active) continue;
      if (s.job.channel->cancelled()) {
        {
          std::lock_guard<std::mutex> lk(mu);
          m.n_jobs_cancelled++;
        }
        JobEvent ev;
        ev.kind = JobEvent::kError;
        ev.index = s.job.index;
        ev.error = "cancelled";
        s.job.channel->push(std::move(ev));
        release(s);
        continue;
      }
      const int64_t base = static_cast<int64_t>(s.id) * p.n_ctx_slot;
      std::span<const int32_t> add;
      bool last = true;
      if (s.next >= 0) {
        add = std::span<const int32_t>(&s.next, 1);
      } else {
        const size_t left = s.job.prompt.size() - s.n_fed;
        const size_t len = std::min(left, static_cast<size_t>(p.n_batch));
        if (prefill > 0 && prefill + static_cast<int>(len) > p.n_batch) continue;
        prefill += static_cast<int>(len);
        add = std::span<const int32_t>(s.job.prompt).subspan(s.n_fed, len);
        last = len == left;
      }
      const int n_seq = static_cast<int>(add.size());
      for (int i = 0; i < n_seq; ++i) {
        const int pos = static_cast<int>(s.cached.size()) + i;
        b_tokens.push_back(add[static_cast<size_t>(i)]);
        b_pos.push_back(pos);
        b_rows.push_back(static_cast<int32_t>(base + pos));
        b_ranges.push_back(static_cast<int32_t>(base));
        b_ranges.push_back(pos + 1);
        b_ranges.push_back(n_seq);
        owners.push_back({&s, last && i == n_seq - 1});
      }
    }
    if (b_tokens.empty()) return false;
    const int n = static_cast<int>(b_tokens.size());
    for (int i = 0; i < n; ++i)
      if (owners[static_cast<size_t>(i)].wants_logits) b_out.push_back(i);
    const int n_out = std::max(1, static_cast<int>(b_out.size()));
    if (b_out.empty()) b_out.push_back(n - 1);  // a graph always has an output row

    Status st = run(n, n_out);
    if (!st) {
      for (Slot& s : slots)
        if (s.active) fail(s, "decode failed: " + st.error().message);
      return true;
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      m.n_steps++;
      m.n_step_tokens += n;
    }
    // Advance each slot's cache past what this step stored.
    for (int i = 0; i < n; ++i) {
      Slot& s = *owners[static_cast<size_t>(i)].slot;
      s.cached.push_back(b_tokens[static_cast<size_t>(i)]);
      if (s.next < 0) {
        s.n_fed++;
        std::lock_guard<std::mutex> lk(mu);
        m.n_prompt_tokens++;
      }
    }
    int row = 0;
    for (int i = 0; i < n; ++i) {
      const RowOwner& o = owners[static_cast<size_t>(i)];
      if (!o.wants_logits) continue;
      Slot& s = *o.slot;
      s.next = -1;
      on_logits(s, std::span<const float>(logits).subspan(static_cast<size_t>(row) * static_cast<size_t>(n_vocab),
                                                         static_cast<size_t>(n_vocab)));
      ++row;
    }
    return true;
  }

  Status run(int n, int n_out) {
    auto ge = graph(n, n_out);
    if (!ge) return ge.error();
    GraphEntry& e = **ge;
    PreparedGraph& pg = *e.pg;
    MINFER_TRY(sched->set_input(pg, e.tokens, b_tokens.data(), b_tokens.size() * sizeof(int32_t)));
    MINFER_TRY(sched->set_input(pg, e.pos, b_pos.data(), b_pos.size() * sizeof(int32_t)));
    MINFER_TRY(sched->set_input(pg, e.kv_rows, b_rows.data(), b_rows.size() * sizeof(int32_t)));
    MINFER_TRY(sched->set_input(pg, e.kv_ranges, b_ranges.data(), b_ranges.size() * sizeof(int32_t)));
    if (e.out_ids >= 0)
      MINFER_TRY(sched->set_input(pg, e.out_ids, b_out.data(), static_cast<size_t>(n_out) * sizeof(int32_t)));
    MINFER_TRY(sched->compute(pg));
    logits.resize(static_cast<size_t>(n_out) * static_cast<size_t>(n_vocab));
    return sched->get_output(pg, e.logits, logits.data(), logits.size() * sizeof(float));
  }

  void loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] {
          const bool any_active = std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return s.active; });
          return stopping || any_active || !queue.empty();
        });
        if (stopping) break;
      }
      admit();
      if (!step()) {
        // Everything queued is waiting on... nothing: every slot is free, so admit() took
        // them all; an empty step means only cancelled jobs were left.
        std::unique_lock<std::mutex> lk(mu);
        m.slots_busy = 0;
        cv.notify_all();
        cv.wait_for(lk, std::chrono::milliseconds(5));
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        m.slots_busy = static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const Slot& s) { return s.active; }));
      }
      cv.notify_all();
    }
    for (Slot& s : slots)
      if (s.active) fail(s, "server shutting down");
    std::lock_guard<std::mutex> lk(mu);
    for (auto& [job, t] : queue) {
      JobEvent ev;
      ev.kind = JobEvent::kError;
      ev.index = job.index;
      ev.error = "server shutting down";
      job.channel->push(std::move(ev));
    }
    queue.clear();
  }
};

Expected<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Model> model, const Tokenizer& tok,
                                                 const EngineParams& p) {
  if (p.n_slots < 1) return make_error("engine: --parallel {} must be at least 1", p.n_slots);
  if (p.n_ctx_slot < 8) return make_error("engine: context per slot {} is below 8", p.n_ctx_slot);
  if (p.n_batch < 1) return make_error("engine: n_batch {} must be at least 1", p.n_batch);
  if (p.kv_type != DType::F16 && p.kv_type != DType::F32)
    return make_error("engine: KV cache type {} is not supported (f16, f32)", dtype_name(p.kv_type));
  std::unique_ptr<Engine> e(new Engine(p));
  e->params_.n_batch = std::min(p.n_batch, p.n_ctx_slot);
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->tok = &tok;
  impl->p = e->params_;
  impl->n_vocab = static_cast<int>(impl->model->hparams().n_vocab);
  impl->cpu = std::make_unique<cpu::CpuBackend>(p.n_threads > 0 ? p.n_threads : hardware_threads());
  impl->sched = std::make_unique<Scheduler>(std::vector<Backend*>{impl->cpu.get()});
  impl->slots.resize(static_cast<size_t>(p.n_slots));
  for (int i = 0; i < p.n_slots; ++i) impl->slots[static_cast<size_t>(i)].id = i;
  impl->m.n_slots = p.n_slots;
  // Build the decode graph now: allocates the KV cache and fails early if it does not fit.
  {
    impl->b_tokens.assign(1, 0);
    auto ge = impl->graph(1, 1);
    if (!ge) return ge.error();
  }
  e->impl_ = std::move(impl);
  Impl* raw = e->impl_.get();
  e->impl_->thread = std::thread([raw] { raw->loop(); });
  return e;
}

Engine::Engine(const EngineParams& p) : params_(p) {}

Engine::~Engine() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->graphs.clear();
  impl_->sched.reset();
}

bool Engine::submit(std::vector<Job> jobs) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->draining || impl_->stopping) return false;
    // Room: the free slots (a job passes through the queue on its way to one) plus max_queue.
    const size_t free_slots = static_cast<size_t>(std::max(0, params_.n_slots - impl_->m.slots_busy));
    if (impl_->queue.size() + jobs.size() > static_cast<size_t>(params_.max_queue) + free_slots) return false;
    const auto now = Clock::now();
    for (Job& j : jobs) impl_->queue.emplace_back(std::move(j), now);
    impl_->m.queued = static_cast<int>(impl_->queue.size());
  }
  impl_->cv.notify_all();
  return true;
}

void Engine::drain() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->draining = true;
}

void Engine::wait_idle() {
  drain();
  std::unique_lock<std::mutex> lk(impl_->mu);
  impl_->cv.wait(lk, [&] { return impl_->queue.empty() && impl_->m.slots_busy == 0; });
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->m;
}

}  // namespace minfer::server
