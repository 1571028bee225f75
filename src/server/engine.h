// The server's inference engine: N slots, each one sequence of a runtime Context (one model, one
// KV cache), and one thread that runs continuous batching. Each step gathers every active
// slot's next token (or its next prompt chunk) into ONE Batch; requests join and leave between
// steps; each slot's token goes through the runtime's TokenStep (sampling, end-of-generation,
// UTF-8, stop strings), the same step the CLI runs. HTTP threads submit jobs and read their
// events from a channel.
//
//   auto eng = Engine::create(model, tok, {.n_slots = 4, .n_ctx_slot = 2048});
//   auto ch = std::make_shared<EventChannel>();
//   Job j; j.prompt = ids; j.n_predict = 64; j.channel = ch;
//   if (!(*eng)->submit({std::move(j)})) reply_503();         // queue full
//   for (JobEvent ev; ch->pop(ev, 100ms) != EventChannel::kClosed;)
//     if (const TextDelta* d = ev.delta()) out += d->text;     // TextEvent..., then DoneEvent
//   ch->cancel();                                              // client went away: slot freed
//
// Determinism: a token's arithmetic depends on nothing else in its batch. Matmul rows are
// independent, and the context runs attention batch-invariant (AttnArith::kInvariant), so
// greedy output is the same alone or under load, whether its prompt's prefix came from a
// slot's cache or how the prompt was split into prefill chunks.
//
// Speculative decoding: a job with Job::spec drafts (n-gram lookup and/or the draft model, all
// slots' draft-model requests in one batch per depth) and its pass carries [next, drafts...];
// its rows are sampled in turn by the slot's TokenStep exactly as plain decoding would, the
// drafts kept while they agree and the rest of the rows rolled back (runtime/verify.h, the same
// step as the CLI's generate()), so the output is the same.
//
// Prefix reuse: a slot keeps the tokens of its last conversation in its cache; a new job goes
// to the free slot sharing the longest prefix with its prompt and only the rest is prefilled
// (runtime/prefix-reuse.h, as the chat REPL's turns).
// When another slot (free or busy) holds a much longer common prefix, it is copied over
// (Context::seq_cp, on the backend) instead of prefilled again.
//
// Events: a JobEvent is the job's choice index and one of TextEvent, DoneEvent, ErrorEvent or
// ProgressEvent (a variant: each kind holds only its own fields, read through as<Kind>()).
//
// Lifecycle: every job ends, with a DoneEvent or an ErrorEvent: done, max tokens, its deadline
// (checked while queued, prefilling and generating), its channel cancelled (client gone), a
// queue wait past queue_timeout_s, cancel_all() (shutdown after the drain deadline), or the
// engine's destruction. stalled() is true when there is work but no step has finished for
// watchdog_s (what /health reports).
//
// Embeddings: a job with Job::embed reads its inputs with the context's decode_embeddings, one
// chunk per slot between two generation steps (all embedding slots in one pass).
//
// Inside (engine-impl.h): the Scheduler (scheduler.h) holds the queue and picks slots; a slot's
// job state is a variant (generation or embedding) reset whole when the job ends; the thread
// counts as it goes and publishes metrics() and slots() after each step (admission, generation,
// embedding), before delivering that step's events, so a client that has read its last event finds its job counted and its
// slot free. engine.cpp: the loop and the public side; engine-step.cpp: one generation step;
// engine-embed.cpp: one embedding pass.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "grammar/gbnf.h"
#include "grammar/trigger.h"
#include "runtime/context.h"
#include "runtime/speculative.h"
#include "sampling/params.h"
#include "server/embedding.h"
#include "tokenizer/tokenizer.h"

namespace minfer {
class Context;
class Model;
}

