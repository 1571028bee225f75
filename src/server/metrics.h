// /metrics (Prometheus text format): HTTP requests by path and status, completion latency, and
// the engine's counters, under minfer's names and under llama-server's `llamacpp:` names (so
// dashboards built for llama-server work unchanged).
//
//   ServerMetrics m;
//   m.count("POST", "/v1/chat/completions", 200);   // every response (the HTTP logger)
//   m.latency(0.42);                        // a completion request, end to end
//   std::string text = m.scrape(engine.metrics());
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

#include "server/engine.h"

namespace minfer::server {

class ServerMetrics {
 public:
  void count(const std::string& method, const std::string& path, int status);
  void latency(double seconds);
  std::string scrape(const EngineMetrics& m);  // the text; the throughput window starts again

 private:
  static constexpr std::array<double, 10> kBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::array<int64_t, 10> buckets_{};
  int64_t lat_count_ = 0;
  double lat_sum_ = 0;
  EngineMetrics last_;  // the counters at the previous scrape (the throughput window's start)
};

}  // namespace minfer::server
