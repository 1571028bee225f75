// /metrics (Prometheus text format): HTTP requests by path and status, completion latency, and
// the engine's counters, under minfer's names and under llama-server's `llamacpp:` names (so
// dashboards built for llama-server work unchanged), and the gauges that Kubernetes' Gateway API
// Inference Extension routers read under vLLM's names (`vllm:num_requests_waiting`,
// `vllm:num_requests_running`, `vllm:kv_cache_usage_perc`: its model server protocol).
//
//   ServerMetrics m;
//   m.count("POST", "/v1/chat/completions", 200);   // every response (the HTTP logger)
//   m.latency(0.42);                        // a completion request, end to end
//   std::string text = m.scrape(engine.metrics());
//
// Many models (model-pool.h): each model's state has its own ServerMetrics, and scrape_pool()
// gives each model's series a `model="NAME"` label; the vLLM gauges stay one series each, the
// whole server's load (what a router weighs a replica by).
//
// The monitoring endpoints' own requests (/health, /metrics, GET /props) are not counted, so a
// server nobody uses scrapes the same text every time. llamacpp:prompt_tokens_seconds and
// predicted_tokens_seconds are llama-server's windows: the throughput since the previous scrape.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/engine.h"
#include "server/prom-text.h"

namespace minfer::server {

// What a router weighs of a server (or of one model's engine): the model server protocol's
// TotalQueuedRequests, TotalRunningRequests and KVCacheUtilization.
struct RouterLoad {
  int64_t waiting = 0;  // jobs queued for a slot; in a pool also requests waiting for their model to load or for a place
  int64_t running = 0;  // jobs in a slot (prefilling or generating)
  int64_t kv_used = 0;  // KV positions held by those jobs (a free slot's cached prefix is reusable: not counted)
  int64_t kv_size = 0;  // KV positions of all slots (slots x context per slot)
  static RouterLoad of(const EngineMetrics& m) { return {m.queued, m.slots_busy, m.kv_used, m.kv_size}; }
  RouterLoad& operator+=(const RouterLoad& o);
};
// vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc (0..1) of `l`.
void add_router_gauges(PromText& t, const RouterLoad& l);

class ServerMetrics {
 public:
  void count(const std::string& method, const std::string& path, int status);
  void latency(double seconds);
  // One model's server: its series and the router gauges; the throughput window starts again.
  std::string scrape(const EngineMetrics& m);
  // The series of this server or model into t, each with `labels`; the throughput window starts again.
  void collect(PromText& t, const EngineMetrics& m, const std::string& labels = "");
  // Only the HTTP requests (a pool's front: the requests that reached no model).
  void collect_requests(PromText& t, const std::string& labels = "");

 private:
  static constexpr std::array<double, 10> kBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::array<int64_t, 10> buckets_{};
  int64_t lat_count_ = 0;
  double lat_sum_ = 0;
  EngineMetrics last_;  // the counters at the previous scrape (the throughput window's start)
};

// One model of a pool as /metrics shows it.
struct PoolModelMetrics {
  std::string name;                  // its listed name: the `model` label
  bool loaded = false;
  int64_t waiting = 0;               // requests waiting for its load or for a place among --models-max
  ServerMetrics* metrics = nullptr;  // null: never loaded (only its gauges)
  EngineMetrics engine;              // its engines' counters so far
};
// A pool's /metrics: the router gauges of the whole server (no label), the requests that
// reached no model (`front`), then each model's series with model="NAME".
std::string scrape_pool(ServerMetrics& front, const std::vector<PoolModelMetrics>& models);

}  // namespace minfer::server