namespace minfer::server {

struct EngineParams {
  int n_slots = 1;        // sequences decoded together
  int n_ctx_slot = 2048;  // KV positions per slot
  int n_batch = 512;      // most prompt tokens of one slot per step
  int n_threads = 0;      // 0 = all hardware threads
  int max_queue = 64;     // jobs waiting for a slot; more are refused (HTTP 503)
  DType kv_type = DType::F16;
  bool swa_full = false;  // sliding-window layers cache the whole context (--swa-full)
  std::string backends = "cpu";
  Offload offload = {};  // layers on GPUs (-ngl, --device)
  double queue_timeout_s = 300;  // a job waiting longer for a slot ends with an error
  double watchdog_s = 60;        // work but no finished step for this long: stalled()
  // --context-shift: a generating slot whose context is full drops positions after the job's
  // n_keep (Job::n_keep, n_discard; llama-server's rule) and goes on; off: the job ends ("length").
  bool context_shift = false;
};

// Speculative decoding for the engine (runtime/speculative.h): a draft model (may be null; its
// own context gets one sequence per slot) and the defaults a job's Job::spec starts from.
struct EngineDraft {
  std::shared_ptr<const Model> model;
  const Tokenizer* tok = nullptr;  // the draft model's tokenizer (checked against the target's)
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely tokens of that step, best first
  // The values are log-probabilities after the sampler's chain (llama-server's
  // post_sampling_probs: the distribution the token was drawn from), not of the raw logits.
  bool post_sampling = false;
};

// A job's events, in order: progress (Job::return_progress), text, then one done or one error.
// Each kind holds only its own fields; the parts text and done events share are small structs.
// JobEvent is the choice index (which every kind needs: a channel carries all of a request's
// choices and merges text per choice) beside a variant of the kinds, so a reader gets the
// index without a visit and can read a kind's fields only through as<Kind>().
struct TextDelta {  // what a text or done event adds to the reply
  std::string text;                    // final bytes (a done event's last ones; may be empty)
  std::vector<TokenLogprob> logprobs;  // the tokens behind `text` (when the job asked for them)
  std::vector<int32_t> tokens;         // the ids behind `text` (end-of-generation tokens excluded)
  bool empty() const { return text.empty() && logprobs.empty() && tokens.empty(); }
};

struct JobUsage {  // usage and times so far (final on a done event)
  int n_prompt = 0, n_cached = 0, n_gen = 0;  // usage (n_cached: prompt tokens reused)
  int64_t n_draft = 0, n_draft_accepted = 0;  // drafted tokens verified, and accepted
  double prompt_ms = 0, predicted_ms = 0;     // slot start -> first token -> now (done: end)
};

struct TextEvent {
  TextDelta delta;
  JobUsage usage;
};

struct DoneEvent {
  TextDelta delta;
  JobUsage usage;
  std::string finish_reason;  // "stop" or "length"
  std::string stop_type;      // llama-server's "eos", "word" or "limit"
  std::string stop_word;      // stop_type "word": the stop string that ended it
  int slot = -1;              // the slot that ran the job
  bool truncated = false;     // it ended because the slot's context was full
  int n_kv = 0;               // positions the slot's cache holds after it
  // An embedding job's: per input it carried, the pooled vector or one per token (Pooling::kNone).
  struct Embedding {
    int input = 0;     // Job::Embed::Input::index
    int n_tokens = 0;
    std::vector<std::vector<float>> rows;
  };
  std::vector<Embedding> embeddings;
};

struct ErrorEvent {
  std::string message;
};

// The prompt's prefill so far: its tokens, those reused from a cache, those through the model
// (cache included), and its time.
struct ProgressEvent {
  int total = 0, cache = 0, processed = 0;
  double ms = 0;
};

struct JobEvent {
  int index = 0;  // the job's choice index
  std::variant<TextEvent, DoneEvent, ErrorEvent, ProgressEvent> body;

