#include "server/model-sleep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "server/server-state.h"

namespace minfer::server {
namespace {

// The counters of two engines summed; the gauges are the second one's.
EngineMetrics plus(const EngineMetrics& a, const EngineMetrics& b) {
  EngineMetrics m = b;
  m.n_prompt_tokens += a.n_prompt_tokens;
  m.n_cached_tokens += a.n_cached_tokens;
  m.n_gen_tokens += a.n_gen_tokens;
  m.n_steps += a.n_steps;
  m.n_step_tokens += a.n_step_tokens;
  m.n_jobs_done += a.n_jobs_done;
  m.n_jobs_cancelled += a.n_jobs_cancelled;
  m.n_jobs_timed_out += a.n_jobs_timed_out;
  m.n_jobs_failed += a.n_jobs_failed;
  m.n_draft_tokens += a.n_draft_tokens;
  m.n_draft_accepted += a.n_draft_accepted;
  m.n_verify_steps += a.n_verify_steps;
  m.ttft_s_sum += a.ttft_s_sum;
  m.ttft_count += a.ttft_count;
  m.n_first_tokens += a.n_first_tokens;
  m.prompt_s += a.prompt_s;
  m.predicted_s += a.predicted_s;
  m.n_busy_slot_steps += a.n_busy_slot_steps;
  m.n_tokens_max = std::max(m.n_tokens_max, a.n_tokens_max);
  m.n_context_shifts += a.n_context_shifts;
  return m;
}

}  // namespace

ModelSleep::ModelSleep(ServerState& s, double idle_s, const EngineParams& ep, const EngineDraft& draft, bool pooled)
    : s_(s),
      pooled_(pooled),
      idle_default_(pooled ? (idle_s < 0 ? std::nullopt : std::optional<double>(idle_s)) : (idle_s > 0 ? std::optional<double>(idle_s) : std::nullopt)),
      idle_(idle_default_),
      ep_(ep),
      draft_(draft) {
  base_.n_slots = ep.n_slots;
  if (pooled || idle_) thread_ = std::thread([this] { watch(); });
}

void ModelSleep::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<std::string> ModelSleep::acquire(std::optional<double> keep_alive_s, std::optional<int> n_ctx_slot) {
  std::unique_lock<std::mutex> lk(mu_);
  // The context asked for, as Engine::create would give it (the model's training context caps it).
  auto wanted = [&](const Model& m) {
    const int64_t n = *n_ctx_slot > 0 ? *n_ctx_slot : ep_.n_ctx_slot;
    const int64_t n_train = m.hparams().n_ctx_train;
    return static_cast<int>(n_train > 0 && pooled_ && *n_ctx_slot > 0 ? std::min(n, n_train) : n);
  };
  if (pooled_ && n_ctx_slot && !asleep_ && wanted(*s_.model) != s_.n_ctx_slot) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(s_.sp.timeout_s);
    // Until it is idle, or another request has reloaded it with this context meanwhile.
    while (!stopped_ && !asleep_ && wanted(*s_.model) != s_.n_ctx_slot && !idle_now()) {  // polled too: the engine ends a job a moment after its release
      if (std::chrono::steady_clock::now() > deadline) return fmt::format("model '{}' is loaded with {} positions per slot and its requests did not end within {} s to reload it with "
                         "num_ctx {}", s_.model_id, s_.n_ctx_slot, s_.sp.timeout_s, *n_ctx_slot);
      cv_.wait_for(lk, std::chrono::milliseconds(20));
    }
    if (stopped_) return std::string("the server is shutting down");
    if (!asleep_ && wanted(*s_.model) != s_.n_ctx_slot) fall_asleep();  // reloaded below with the context asked for
  }
  if (asleep_) {
    if (stopped_) return std::string("the server is shutting down");
    const auto t0 = std::chrono::steady_clock::now();
    auto model = Model::load(s_.sp.model_path);
    if (!model) return fmt::format("reloading the model after sleep failed: {}", model.error().message);
    EngineParams ep = ep_;
    if (pooled_ && n_ctx_slot) ep.n_ctx_slot = wanted(**model);
    auto engine = Engine::create(*model, *s_.tok, ep, draft_);
    if (!engine) return fmt::format("restarting the engine after sleep failed: {}", engine.error().message);
    std::lock_guard<std::mutex> swap(engine_mu_);
    s_.model = std::move(*model);
    s_.engine = std::move(*engine);
    s_.n_ctx_slot = s_.engine->n_ctx_slot();
    asleep_ = false;
    std::fprintf(stderr, "[server] %s%sawake: model loaded in %.2f s (%d ctx per slot)\n", pooled_ ? s_.model_id.c_str() : "",
                 pooled_ ? ": " : "", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), s_.n_ctx_slot);
    std::fflush(stderr);
  }
  if (pooled_) idle_ = !keep_alive_s ? idle_default_ : *keep_alive_s < 0 ? std::nullopt : keep_alive_s;
  ++users_;
  last_used_ = std::chrono::steady_clock::now();
  return std::nullopt;
}

