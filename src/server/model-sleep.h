// --sleep-idle-seconds N (llama-server's): after N seconds in which no request needed the model,
// the engine (its KV cache, its threads) and the model's weights are freed; the next request
// that needs them loads them again and waits for that. /health, /props, /models and /metrics
// answer while asleep without waking it, /metrics from the engine's counters as they were when
// it fell asleep. Without the flag it never sleeps; the engine's counters are still kept here,
// summed over the engines a server has had.
//
//   ModelSleep sleep(state, sp.sleep_idle_s, ep, draft);  // state.engine and state.model loaded
//   if (auto err = sleep.acquire()) return reply_503(*err);  // awake until release()
//   ... state.engine->submit(...) ...
//   sleep.release();                                        // once its last byte is written
//
// A pool's model (model-pool.h) is kept per request as Ollama's keep_alive says: acquire(k) sets
// the idle time that starts at that request's end (0: unloaded once it ends, negative: kept for
// good), and unload() evicts it at once when no request holds it.
//
//   ModelSleep sleep(state, /*idle_s=*/300, ep, draft, /*pooled=*/true);
//   sleep.acquire(0);  ...  sleep.release();   // unloaded within 100 ms of the release
//
// Thread-safe. stop() (shutdown) ends sleeping and waking: the state stays as it is.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "server/engine.h"

namespace minfer::server {

struct ServerState;

class ModelSleep {
 public:
  // idle_s: unused this long, the model sleeps; not pooled: 0 or less never; pooled: 0 at once,
  // negative never (and acquire() may change it per request).
  ModelSleep(ServerState& s, double idle_s, const EngineParams& ep, const EngineDraft& draft, bool pooled = false);
  ~ModelSleep() { stop(); }

  // A request that needs the model: loads it if asleep. The error says why it could not.
  // keep_alive_s (pooled only): the idle time from this request on (nullopt: the default).
  // n_ctx_slot (pooled only, Ollama's num_ctx): the context each slot must have (0: the one
  // serve's -c gives; capped at the model's training context; nullopt: whatever is loaded); a
  // model loaded with another is reloaded with it once no request holds it, as Ollama does
  // (waiting at most sp.timeout_s).
  std::optional<std::string> acquire(std::optional<double> keep_alive_s = std::nullopt, std::optional<int> n_ctx_slot = std::nullopt);
  void release();
  bool sleeping() const;
  // Unloads the model now unless a request holds it or its engine still works; true when it is
  // asleep after the call.
  bool unload();
  struct Use {
    bool asleep = true;
    int users = 0;
    std::chrono::steady_clock::time_point last_used;
    std::optional<double> idle_s;  // nullopt: kept for good
    int n_ctx_slot = 0;            // the loaded engine's (asleep: 0)
  };
  Use use() const;
  // The engines' counters so far (the one running now, and those unloaded before it); asleep:
  // as they were when it fell asleep, with no slot busy. Never waits for a load under way.
  EngineMetrics engine_metrics() const;
  bool pooled() const { return pooled_; }
  bool stalled() const;  // the running engine's watchdog (asleep, loading or unloading: false)
  void stop();

 private:
  void watch();
  void fall_asleep();  // mu_ held
  bool idle_now() const;  // mu_ held: awake, no request holds it, its engine has no work

  ServerState& s_;
  const bool pooled_;
  const std::optional<double> idle_default_;
  std::optional<double> idle_;  // the current idle time (nullopt: never sleeps)
  const EngineParams ep_;
  const EngineDraft draft_;
  mutable std::mutex mu_;
  // Taken after mu_ where the engine is swapped (woken, put to sleep), and alone by
  // engine_metrics(): held for the swap only, never during a load.
  mutable std::mutex engine_mu_;
  std::condition_variable cv_;
  std::atomic<bool> asleep_{false};  // written under mu_; sleeping() reads it without waiting for a load
  bool stopped_ = false;
  int users_ = 0;  // requests between acquire() and release()
  std::chrono::steady_clock::time_point last_used_ = std::chrono::steady_clock::now();
  EngineMetrics base_;  // the counters of the engines unloaded so far
  std::thread thread_;
};

}  // namespace minfer::server
