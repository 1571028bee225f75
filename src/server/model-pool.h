// Many models in one server (`minfer serve` with no MODEL, several MODELs, or --models-dir): a
// request's model name (OpenAI's and Ollama's `model`, llama-server's router) picks its entry.
// Each entry has its own ServerState (model, tokenizer, engine, chat template, routes), made on
// its first request; its ModelSleep then unloads and reloads the weights per keep_alive. At most
// models_max are loaded, and their memory (each one's weights and KV cache: its GGUF file's size
// until its first load tells its cache) stays within models_memory: another one evicts the least
// recently used that no request holds, or waits for one (never a model with a request running).
// A model larger than the budget alone is loaded once nothing else is. Loading happens outside the pool's lock:
// the other models go on decoding and answering meanwhile.
//
//   ModelPool pool(pp);
//   ModelPool::Entry* e = pool.find("smollm2");            // nullptr: no such model
//   if (auto err = pool.acquire(*e, keep_alive_s)) ...      // 503 with *err
//   e->state()->post_routes.at("/v1/chat/completions")(req, res);
//   pool.release(*e);                                       // once the reply's last byte is out
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/server-state.h"

namespace minfer::server {

class ModelPool {
 public:
  class Entry {
   public:
    const PoolModel& info() const { return info_; }
    const json& tags_entry() const { return tags_; }  // as /api/tags lists it
    ServerState* state() const { return ready_.load(); }  // null until its first load
    // "loaded", "loading" or "unloaded" (llama-server's router status values).
    std::string status() const;
    // Requests in acquire(): waiting for a place among models_max or for the load (/metrics).
    int waiting() const { return acquiring_.load(); }

   private:
    friend class ModelPool;
    PoolModel info_;
    json tags_;
    std::unique_ptr<Tokenizer> tok_;
    std::unique_ptr<ServerState> state_;
    std::unique_ptr<httplib::Server> routes_;  // the state's routes (its post_routes): never listens
    std::atomic<ServerState*> ready_{nullptr};
    std::mutex init_mu_;  // its first load
    std::atomic<int> pending_{0};  // requests between their place in the pool and holding the model
    std::vector<std::string> aliases_;  // more names it answers to (a pull's own spelling), pool's mu_
    std::atomic<bool> removed_{false};  // deleted (/api/delete): no longer found or listed; unloaded once idle
    std::atomic<int> acquiring_{0};  // requests in acquire(), waiting for a place included
    std::chrono::steady_clock::time_point last_used_;  // pool's mu_
    uint64_t file_bytes_ = 0;         // its GGUF files' size
    std::atomic<uint64_t> bytes_{0};  // its memory when loaded: file_bytes_, + its KV cache (as last loaded) once known
  };

  // Reads each model's GGUF header (for /api/tags); a file that cannot be read is left out with
  // a warning.
  ModelPool(const PoolParams& pp, ServerState& front);

  Entry* find(const std::string& name);  // a name of its, with or without Ollama's ":latest"
  std::vector<Entry*> entries();         // those not removed, in the order added
  // A model pulled or copied in: a new entry (its GGUF header read), or the one already known by
  // one of its names. Addresses stay valid for the pool's life.
  Expected<Entry*> add(const PoolModel& m);
  // Deleted: no longer found or listed; unloaded now when idle, else once its last request ends.
  void remove(Entry& e);
  // The model loaded (first use: its whole state made) and held until release(); keep_alive_s
  // its idle time from this request on (nullopt: the pool's default). The error says why not.
  // n_ctx_slot: Ollama's num_ctx (ModelSleep::acquire), the first load's too.
  std::optional<std::string> acquire(Entry& e, std::optional<double> keep_alive_s = std::nullopt, std::optional<int> n_ctx_slot = std::nullopt);
  void release(Entry& e);
  // Unloads e now; false when a request still holds it after a second (it stays).
  bool unload(Entry& e);
  // Shutdown: no more loads or evictions; each state's sleep stopped.
  void stop();
  // Each state made so far (their number only grows).
  void for_each_state(const std::function<void(ServerState&)>& f);

 private:
  std::optional<std::string> make_state(Entry& e, std::optional<int> n_ctx_slot);  // e.init_mu_ held
  bool loaded(const Entry& e) const;                // mu_ held
  Entry* find_locked(const std::string& name);      // mu_ held
  bool evict_one(const Entry& keep);                // mu_ held: the LRU idle one but keep
  // mu_ held: whether e, not loaded, may load beside the loaded ones (--models-max,
  // --models-memory); `why` names the limit that says no.
  bool fits(const Entry& e, std::string& why) const;
  uint64_t loaded_bytes(const Entry* but) const;    // mu_ held
  std::string limits() const;                       // "--models-max 2, --models-memory 1.5 GiB"

  const PoolParams pp_;
  ServerState& front_;
  std::deque<Entry> entries_;  // stable addresses; grows under mu_ (add), never shrinks
  mutable std::mutex mu_;
  std::mutex load_mu_;         // pp_.load calls one at a time
  std::condition_variable cv_;
  bool stopped_ = false;
};

}  // namespace minfer::server
