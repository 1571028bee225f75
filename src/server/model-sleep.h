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
// Thread-safe. stop() (shutdown) ends sleeping and waking: the state stays as it is.
#pragma once

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
  ModelSleep(ServerState& s, double idle_s, const EngineParams& ep, const EngineDraft& draft);
  ~ModelSleep() { stop(); }

  // A request that needs the model: loads it if asleep. The error says why it could not.
  std::optional<std::string> acquire();
  void release();
  bool sleeping() const;
  // The engines' counters so far (the one running now, and those unloaded before it); asleep:
  // as they were when it fell asleep, with no slot busy.
  EngineMetrics engine_metrics() const;
  bool stalled() const;  // the running engine's watchdog (asleep: false)
  void stop();

 private:
  void watch();
  void fall_asleep();  // mu_ held

  ServerState& s_;
  const std::chrono::duration<double> idle_;
  const EngineParams ep_;
  const EngineDraft draft_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool asleep_ = false, stopped_ = false;
  int users_ = 0;  // requests between acquire() and release()
  std::chrono::steady_clock::time_point last_used_ = std::chrono::steady_clock::now();
  EngineMetrics base_;  // the counters of the engines unloaded so far
  std::thread thread_;
};

}  // namespace minfer::server