void ModelSleep::release() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    --users_;
    last_used_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();  // an acquire waiting to reload it with another num_ctx
}

bool ModelSleep::sleeping() const { return asleep_; }

bool ModelSleep::idle_now() const {
  if (asleep_ || users_ > 0) return false;
  // A job whose client went away may still be ending: idle means the engine too.
  const EngineMetrics m = s_.engine->metrics();
  return m.queued == 0 && m.slots_busy == 0;
}

bool ModelSleep::unload() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!stopped_ && idle_now()) fall_asleep();
  return asleep_;
}

ModelSleep::Use ModelSleep::use() const {
  std::lock_guard<std::mutex> lk(mu_);
  return {asleep_, users_, last_used_, idle_, asleep_ ? 0 : s_.n_ctx_slot};
}

EngineMetrics ModelSleep::engine_metrics() const {
  std::lock_guard<std::mutex> lk(engine_mu_);  // not mu_: /metrics never waits for a load
  return asleep_ ? base_ : plus(base_, s_.engine->metrics());
}

bool ModelSleep::stalled() const {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);  // /health never waits for a load
  return lk.owns_lock() && !asleep_ && s_.engine->stalled();
}

void ModelSleep::watch() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopped_) {
    cv_.wait_for(lk, std::chrono::milliseconds(100));
    if (stopped_ || !idle_ || std::chrono::steady_clock::now() - last_used_ < std::chrono::duration<double>(*idle_)) continue;
    if (idle_now()) fall_asleep();
  }
}

namespace {
// What the model's load and its requests left free in malloc's heaps goes back to the system:
// glibc keeps freed memory in each thread's arena (and raises its mmap threshold after large
// frees, so later large buffers land there too); a long-lived server that loads and unloads
// models would grow by it (tests/server/test_chaos_pool.py measures resident memory).
void give_back_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}
}  // namespace

void ModelSleep::fall_asleep() {
  std::lock_guard<std::mutex> swap(engine_mu_);
  EngineMetrics m = plus(base_, s_.engine->metrics());
  m.queued = m.slots_busy = 0;
  m.kv_used = 0;  // no job holds positions; kv_size stays the slots' capacity (llama-server's rule: a
                  // sleeping server's /metrics is the snapshot taken as it fell asleep)
  base_ = m;
  s_.engine.reset();  // its thread stops; the KV cache is freed
  s_.model.reset();   // the last reference: the weights are unmapped
  give_back_heap();
  asleep_ = true;
  if (pooled_)
    std::fprintf(stderr, "[server] %s: model unloaded (idle %.0f s of keep_alive %.0f s)\n", s_.model_id.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - last_used_).count(), idle_ ? *idle_ : -1.0);
  else
    std::fprintf(stderr, "[server] idle for %.0f s: model unloaded (sleeping until a request needs it)\n", *idle_);
  std::fflush(stderr);
}

}  // namespace minfer::server
