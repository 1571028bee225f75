// The server's inference engine: N slots over one model, one KV cache with a region per slot,
// and one thread that runs continuous batching. Each step gathers every active slot's next
// token (or its next prompt chunk) into ONE forward pass; requests join and leave between
// steps. HTTP threads submit jobs and read their events from a channel.
//
//   auto eng = Engine::create(model, tok, {.n_slots = 4, .n_ctx_slot = 2048});
//   auto ch = std::make_shared<EventChannel>();
//   Job j; j.prompt = ids; j.n_predict = 64; j.channel = ch;
//   if (!(*eng)->submit({std::move(j)})) reply_503();         // queue full
//   for (JobEvent ev; ch->pop(ev, 100ms) != EventChannel::kClosed;) ...  // text, then done
//   ch->cancel();                                              // client went away: slot freed
//
// Determinism: a token's arithmetic does not depend on the other sequences in its batch.
// Matmul rows are independent, and attention picks its arithmetic from the number of query
// rows of the token's OWN sequence in the step (GraphParams::multi_seq), so greedy output is
// the same alone or under load. Prompts are prefilled in chunks of n_batch tokens counted from
// the first token not already in the slot's cache.
//
// Prefix reuse: a slot keeps the tokens of its last conversation in its cache; a new job goes
// to the free slot sharing the longest prefix with its prompt and only the rest is prefilled.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "models/model.h"
#include "sampling/params.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

struct EngineParams {
  int n_slots = 1;        // sequences decoded together
  int n_ctx_slot = 2048;  // KV positions per slot
  int n_batch = 512;      // most prompt tokens of one slot per step
  int n_threads = 0;      // 0 = all hardware threads
  int max_queue = 64;     // jobs waiting for a slot; more are refused (HTTP 503)
  DType kv_type = DType::F16;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely tokens of that step, best first
};

struct JobEvent {
  enum Kind { kText, kDone, kError };
  Kind kind = kText;
  int index = 0;                      // the job's choice index
  std::string text;                   // kText: final bytes; kDone: the last ones (may be empty)
  std::vector<TokenLogprob> logprobs; // the tokens behind `text` (when the job asked for them)
  std::string finish_reason;          // kDone: "stop" or "length"
  int n_prompt = 0, n_cached = 0, n_gen = 0;  // kDone: usage (n_cached: prompt tokens reused)
  std::string error;                  // kError
};

// Events of one HTTP request (its n jobs), in order. Closed once every job is done.
class EventChannel {
 public:
  enum PopResult { kEvent, kTimeout, kClosed };
  explicit EventChannel(int n_jobs = 1) : open_jobs_(n_jobs) {}
  void push(JobEvent ev);
  PopResult pop(JobEvent& ev, std::chrono::milliseconds timeout);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> q_;
  int open_jobs_;
  std::atomic<bool> cancelled_{false};
};

struct Job {
  std::vector<int32_t> prompt;  // not empty, shorter than n_ctx_slot
  SamplerParams sampling;
  int n_predict = 256;          // -1: until the slot's context is full
  std::vector<std::string> stop;
  int top_logprobs = -1;        // -1: no logprobs; 0..20: chosen token plus that many alternatives
  bool json_object = false;     // only tokens that keep the output a valid JSON object prefix;
                                // the job ends ("stop") when the object is complete
  int index = 0;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::shared_ptr<EventChannel> channel;
};

struct EngineMetrics {
  int64_t n_prompt_tokens = 0;  // prefilled (cache hits excluded)
  int64_t n_cached_tokens = 0;  // prompt tokens reused from a slot's cache
  int64_t n_gen_tokens = 0;
  int64_t n_steps = 0;          // batched forward passes
  int64_t n_step_tokens = 0;    // tokens in those passes
  int64_t n_jobs_done = 0;
  int64_t n_jobs_cancelled = 0;
  double ttft_s_sum = 0;        // submit -> first token, summed over jobs
  int64_t ttft_count = 0;
  int queued = 0;
  int slots_busy = 0;
  int n_slots = 0;
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> create(std::shared_ptr<const Model> model, const Tokenizer& tok,
                                                  const EngineParams& p);
  ~Engine();  // stops the engine thread (cancels what is left)

  // Queues the jobs (all or none). False when the queue has no room or the engine is draining.
  bool submit(std::vector<Job> jobs);
  // Refuse new jobs from now on; run() keeps going until what is queued and active is done.
  void drain();
  // drain() and wait until every job has finished.
  void wait_idle();

  EngineMetrics metrics() const;
  const EngineParams& params() const { return params_; }
  int n_ctx_slot() const { return params_.n_ctx_slot; }

 private:
  struct Impl;
  explicit Engine(const EngineParams& p);
  EngineParams params_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minfer::server
