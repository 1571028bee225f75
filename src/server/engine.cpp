#include "server/engine.h"

#include <algorithm>
#include <cstdlib>

#include "server/engine-impl.h"

namespace minfer::server {

// ---- events and the end of a job ----

void Engine::Impl::send_error(const Job& job, const std::string& msg) {
  send(job, JobEvent{job.index, ErrorEvent{msg}});
}

void Engine::Impl::emit(Slot& s, std::string text, bool done, const char* reason) {
  GenRun& g = *s.gen();
  TextDelta delta;
  delta.text = std::move(text);
  delta.logprobs = std::move(g.pending_lp);
  g.pending_lp.clear();
  delta.tokens = std::move(g.pending_tokens);
  g.pending_tokens.clear();
  if (!done && delta.empty()) return;
  // Usage and times so far (the final ones on a done event; timings_per_token streams them).
  JobUsage u;
  u.n_prompt = static_cast<int>(s.job.prompt.size());
  u.n_cached = g.n_cached;
  u.n_gen = g.step ? g.step->n_gen() : 0;
  if (g.spec) {
    u.n_draft = g.spec->stats().n_drafted;
    u.n_draft_accepted = g.spec->stats().n_accepted;
  }
  const auto now = Clock::now();
  const Clock::time_point first = g.first_token ? now : g.first_at;
  u.prompt_ms = std::chrono::duration<double, std::milli>(first - s.started).count();
  u.predicted_ms = std::chrono::duration<double, std::milli>(now - first).count();
  if (!done) return send(s.job, JobEvent{s.job.index, TextEvent{std::move(delta), u}});
  DoneEvent d;
  d.delta = std::move(delta);
  d.usage = u;
  d.finish_reason = reason;
  d.truncated = g.end_context_full || g.shifted;
  d.n_kv = ctx->seq_len(s.id);
  d.stop_type = g.end_stop_type;
  d.stop_word = g.end_stop_word;
  d.slot = s.id;
  m.prompt_s += u.prompt_ms / 1000.0;
  m.predicted_s += u.predicted_ms / 1000.0;
  send(s.job, JobEvent{s.job.index, std::move(d)});
}

void Engine::Impl::progress(Slot& s) {
  if (!s.job.return_progress) return;
  const GenRun& g = *s.gen();
  ProgressEvent ev;
  ev.total = static_cast<int>(s.job.prompt.size());
  ev.cache = g.n_cached;
  ev.processed = static_cast<int>(g.n_fed);
  // The first event comes before any prompt token is decoded: no time has gone into it yet.
  ev.ms = g.n_fed == static_cast<size_t>(g.n_cached) ? 0.0
                                                     : std::chrono::duration<double, std::milli>(Clock::now() - s.started).count();
  send(s.job, JobEvent{s.job.index, ev});
}

void Engine::Impl::release(Slot& s) {
  s.run = std::monostate{};
  s.job = Job{};
  s.active = false;  // published as free with this turn's events
}

void Engine::Impl::fail(Slot& s, const std::string& msg, bool keep_cache) {
  send_error(s.job, msg);
  m.n_jobs_failed++;
  if (!keep_cache || s.embed()) {  // an embedding job's rows are no conversation to keep
    s.cached.clear();
    ctx->seq_clear(s.id);
  }
  release(s);
}

void Engine::Impl::done(Slot& s, std::string text, const char* reason) {
  emit(s, std::move(text), true, reason);
  m.n_jobs_done++;
  release(s);
}

// ---- publishing ----

void Engine::Impl::publish() {
  std::lock_guard<std::mutex> lk(mu);
  n_taken = static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const Slot& x) { return x.active; }));
  shown = m;
  shown.kv_used = 0;
  published.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    Engine::SlotInfo& o = published[i];
    o = {};
    o.id = s.id;
    o.processing = s.active;
    o.n_cached = static_cast<int>(s.cached.size());
    if (s.active) {
      shown.kv_used += static_cast<int64_t>(s.cached.size());
      const GenRun* g = s.gen();
      o.n_prompt = static_cast<int>(s.job.prompt.size());
      o.n_decoded = g && g->step ? g->step->n_gen() : 0;
      o.n_predict = s.job.n_predict;
    }
  }
}

void Engine::Impl::deliver() {
  for (auto& [ch, ev] : outbox) ch->push(std::move(ev));
  outbox.clear();
}

