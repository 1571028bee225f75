// The engine's inside (engine.h says what it does), shared by its three files: engine.cpp (the
// thread's loop, admission through the Scheduler, publishing, the public methods),
// engine-step.cpp (one batched generation step: prefill chunks, drafts, sampling, context
// shift) and engine-embed.cpp (one embedding pass).
//
// Threads: everything here belongs to the engine thread except what `mu` guards (the
// scheduler's queue, the flags, the published metrics and slot views, slot-file tasks). The
// thread counts into `m` as it goes and publishes after each step: metrics and slot views
// first, then the events of that step (outbox), so a client that has read its last event
// finds its job counted and its slot free.
//
//   Impl::loop(): cancel -> slot tasks -> admit -> step() -> embed_step(), each of the last
//   three followed by publish() and deliver()
#pragma once

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/context.h"
#include "runtime/draft-model.h"
#include "runtime/speculative.h"
#include "runtime/step.h"
#include "sampling/sampler.h"
#include "server/engine.h"
#include "server/scheduler.h"

namespace minfer::server {

using Clock = std::chrono::steady_clock;

// A generation job's state on its slot.
struct GenRun {
  std::optional<Sampler> sampler;
  std::optional<TokenStep> step;  // points at sampler: a GenRun stays where it was made
  size_t n_fed = 0;       // prompt tokens in the cache (reused + prefilled)
  int n_cached = 0;       // prompt tokens reused (from this slot or copied from another)
  int32_t next = -1;      // sampled, not yet decoded (-1 while prefilling)
  bool first_token = true;
  Clock::time_point first_at;  // first token sampled
  std::vector<TokenLogprob> pending_lp;  // of the text not yet sent
  std::vector<int32_t> pending_tokens;
  std::optional<Speculator> spec;  // speculative jobs
  Speculator::Plan plan;           // the drafts of the pass being run
  // Set by on_logits when the job ends with the token just sampled (carried out once the
  // pass's rows are walked and the cache rolled back).
  bool ending = false;
  std::string end_text;
  const char* end_reason = nullptr;
  const char* end_stop_type = "limit";
  std::string end_stop_word;
  bool end_context_full = false;  // the job ended because the slot's context was full
  bool shifted = false;           // the job's context was shifted (its reply is "truncated" too)
};

// An embedding job's state on its slot: the input being read, its kept rows [rows][n_embd],
// the inputs done.
struct EmbedRun {
  size_t input = 0;
  std::vector<float> rows;
  std::vector<DoneEvent::Embedding> out;
};

// One sequence of the context. `cached` are the tokens whose K/V sit in the slot's sequence
// (positions 0 .. cached.size() - 1); they outlive the job so that the next one can reuse a
// common prefix. `run` is the job's own state; ending a job resets it whole.
struct Slot {
  int id = 0;
  std::vector<int32_t> cached;
  bool active = false;
  Job job;
  Clock::time_point submitted, started;  // queued; taken by the slot
  std::variant<std::monostate, GenRun, EmbedRun> run;
  GenRun* gen() { return std::get_if<GenRun>(&run); }
  const GenRun* gen() const { return std::get_if<GenRun>(&run); }
  EmbedRun* embed() { return std::get_if<EmbedRun>(&run); }
};

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  const Tokenizer* tok = nullptr;
  std::shared_ptr<const TokenTrie> trie;  // grammar masks: built on the first job with a grammar
  std::shared_ptr<const TokenTrie> grammar_trie() {
    if (!trie) trie = grammar_tokens(*tok);
    return trie;
  }
  EngineParams p;
  int n_vocab = 0;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<DraftModel> draft;
  std::vector<Slot> slots;
  EngineMetrics m;  // the engine thread's counts, published by publish()
  std::vector<std::pair<std::shared_ptr<EventChannel>, JobEvent>> outbox;  // this turn's events
  std::chrono::milliseconds step_delay{0};  // MINFER_TEST_STEP_DELAY_MS: a slow engine for tests
  std::thread thread;                       // runs loop()

  // ---- under mu ----
  mutable std::mutex mu;
  std::condition_variable cv;
  Scheduler queue{0, 0};
  int n_taken = 0;            // slots holding a job (admitted, not yet published as free)
  bool draining = false;
  bool stopping = false;
  std::string cancel_reason;  // cancel_all() asked for, not yet carried out
  bool cancel_pending = false;
  EngineMetrics shown;                      // what metrics() returns
  std::vector<Engine::SlotInfo> published;  // what slots() returns
  Clock::time_point last_progress = Clock::now();
  struct SlotTask {
    int slot = 0;
    Engine::SlotEdit fn;
    Clock::time_point deadline;
    std::promise<Status> done;
  };
  std::vector<std::shared_ptr<SlotTask>> tasks;
  bool has_work_locked() const { return !queue.empty() || n_taken > 0 || !tasks.empty(); }

  // ---- engine.cpp: the loop, events, ending jobs ----
  void loop();
  void publish();  // metrics and slot views (takes mu)
  void deliver();  // the outbox, after publish()
  void send(const Job& job, JobEvent ev) { outbox.emplace_back(job.channel, std::move(ev)); }
  void send_error(const Job& job, const std::string& msg);
  void emit(Slot& s, std::string text, bool done, const char* reason);  // a generation's text / done event
  void progress(Slot& s);
  void release(Slot& s);  // the slot is free; its cache stays
  void fail(Slot& s, const std::string& msg, bool keep_cache = true);
  void done(Slot& s, std::string text, const char* reason);
  void admit();
  void run_slot_tasks();
  void cancel_everything(const std::string& reason);
  void note_progress();  // a step finished (the watchdog)

  // ---- engine-step.cpp: generation ----
  void start(Slot& s, Job job);
  bool on_logits(Slot& s, std::span<const float> raw, TokenStep::Result& r);
  std::vector<DraftRequest> draft_reqs;
  std::vector<Slot*> draft_owners;
  void plan_drafts();
  void reap(Clock::time_point now);
  void shift_full_slots();
  Batch batch;
  std::vector<Slot*> owners;  // [batch row] whose token it is
  struct Want {
    Slot* slot;
    int n_rows;  // its logits rows: 1, or 1 + drafts while generating
  };
  std::vector<Want> wants;  // slots whose logits rows come back, in row order
  bool step();

  // ---- engine-embed.cpp: embeddings ----
  void start_embed(Slot& s, Job job);
  Batch ebatch;
  std::vector<Slot*> eowners;               // [kept row] whose row it is
  std::vector<std::pair<Slot*, int>> efed;  // slots in this pass and how many tokens each
  bool embed_step();
};

}  // namespace minfer::server
