#include "server/metrics.h"

#include <fmt/format.h>

namespace minfer::server {

RouterLoad& RouterLoad::operator+=(const RouterLoad& o) {
  waiting += o.waiting;
  running += o.running;
  kv_used += o.kv_used;
  kv_size += o.kv_size;
  return *this;
}

void add_router_gauges(PromText& t, const RouterLoad& l) {
  // vLLM's names and meanings (the Gateway API Inference Extension's model server protocol).
  t.add("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", static_cast<double>(l.waiting));
  t.add("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", static_cast<double>(l.running));
  // A fraction, 1 meaning full; no KV cache (nothing loaded) is an empty one.
  t.add("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
        l.kv_size > 0 ? static_cast<double>(l.kv_used) / static_cast<double>(l.kv_size) : 0.0);
}

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
  PromText t;
  collect(t, m);
  add_router_gauges(t, RouterLoad::of(m));
  return t.str();
}

void ServerMetrics::collect_requests(PromText& t, const std::string& labels) {
  const char* help = "HTTP requests by path and status.";
  t.declare("minfer_requests_total", "counter", help);  // listed before the first request too
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [k, v] : requests_)
    t.add("minfer_requests_total", "counter", help, static_cast<double>(v),
          prom_join(labels, prom_label("path", k.first) + "," + prom_label("status", std::to_string(k.second))));
}

void ServerMetrics::collect(PromText& t, const EngineMetrics& m, const std::string& labels) {
  EngineMetrics since;  // the throughput window: counters since the previous scrape
  collect_requests(t, labels);
  {
    std::lock_guard<std::mutex> lk(mu_);
    since.n_prompt_tokens = m.n_prompt_tokens - last_.n_prompt_tokens;
    since.prompt_s = m.prompt_s - last_.prompt_s;
    since.n_gen_tokens = m.n_gen_tokens - last_.n_gen_tokens;
    since.n_first_tokens = m.n_first_tokens - last_.n_first_tokens;
    since.predicted_s = m.predicted_s - last_.predicted_s;
    last_ = m;
    const char* lat = "minfer_request_duration_seconds";
    const char* lat_help = "Completion request latency.";
    for (size_t i = 0; i < kBuckets.size(); ++i)
      t.sample(lat, "histogram", lat_help, "_bucket", prom_join(labels, prom_label("le", fmt::format("{}", kBuckets[i]))),
               static_cast<double>(buckets_[i]));
    t.sample(lat, "histogram", lat_help, "_bucket", prom_join(labels, "le=\"+Inf\""), static_cast<double>(lat_count_));
    t.sample(lat, "histogram", lat_help, "_sum", labels, lat_sum_);
    t.sample(lat, "histogram", lat_help, "_count", labels, static_cast<double>(lat_count_));
  }
  auto counter = [&](const char* name, const char* help, double v) { t.add(name, "counter", help, v, labels); };
  auto gauge = [&](const char* name, const char* help, double v) { t.add(name, "gauge", help, v, labels); };
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
  t.sample("minfer_time_to_first_token_seconds", "summary", "Submit to first token.", "_sum", labels, m.ttft_s_sum);
  t.sample("minfer_time_to_first_token_seconds", "summary", "Submit to first token.", "_count", labels, static_cast<double>(m.ttft_count));
  gauge("minfer_queue_length", "Jobs waiting for a slot.", m.queued);
  gauge("minfer_slots_busy", "Slots generating or prefilling.", m.slots_busy);
  gauge("minfer_slots_total", "Slots (--parallel).", m.n_slots);
  gauge("minfer_kv_positions_used", "KV positions held by the jobs in slots.", static_cast<double>(m.kv_used));
  gauge("minfer_kv_positions_total", "KV positions of all slots.", static_cast<double>(m.kv_size));

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
}

std::string scrape_pool(ServerMetrics& front, const std::vector<PoolModelMetrics>& models) {
  PromText t;
  RouterLoad total;
  for (const PoolModelMetrics& pm : models) {
    RouterLoad l = pm.metrics ? RouterLoad::of(pm.engine) : RouterLoad{};
    l.waiting += pm.waiting;
    total += l;
  }
  // The whole server's, one series per name: routers read one series (which one of several
  // differs between endpoint picker versions); each model's load is in its minfer_ series.
  add_router_gauges(t, total);
  front.collect_requests(t);
  for (const PoolModelMetrics& pm : models) {
    const std::string labels = prom_label("model", pm.name);
    t.add("minfer_model_loaded", "gauge", "1 while the model is loaded, else 0.", pm.loaded ? 1 : 0, labels);
    t.add("minfer_model_requests_waiting", "gauge", "Requests waiting for the model to load or for a place among --models-max.",
          static_cast<double>(pm.waiting), labels);
    if (pm.metrics) pm.metrics->collect(t, pm.engine, labels);
  }
  return t.str();
}

}  // namespace minfer::server
