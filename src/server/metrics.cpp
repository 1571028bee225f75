#include "server/metrics.h"

#include <fmt/format.h>

namespace minfer::server {

void ServerMetrics::count(const std::string& method, const std::string& path, int status) {
  if (path == "/health" || path == "/v1/health" || path == "/metrics" || (method == "GET" && path == "/props")) return;
  std::lock_guard<std::mutex> lk(mu_);
  requests_[{path, status}]++;
}

void ServerMetrics::latency(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (s <= kBuckets[i]) buckets_[i]++;
  lat_count_++;
  lat_sum_ += s;
}

std::string ServerMetrics::scrape(const EngineMetrics& m) {
  std::string o;
  EngineMetrics since;  // the throughput window: counters since the previous scrape
  {
    std::lock_guard<std::mutex> lk(mu_);
    since.n_prompt_tokens = m.n_prompt_tokens - last_.n_prompt_tokens;
    since.prompt_s = m.prompt_s - last_.prompt_s;
    since.n_gen_tokens = m.n_gen_tokens - last_.n_gen_tokens;
    since.n_first_tokens = m.n_first_tokens - last_.n_first_tokens;
    since.predicted_s = m.predicted_s - last_.predicted_s;
    last_ = m;
  }
  auto metric = [&](const char* type, const std::string& name, const char* help, double v) {
    o += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, v);
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    o += "# HELP minfer_requests_total HTTP requests by path and status.\n# TYPE minfer_requests_total counter\n";
    for (const auto& [k, v] : requests_)
      o += fmt::format("minfer_requests_total{{path=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, v);
    o += "# HELP minfer_request_duration_seconds Completion request latency.\n"
         "# TYPE minfer_request_duration_seconds histogram\n";
    for (size_t i = 0; i < kBuckets.size(); ++i)
      o += fmt::format("minfer_request_duration_seconds_bucket{{le=\"{}\"}} {}\n", kBuckets[i], buckets_[i]);
    o += fmt::format("minfer_request_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", lat_count_);
    o += fmt::format("minfer_request_duration_seconds_sum {}\nminfer_request_duration_seconds_count {}\n", lat_sum_, lat_count_);
  }
  auto counter = [&](const char* name, const char* help, double v) { metric("counter", name, help, v); };
  auto gauge = [&](const char* name, const char* help, double v) { metric("gauge", name, help, v); };
  counter("minfer_prompt_tokens_total", "Prompt tokens prefilled.", static_cast<double>(m.n_prompt_tokens));
  counter("minfer_prompt_tokens_cached_total", "Prompt tokens reused from a slot's KV cache.", static_cast<double>(m.n_cached_tokens));
  counter("minfer_generated_tokens_total", "Tokens generated.", static_cast<double>(m.n_gen_tokens));
  counter("minfer_batch_steps_total", "Batched forward passes.", static_cast<double>(m.n_steps));
  counter("minfer_batch_tokens_total", "Tokens in batched forward passes.", static_cast<double>(m.n_step_tokens));
  counter("minfer_jobs_cancelled_total", "Generations stopped because the client went away.", static_cast<double>(m.n_jobs_cancelled));
  counter("minfer_jobs_timed_out_total", "Jobs ended by --timeout or --queue-timeout.", static_cast<double>(m.n_jobs_timed_out));
  counter("minfer_context_shifts_total", "Context shifts of full slots (--context-shift).", static_cast<double>(m.n_context_shifts));
  counter("minfer_jobs_failed_total", "Jobs that ended with an error event.", static_cast<double>(m.n_jobs_failed));
  counter("minfer_draft_tokens_total", "Drafted tokens verified (speculative decoding).", static_cast<double>(m.n_draft_tokens));
  counter("minfer_draft_tokens_accepted_total", "Drafted tokens the target accepted.", static_cast<double>(m.n_draft_accepted));
  counter("minfer_draft_verify_steps_total", "Slot passes that verified a draft.", static_cast<double>(m.n_verify_steps));
  o += fmt::format("# HELP minfer_time_to_first_token_seconds Submit to first token.\n"
                   "# TYPE minfer_time_to_first_token_seconds summary\n"
                   "minfer_time_to_first_token_seconds_sum {}\nminfer_time_to_first_token_seconds_count {}\n",
                   m.ttft_s_sum, m.ttft_count);
  gauge("minfer_queue_length", "Jobs waiting for a slot.", m.queued);
  gauge("minfer_slots_busy", "Slots generating or prefilling.", m.slots_busy);
  gauge("minfer_slots_total", "Slots (--parallel).", m.n_slots);

  // llama-server's names and meanings (tools/server: llamacpp:*).
  const double predicted_steps = static_cast<double>(since.n_gen_tokens - since.n_first_tokens);
  counter("llamacpp:prompt_tokens_total", "Number of prompt tokens processed.", static_cast<double>(m.n_prompt_tokens));
  counter("llamacpp:prompt_tokens_cached_total", "Number of prompt tokens reused from the cache.", static_cast<double>(m.n_cached_tokens));
  counter("llamacpp:prompt_seconds_total", "Prompt process time", m.prompt_s);
  counter("llamacpp:tokens_predicted_total", "Number of generation tokens processed.", static_cast<double>(m.n_gen_tokens));
  counter("llamacpp:tokens_predicted_seconds_total", "Predict process time", m.predicted_s);
  counter("llamacpp:n_decode_total", "Total number of llama_decode() calls", static_cast<double>(m.n_steps));
  counter("llamacpp:n_tokens_max", "Largest observed n_tokens.", static_cast<double>(m.n_tokens_max));
  counter("llamacpp:spec_decode_num_draft_tokens_total", "Number of drafted tokens.", static_cast<double>(m.n_draft_tokens));
  counter("llamacpp:spec_decode_num_accepted_tokens_total", "Number of accepted drafted tokens.",
          static_cast<double>(m.n_draft_accepted));
  counter("llamacpp:spec_decode_num_drafts_total", "Number of drafts verified.", static_cast<double>(m.n_verify_steps));
  gauge("llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s (since the previous scrape).",
        since.prompt_s > 0 ? static_cast<double>(since.n_prompt_tokens) / since.prompt_s : 0.0);
  gauge("llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s (since the previous scrape).",
        since.predicted_s > 0 ? predicted_steps / since.predicted_s : 0.0);
  gauge("llamacpp:requests_processing", "Number of requests processing.", m.slots_busy);
  gauge("llamacpp:requests_deferred", "Number of requests deferred.", m.queued);
  gauge("llamacpp:n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
        m.n_steps > 0 ? static_cast<double>(m.n_busy_slot_steps) / static_cast<double>(m.n_steps) : 0.0);
  return o;
}

}  // namespace minfer::server