void Engine::Impl::note_progress() {
  std::lock_guard<std::mutex> lk(mu);
  last_progress = Clock::now();
}

// ---- admission ----

void Engine::Impl::admit() {
  std::vector<Scheduler::SlotView> views(slots.size());
  for (;;) {
    std::optional<Scheduler::Pick> pick;
    {
      std::lock_guard<std::mutex> lk(mu);
      for (Scheduler::Expired& x : queue.expire(Clock::now())) {
        (x.cancelled ? m.n_jobs_cancelled : m.n_jobs_timed_out)++;
        m.n_jobs_failed++;
        send_error(x.job, x.why);
      }
      for (size_t i = 0; i < slots.size(); ++i) views[i] = {slots[i].id, !slots[i].active, slots[i].cached};
      pick = queue.pick(views);
      if (!pick) return;
      slots[static_cast<size_t>(pick->slot)].active = true;
      // Taken slots as they are now (a slot freed earlier in this turn, or by a failed start
      // just before, no longer counts; publish() recounts too).
      n_taken = static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const Slot& x) { return x.active; }));
    }
    Slot& s = slots[static_cast<size_t>(pick->slot)];
    s.submitted = pick->submitted;
    s.started = Clock::now();
    if (pick->job.embed) {
      start_embed(s, std::move(pick->job));
    } else {
      start(s, std::move(pick->job));
    }
  }
}

// ---- slot edits (edit_idle_slot) ----

void Engine::Impl::run_slot_tasks() {
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
    note_progress();
    publish();  // GET /slots shows the edit once its reply is out
    t->done.set_value(std::move(st));
  }
  std::lock_guard<std::mutex> lk(mu);
  tasks.insert(tasks.begin(), later.begin(), later.end());
}

void Engine::Impl::cancel_everything(const std::string& reason) {
  for (Slot& s : slots)
    if (s.active) fail(s, reason);
  std::lock_guard<std::mutex> lk(mu);
  for (Job& job : queue.take_all()) {
    send_error(job, reason);
    m.n_jobs_failed++;
  }
  for (auto& t : tasks) t->done.set_value(make_error("{}", reason));
  tasks.clear();
}

// ---- the thread ----

void Engine::Impl::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu);
      // Wake at least every 100 ms while jobs wait: queued deadlines are checked here.
      cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return stopping || cancel_pending || has_work_locked(); });
      if (stopping) break;
      if (!has_work_locked()) last_progress = Clock::now();  // idle is not stalled
    }
    std::optional<std::string> cancel;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (cancel_pending) cancel = std::exchange(cancel_reason, {}), cancel_pending = false;
    }
    if (cancel) cancel_everything(*cancel);
    run_slot_tasks();
    // Published and delivered after each phase: a job's first progress event goes out before
    // its first prompt chunk is decoded, and a generation step's tokens do not wait for the
    // embedding pass.
    admit();
    publish();
    deliver();
    step();
    publish();
    deliver();
    embed_step();
    publish();
    deliver();
    cv.notify_all();
  }
  cancel_everything("server shutting down");
  publish();
  deliver();
  cv.notify_all();
}

// ---- the public side ----

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
  impl->queue = Scheduler(p.max_queue, p.queue_timeout_s);
  ContextParams cp;
  cp.n_seq = p.n_slots;
  cp.n_ctx_seq = p.n_ctx_slot;
  // One prompt chunk plus a pass of every other slot: its token and up to kSpecMaxDraft drafts.
  cp.n_batch = e->params_.n_batch + p.n_slots * (1 + kSpecMaxDraft);
  cp.n_threads = p.n_threads;
  cp.kv_type = p.kv_type;
  cp.backends = p.backends;
  cp.offload = p.offload;
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
  impl->m.kv_size = static_cast<int64_t>(p.n_slots) * p.n_ctx_slot;
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
    if (!impl_->queue.has_room(jobs.size(), params_.n_slots - impl_->n_taken)) return false;
    const auto now = Clock::now();
    if (!impl_->has_work_locked()) impl_->last_progress = now;
    impl_->queue.push(std::move(jobs), now);
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
  EngineMetrics r = impl_->shown;
  r.queued = static_cast<int>(impl_->queue.size());
  r.slots_busy = impl_->n_taken;
  return r;
}

std::vector<Engine::SlotInfo> Engine::slots() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->published;
}

}  // namespace minfer::server