  template <class T> T* as() { return std::get_if<T>(&body); }
  template <class T> const T* as() const { return std::get_if<T>(&body); }
  template <class T> bool is() const { return std::holds_alternative<T>(body); }
  bool ends() const { return is<DoneEvent>() || is<ErrorEvent>(); }  // the job's last event
  // The text and the usage of a text or done event; null for the other kinds.
  const TextDelta* delta() const {
    if (const auto* t = as<TextEvent>()) return &t->delta;
    if (const auto* d = as<DoneEvent>()) return &d->delta;
    return nullptr;
  }
  const JobUsage* usage() const {
    if (const auto* t = as<TextEvent>()) return &t->usage;
    if (const auto* d = as<DoneEvent>()) return &d->usage;
    return nullptr;
  }
};

// Events of one HTTP request (its n jobs), in order. Closed once every job is done. Bounded: a
// reader that falls behind finds consecutive text of a choice merged into one event, so the
// queue never holds more than about kMaxEvents events (plus one per choice).
class EventChannel {
 public:
  enum PopResult { kEvent, kTimeout, kClosed };
  explicit EventChannel(int n_jobs = 1) : open_jobs_(n_jobs) {}
  void push(JobEvent ev);
  PopResult pop(JobEvent& ev, std::chrono::milliseconds timeout);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  static constexpr size_t kMaxEvents = 32;

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
  bool ignore_eog = false;      // keep going past end-of-generation tokens
  int top_logprobs = -1;        // -1: no logprobs; 0..20: chosen token plus that many alternatives
  bool post_sampling_probs = false;  // those after the sampler's chain (TokenLogprob::post_sampling)
  std::shared_ptr<const Grammar> grammar;  // the output must match it (grammar, json_schema,
                                           // response_format, tools); null: free text
  std::vector<GrammarTrigger> grammar_triggers;  // a lazy grammar's triggers (grammar/trigger.h)
  std::optional<SpecParams> spec;  // speculative decoding for this job (nullopt: off)
  bool cache_prompt = true;     // false: prefill the whole prompt, reusing no slot's cache
  bool return_progress = false; // ProgressEvents: at the start of the prefill and after each chunk
  int id_slot = -1;             // run on this slot (llama-server's id_slot); -1: the best free one
  // Context shift (EngineParams::context_shift): the first n_keep positions stay (-1: the whole
  // prompt; the BOS is added to it), n_discard after them go (0: half of those after n_keep).
  int n_keep = 0, n_discard = 0;
  // An embedding job (/embeddings): each input's hidden states after the final norm, pooled and
  // normalized (embedding.h), all in one DoneEvent; nothing is generated and `prompt` is not
  // used. It reads its inputs one after another on a free slot, a chunk of at most n_batch
  // tokens between generation steps, and leaves that slot's cache empty.
  struct Embed {
    Pooling pooling = Pooling::kLast;
    int normalize = 2;  // embedding.h's normalize(); pooled vectors only
    struct Input {
      int index = 0;  // the request's input number (DoneEvent::Embedding::input)
      std::vector<int32_t> ids;  // not empty, at most n_ctx_slot tokens
    };
    std::vector<Input> inputs;
  };
  std::optional<Embed> embed;
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
  int64_t n_jobs_timed_out = 0; // deadline or queue timeout
  int64_t n_jobs_failed = 0;    // ended with an ErrorEvent (cancelled and timed out included)
  int64_t n_draft_tokens = 0;   // drafted tokens verified (speculative decoding)
  int64_t n_draft_accepted = 0; // of those, accepted
  int64_t n_verify_steps = 0;   // slot passes that carried a draft
  double ttft_s_sum = 0;        // submit -> first token, summed over jobs
  int64_t ttft_count = 0;
  int64_t n_first_tokens = 0;   // jobs' first tokens (sampled from the prompt's logits, no decode step)
  double prompt_s = 0;          // finished jobs: slot start -> first token, summed
  double predicted_s = 0;       // finished jobs: first token -> end, summed
  int64_t n_busy_slot_steps = 0;  // slots in each batched pass, summed over passes
  int64_t n_tokens_max = 0;     // the most positions a slot's cache has held
  int64_t n_context_shifts = 0; // context shifts (--context-shift)
  int queued = 0;
  int slots_busy = 0;
  int n_slots = 0;
  int64_t kv_used = 0;          // KV positions held by the jobs in slots (a free slot's cached prefix: not counted)
  int64_t kv_size = 0;          // KV positions of all slots: n_slots x n_ctx_slot
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> create(std::shared_ptr<const Model> model, const Tokenizer& tok,
                                                  const EngineParams& p, const EngineDraft& draft = {});
  ~Engine();  // stops the engine thread (cancels what is left)

  // Queues the jobs (all or none). False when the queue has no room or the engine is draining.
  bool submit(std::vector<Job> jobs);
  // Refuse new jobs from now on; run() keeps going until what is queued and active is done.
  void drain();
  // drain() and wait until every job has finished, at most `timeout` (then false).
  bool wait_idle(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  // Ends every queued and active job now with an error event carrying `reason`.
  void cancel_all(const std::string& reason);
  // Work is waiting or running but no step has finished for watchdog_s seconds.
  bool stalled() const;

  EngineMetrics metrics() const;  // queued and slots_busy are 0 whenever the engine is idle
  // What each slot is doing (llama-server's GET /slots).
  struct SlotInfo {
    int id = 0;
    bool processing = false;
    int n_cached = 0;        // positions its cache holds
    int n_prompt = 0;        // the running job's prompt tokens (0 when idle)
    int n_decoded = 0;       // tokens it has generated so far (0 when idle)
    int n_predict = -1;      // its limit (-1 when idle or none)
  };
  std::vector<SlotInfo> slots() const;
  // Runs fn on the engine thread, between steps, once slot `id` is idle (a job queued before it
  // may take the slot first): fn gets the context, the slot's sequence and the tokens its cache
  // holds, which fn must keep equal to what the sequence holds (slot files: slot-files.h).
  // Blocks until fn has run; an error when the slot stays busy past `timeout` or the engine
  // stops first, else fn's own status.
  using SlotEdit = std::function<Status(Context& ctx, int seq, std::vector<int32_t>& cached)>;
  Status edit_idle_slot(int id, SlotEdit fn, std::chrono::milliseconds timeout);
  // The context, for its layout only (model, params, n_ctx_seq, kv_export_bytes: fixed at
  // creation, safe to read from any thread); everything else belongs to the engine thread.
  const Context& context() const;
  const EngineParams& params() const { return params_; }
  int n_ctx_slot() const { return params_.n_ctx_slot; }
  bool has_draft_model() const;

 private:
  struct Impl;
  explicit Engine(const EngineParams& p);
  EngineParams params_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minfer::server
