#include "server/http-server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <algorithm>
#include <mutex>
#include <deque>
#include <condition_variable>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <thread>

#include "runtime/chat-prompt.h"
#include "server/api.h"
#include "toolcall/parser.h"

namespace minfer::server {
namespace {

using Clock = std::chrono::steady_clock;

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += kAlnum[rng() % 62];
  return s;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Request counters and latency for /metrics (Prometheus text format).
class HttpMetrics {
 public:
  void count(const std::string& path, int status) {
    std::lock_guard<std::mutex> lk(mu_);
    requests_[{path, status}]++;
  }
  void latency(double s) {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t i = 0; i < kBuckets.size(); ++i)
      if (s <= kBuckets[i]) buckets_[i]++;
    lat_count_++;
    lat_sum_ += s;
  }
  std::string render(const EngineMetrics& m) const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string o;
    o += "# HELP minfer_requests_total HTTP requests by path and status.\n# TYPE minfer_requests_total counter\n";
    for (const auto& [k, v] : requests_)
      o += fmt::format("minfer_requests_total{{path=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, v);
    o += "# HELP minfer_request_duration_seconds Completion request latency.\n"
         "# TYPE minfer_request_duration_seconds histogram\n";
    for (size_t i = 0; i < kBuckets.size(); ++i)
      o += fmt::format("minfer_request_duration_seconds_bucket{{le=\"{}\"}} {}\n", kBuckets[i], buckets_[i]);
    o += fmt::format("minfer_request_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", lat_count_);
    o += fmt::format("minfer_request_duration_seconds_sum {}\nminfer_request_duration_seconds_count {}\n", lat_sum_, lat_count_);
    auto counter = [&](const char* name, const char* help, int64_t v) {
      o += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, v);
    };
    auto gauge = [&](const char* name, const char* help, double v) {
      o += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0} {2}\n", name, help, v);
    };
    counter("minfer_prompt_tokens_total", "Prompt tokens prefilled.", m.n_prompt_tokens);
    counter("minfer_prompt_tokens_cached_total", "Prompt tokens reused from a slot's KV cache.", m.n_cached_tokens);
    counter("minfer_generated_tokens_total", "Tokens generated.", m.n_gen_tokens);
    counter("minfer_batch_steps_total", "Batched forward passes.", m.n_steps);
    counter("minfer_batch_tokens_total", "Tokens in batched forward passes.", m.n_step_tokens);
    counter("minfer_jobs_cancelled_total", "Generations stopped because the client went away.", m.n_jobs_cancelled);
    counter("minfer_jobs_timed_out_total", "Jobs ended by --timeout or --queue-timeout.", m.n_jobs_timed_out);
    counter("minfer_jobs_failed_total", "Jobs that ended with an error event.", m.n_jobs_failed);
    counter("minfer_draft_tokens_total", "Drafted tokens verified (speculative decoding).", m.n_draft_tokens);
    counter("minfer_draft_tokens_accepted_total", "Drafted tokens the target accepted.", m.n_draft_accepted);
    counter("minfer_draft_verify_steps_total", "Slot passes that verified a draft.", m.n_verify_steps);
    o += fmt::format("# HELP minfer_time_to_first_token_seconds Submit to first token.\n"
                     "# TYPE minfer_time_to_first_token_seconds summary\n"
                     "minfer_time_to_first_token_seconds_sum {}\nminfer_time_to_first_token_seconds_count {}\n",
                     m.ttft_s_sum, m.ttft_count);
    gauge("minfer_queue_length", "Jobs waiting for a slot.", m.queued);
    gauge("minfer_slots_busy", "Slots generating or prefilling.", m.slots_busy);
    gauge("minfer_slots_total", "Slots (--parallel).", m.n_slots);
    return o;
  }

 private:
  static constexpr std::array<double, 10> kBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::array<int64_t, 10> buckets_{};
  int64_t lat_count_ = 0;
  double lat_sum_ = 0;
};

// httplib's TaskQueue with a bounded backlog: when every thread is busy and max_pending
// connections wait, enqueue() blocks the accepting thread (back-pressure) instead of growing
// a queue without limit.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(size_t n_threads, size_t max_pending) : max_pending_(std::max<size_t>(1, max_pending)) {
    for (size_t i = 0; i < n_threads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~BoundedTaskQueue() override { shutdown(); }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lk(mu_);
    room_.wait(lk, [&] { return pending_.size() < max_pending_ || stop_; });
    pending_.push_back(std::move(fn));
    ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_ && threads_.empty()) return;
      stop_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lk(mu_);
        ready_.wait(lk, [&] { return !pending_.empty() || stop_; });
        if (pending_.empty()) return;  // stopping, nothing left
        fn = std::move(pending_.front());
        pending_.pop_front();
      }
      room_.notify_one();
      fn();
    }
  }
  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<std::function<void()>> pending_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

struct Server {
  std::shared_ptr<const Model> model;
  const Tokenizer* tok = nullptr;
  ServerParams sp;
  std::unique_ptr<Engine> engine;
  HttpMetrics metrics;
  std::atomic<bool> draining{false};
  std::string chat_template;              // --chat-template(-file), or the model's
  toolcall::TemplateTools template_tools;  // what that template does with tools (probed at start)
  int64_t created = static_cast<int64_t>(std::time(nullptr));

  void reply_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(error_json(e)), "application/json");
  }

  json chunk_base(const std::string& id, bool chat, int64_t t) const {
    return {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", t},
            {"model", sp.alias}, {"system_fingerprint", "minfer-" MINFER_SERVER_VERSION}};
  }

  // llama-server's "timings" (of the first choice; draft counts over all choices).
  struct Timings {
    int prompt_n = 0, predicted_n = 0;
    double prompt_ms = 0, predicted_ms = 0;
    int64_t draft_n = 0, draft_n_accepted = 0;
    bool first = true;
    void add(const JobEvent& ev) {
      if (first) {
        prompt_n = ev.n_prompt - ev.n_cached;
        predicted_n = ev.n_gen;
        prompt_ms = ev.prompt_ms;
        predicted_ms = ev.predicted_ms;
        first = false;
      }
      draft_n += ev.n_draft;
      draft_n_accepted += ev.n_draft_accepted;
    }
    json to_json() const {
      auto per_s = [](int n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
      json t = {{"cache_n", 0},
                {"prompt_n", prompt_n},
                {"prompt_ms", prompt_ms},
                {"prompt_per_token_ms", prompt_n > 0 ? prompt_ms / prompt_n : 0.0},
                {"prompt_per_second", per_s(prompt_n, prompt_ms)},
                {"predicted_n", predicted_n},
                {"predicted_ms", predicted_ms},
                {"predicted_per_token_ms", predicted_n > 0 ? predicted_ms / predicted_n : 0.0},
                {"predicted_per_second", per_s(predicted_n, predicted_ms)},
                {"draft_n", draft_n},
                {"draft_n_accepted", draft_n_accepted}};
      return t;
    }
  };

  // OpenAI's message.tool_calls, and the delta.tool_calls items of a stream.
  static json tool_calls_json(const std::vector<toolcall::ToolCall>& calls) {
    json a = json::array();
    for (const auto& c : calls)
      a.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    return a;
  }
  static json call_delta_json(const toolcall::CallDelta& d) {
    if (d.start)
      return {{"index", d.index}, {"id", d.id}, {"type", "function"}, {"function", {{"name", d.name}, {"arguments", d.arguments}}}};
    return {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
  }
  // A reply that called tools and ended by itself finishes with "tool_calls".
  static std::string finish_with_tools(const std::string& reason, bool called) {
    return called && reason == "stop" ? "tool_calls" : reason;
  }

  static json usage_json(int n_prompt, int n_gen, int n_cached) {
    return {{"prompt_tokens", n_prompt}, {"completion_tokens", n_gen}, {"total_tokens", n_prompt + n_gen},
            {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
  }

  std::vector<Job> make_jobs(const CompletionRequest& r, const std::shared_ptr<EventChannel>& ch) const {
    std::vector<Job> jobs;
    for (int i = 0; i < r.n; ++i) {
      Job j;
      j.prompt = r.prompt;
      j.sampling = r.sampling;
      if (r.sampling.seed != kSeedRandom) j.sampling.seed = r.sampling.seed + i;
      j.n_predict = r.n_predict;
      j.stop = r.stop;
      j.ignore_eog = r.ignore_eos;
      j.top_logprobs = r.logprobs ? r.top_logprobs : -1;
      j.grammar = r.grammar;
      j.grammar_triggers = r.grammar_triggers;
      j.spec = r.spec;
      j.index = i;
      j.deadline = Clock::now() + std::chrono::seconds(sp.timeout_s);
      j.channel = ch;
      jobs.push_back(std::move(j));
    }
    return jobs;
  }

  // The last bytes of a non-streamed reply; the request's latency is recorded.
  bool finish_body(httplib::DataSink& sink, const std::string& reply, Clock::time_point t0) {
    if (!sink.write(reply.data(), reply.size())) return false;
    sink.done();
    metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
    return true;
  }

  // llama-server's native POST /completion: {"prompt", "n_predict", sampling fields,
  // "return_tokens", "stream", "speculative.*"} -> {"content", "tokens", "stop", "stop_type",
  // "tokens_predicted", "tokens_evaluated", "tokens_cached", "truncated", "timings", ...}; a
  // stream is "data: {content, tokens, stop: false}" events, then the full object with stop: true.
  json native_final(const CompletionRequest& r, const std::string& content, const std::vector<int32_t>& tokens,
                    const JobEvent& done, const Timings& t) const {
    json j = {{"index", 0}, {"content", content}, {"tokens", r.return_tokens ? json(tokens) : json::array()},
              {"id_slot", -1}, {"stop", true}, {"model", sp.alias}, {"tokens_predicted", done.n_gen},
              {"tokens_evaluated", static_cast<int>(r.prompt.size())}, {"tokens_cached", done.n_cached},
              {"truncated", false}, {"stop_type", done.stop_type.empty() ? "limit" : done.stop_type},
              {"stopping_word", ""}};
    j["timings"] = t.to_json();
    j["timings"]["cache_n"] = done.n_cached;
    return j;
  }

  void native_completion(const httplib::Request& req, httplib::Response& res) {
    const auto t0 = Clock::now();
    auto [r, ch] = accept(req, res, false, true);
    if (!r) return;
    res.set_chunked_content_provider(
        r->stream ? "text/event-stream" : "application/json",
        [this, r, ch, t0](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string s = "data: " + dump(j) + "\n\n";
            return sink.write(s.data(), s.size());
          };
          std::string content, error;
          std::vector<int32_t> tokens;
          JobEvent ev, done;
          auto last_write = Clock::now();
          for (;;) {
            const auto pr = ch->pop(ev, std::chrono::milliseconds(200));
            if (pr == EventChannel::kClosed) break;
            if (!r->stream && Clock::now() - last_write >= std::chrono::milliseconds(200)) {
              last_write = Clock::now();
              if (!sink.write(" ", 1)) {  // the client went away
                ch->cancel();
                return false;
              }
            }
            if (pr == EventChannel::kTimeout) {
              if (r->stream && sink.is_writable && !sink.is_writable()) {
                ch->cancel();
                return false;
              }
              continue;
            }
            if (ev.kind == JobEvent::kError) {
              error = ev.error;
              continue;
            }
            content += ev.text;
            tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
            if (r->stream && (!ev.text.empty() || !ev.tokens.empty())) {
              json c = {{"index", 0}, {"content", ev.text}, {"tokens", r->return_tokens ? json(ev.tokens) : json::array()},
                        {"stop", false}, {"id_slot", -1}};
              if (!send(c)) {
                ch->cancel();
                return false;
              }
            }
            if (ev.kind == JobEvent::kDone) done = ev;
          }
          std::string reply;
          if (!error.empty()) {
            json e = error_json({500, error, "server_error", "", ""});
            reply = r->stream ? "data: " + dump(e) + "\n\n" : dump(e);
          } else {
            Timings t;
            t.add(done);
            json fin = native_final(*r, r->stream ? std::string() : content, r->stream ? std::vector<int32_t>{} : tokens, done, t);
            reply = r->stream ? "data: " + dump(fin) + "\n\n" : dump(fin);
          }
          return finish_body(sink, reply, t0);
        },
        [ch](bool success) {
          if (!success) ch->cancel();
        });
  }

  // Parses the body and queues its jobs; on any refusal the error reply is set and r is null.
  struct Accepted {
    std::shared_ptr<CompletionRequest> r;
    std::shared_ptr<EventChannel> ch;
  };
  Accepted accept(const httplib::Request& req, httplib::Response& res, bool chat, bool one_choice) {
    json body;
    try {
      body = json::parse(req.body);
    } catch (const std::exception& e) {
      reply_error(res, {400, fmt::format("the request body is not valid JSON: {}", e.what()), "invalid_request_error", "", ""});
      return {};
    }
    ParseContext pc{&model->file(), tok, engine->n_ctx_slot(), sp.default_n_predict, sp.spec ? &*sp.spec : nullptr,
                    engine->has_draft_model(), &chat_template, &template_tools};
    auto parsed = parse_completion_request(body, chat, pc);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      reply_error(res, *e);
      return {};
    }
    auto r = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
    if (one_choice && r->n != 1) {
      reply_error(res, {400, "/completion generates one completion ('n' must be 1)", "invalid_request_error", "n", ""});
      return {};
    }
    auto ch = std::make_shared<EventChannel>(r->n);
    if (draining || !engine->submit(make_jobs(*r, ch))) {
      res.set_header("Retry-After", "1");
      reply_error(res, {503, draining ? "the server is shutting down" : "the server is busy: every slot and queue place is taken; retry later",
                        "server_error", "", "server_busy"});
      return {};
    }
    return {std::move(r), std::move(ch)};
  }

  void completions(const httplib::Request& req, httplib::Response& res, bool chat) {
    const auto t0 = Clock::now();
    auto [r, ch] = accept(req, res, chat, false);
    if (!r) return;
    const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created_t = static_cast<int64_t>(std::time(nullptr));
    if (r->stream) return stream(res, r, ch, id, created_t, chat, t0);

    // Non-streaming: collect every choice, then one JSON body. The body goes out chunked, with
    // a space (JSON whitespace, ignored by every parser) written while the reply is computed,
    // every 200 ms: a client that went away makes that write fail, which stops its generation
    // and frees its slot (cpp-httplib 0.11 has no other way to see a closed connection).
    res.set_chunked_content_provider(
        "application/json",
        [this, r, ch, id, created_t, chat, t0](size_t, httplib::DataSink& sink) {
          std::vector<std::string> text(static_cast<size_t>(r->n));
          std::vector<std::string> reason(static_cast<size_t>(r->n));
          std::vector<std::vector<TokenLogprob>> lps(static_cast<size_t>(r->n));
          int n_prompt = static_cast<int>(r->prompt.size()), n_gen = 0, n_cached = 0;
          Timings timings;
          std::string error;
          JobEvent ev;
          auto last_write = Clock::now();
          for (;;) {
            const auto pr = ch->pop(ev, std::chrono::milliseconds(200));
            if (pr == EventChannel::kClosed) break;
            if (Clock::now() - last_write >= std::chrono::milliseconds(200)) {
              last_write = Clock::now();
              if (!sink.write(" ", 1)) {  // the client went away
                ch->cancel();
                return false;
              }
            }
            if (pr == EventChannel::kTimeout) continue;
            const size_t k = static_cast<size_t>(ev.index);
            if (ev.kind == JobEvent::kError) {
              error = ev.error;
              continue;
            }
            text[k] += ev.text;
            lps[k].insert(lps[k].end(), ev.logprobs.begin(), ev.logprobs.end());
            if (ev.kind == JobEvent::kDone) {
              reason[k] = ev.finish_reason;
              n_gen += ev.n_gen;
              n_cached = ev.n_cached;
              timings.add(ev);
            }
          }
          std::string reply;
          if (!error.empty()) {  // the status line is out already: the error object is the body
            reply = dump(error_json({500, error, "server_error", "", ""}));
          } else {
            json choices = json::array();
            for (int i = 0; i < r->n; ++i) {
              const size_t k = static_cast<size_t>(i);
              json c;
              c["index"] = i;
              if (chat) {
                c["message"] = {{"role", "assistant"}, {"content", text[k]}};
                if (r->tools) {
                  toolcall::ToolCallParser p(*r->tools);
                  p.feed(text[k]);
                  p.finish();
                  const auto& reply_tools = p.result();
                  c["message"]["content"] = reply_tools.content.empty() && !reply_tools.calls.empty() ? json(nullptr) : json(reply_tools.content);
                  if (!reply_tools.calls.empty()) c["message"]["tool_calls"] = tool_calls_json(reply_tools.calls);
                  reason[k] = finish_with_tools(reason[k], !reply_tools.calls.empty());
                }
                c["message"]["refusal"] = nullptr;
                c["logprobs"] = r->logprobs ? json{{"content", chat_logprobs_json(*tok, lps[k])}, {"refusal", nullptr}} : json(nullptr);
              } else {
                c["text"] = text[k];
                json lp = nullptr;
                size_t off = 0;
                if (r->logprobs) append_completion_logprobs(*tok, lps[k], lp, off);
                c["logprobs"] = lp;
              }
              c["finish_reason"] = reason[k];
              choices.push_back(std::move(c));
            }
            json out = {{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created_t},
                        {"model", sp.alias}, {"system_fingerprint", "minfer-" MINFER_SERVER_VERSION}, {"choices", choices},
                        {"usage", usage_json(n_prompt, n_gen, n_cached)}};
            out["timings"] = timings.to_json();
            out["timings"]["cache_n"] = n_cached;
            reply = dump(out);
          }
          return finish_body(sink, reply, t0);
        },
        [ch](bool success) {
          if (!success) ch->cancel();
        });
  }

  void stream(httplib::Response& res, std::shared_ptr<CompletionRequest> r, std::shared_ptr<EventChannel> ch,
              const std::string& id, int64_t created_t, bool chat, Clock::time_point t0) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // nginx: pass chunks through as they come
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, r, ch, id, created_t, chat, t0](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string s = "data: " + dump(j) + "\n\n";
            return sink.write(s.data(), s.size());
          };
          auto chunk = [&](int index, json delta_or_text, json logprobs, json finish) {
            json c = chunk_base(id, chat, created_t);
            json choice = {{"index", index}};
            if (chat) choice["delta"] = std::move(delta_or_text);
            else choice["text"] = std::move(delta_or_text);
            choice["logprobs"] = std::move(logprobs);
            choice["finish_reason"] = std::move(finish);
            c["choices"] = json::array({choice});
            if (r->include_usage) c["usage"] = nullptr;
            return c;
          };
          bool ok = true;
          if (chat)  // the first delta of each choice carries the role
            for (int i = 0; i < r->n && ok; ++i)
              ok = send(chunk(i, {{"role", "assistant"}, {"content", nullptr}, {"refusal", nullptr}}, nullptr, nullptr));
          int n_gen = 0, n_cached = 0;
          std::vector<size_t> offsets(static_cast<size_t>(r->n), 0);
          std::vector<toolcall::ToolCallParser> parsers;
          if (chat && r->tools)
            for (int i = 0; i < r->n; ++i) parsers.emplace_back(*r->tools);
          std::string error;
          JobEvent ev;
          while (ok) {
            const auto pr = ch->pop(ev, std::chrono::milliseconds(200));
            if (pr == EventChannel::kClosed) break;
            if (pr == EventChannel::kTimeout) {
              if (sink.is_writable && !sink.is_writable()) ok = false;
              continue;
            }
            if (ev.kind == JobEvent::kError) {
              error = ev.error;
              continue;
            }
            json lp = nullptr;
            if (r->logprobs && !ev.logprobs.empty()) {
              if (chat) {
                lp = {{"content", chat_logprobs_json(*tok, ev.logprobs)}, {"refusal", nullptr}};
              } else {
                append_completion_logprobs(*tok, ev.logprobs, lp, offsets[static_cast<size_t>(ev.index)]);
              }
            }
            std::string finish = ev.finish_reason;
            if (!parsers.empty()) {  // tools: content and delta.tool_calls, never the call markup
              toolcall::ToolCallParser& p = parsers[static_cast<size_t>(ev.index)];
              toolcall::ReplyDelta d = p.feed(ev.text);
              if (ev.kind == JobEvent::kDone) {
                toolcall::ReplyDelta rest = p.finish();
                d.content += rest.content;
                d.calls.insert(d.calls.end(), rest.calls.begin(), rest.calls.end());
                finish = finish_with_tools(finish, !p.result().calls.empty());
              }
              if (!d.content.empty() || !lp.is_null()) ok = send(chunk(ev.index, json{{"content", d.content}}, lp, nullptr));
              for (const toolcall::CallDelta& cd : d.calls)
                if (ok) ok = send(chunk(ev.index, json{{"tool_calls", json::array({call_delta_json(cd)})}}, nullptr, nullptr));
            } else if (!ev.text.empty() || !lp.is_null()) {
              ok = send(chunk(ev.index, chat ? json{{"content", ev.text}} : json(ev.text), lp, nullptr));
            }
            if (ok && ev.kind == JobEvent::kDone) {
              n_gen += ev.n_gen;
              n_cached = ev.n_cached;
              json last = chunk(ev.index, chat ? json::object() : json(""), nullptr, finish);
              Timings t;
              t.add(ev);
              last["timings"] = t.to_json();
              last["timings"]["cache_n"] = ev.n_cached;
              ok = send(last);
            }
          }
          if (!ok) {  // the client went away: stop generating, free the slot
            ch->cancel();
            return false;
          }
          if (!error.empty()) {
            json e = error_json({500, error, "server_error", "", ""});
            send(e);
          } else if (r->include_usage) {
            json c = chunk_base(id, chat, created_t);
            c["choices"] = json::array();
            c["usage"] = usage_json(static_cast<int>(r->prompt.size()), n_gen, n_cached);
            send(c);
          }
          static const std::string kDone = "data: [DONE]\n\n";
          sink.write(kDone.data(), kDone.size());
          sink.done();
          metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
          return true;
        },
        [ch](bool success) {
          if (!success) ch->cancel();
        });
  }
};

}  // namespace

int run_server(std::shared_ptr<const Model> model, const Tokenizer& tok, const EngineParams& ep, const ServerParams& sp_in,
               const EngineDraft& draft) {
  // Signals go to one thread (sigwait below), never to a worker in the middle of a write.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Server s;
  s.model = model;
  s.tok = &tok;
  s.sp = sp_in;
  if (s.sp.chat_template.empty()) {  // the model's, or the built-in fallback for its architecture
    ChatTemplateChoice choice = choose_chat_template(model->file());
    if (choice.fallback) std::fprintf(stderr, "[server] %s\n", chat_template_notice(model->file(), choice).c_str());
    s.chat_template = std::move(choice.source);
  } else {
    s.chat_template = s.sp.chat_template;
  }
  s.template_tools = toolcall::probe_template(s.chat_template);
  auto engine = Engine::create(model, tok, ep, draft);
  if (!engine) {
    std::fprintf(stderr, "error: %s\n", engine.error().message.c_str());
    return 1;
  }
  s.engine = std::move(*engine);

  httplib::Server http;
  // One thread per open connection (httplib): every slot and queue place, plus idle keep-alive
  // connections (a load balancer keeps some open per worker).
  const int n_threads = s.sp.n_http_threads > 0 ? s.sp.n_http_threads : ep.n_slots + ep.max_queue + 64;
  const size_t max_pending = static_cast<size_t>(std::max(1, s.sp.max_pending_connections));
  http.new_task_queue = [n_threads, max_pending] { return new BoundedTaskQueue(static_cast<size_t>(n_threads), max_pending); };
  http.set_payload_max_length(s.sp.max_body);
  http.set_read_timeout(s.sp.timeout_s, 0);
  http.set_write_timeout(s.sp.timeout_s, 0);
  // An idle keep-alive connection is closed after this; it also bounds how long SIGTERM waits
  // for idle connections (httplib notices the stop only between requests).
  http.set_keep_alive_timeout(5);
  http.set_keep_alive_max_count(10000);

  http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health" || s.sp.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + s.sp.api_key) return httplib::Server::HandlerResponse::Unhandled;
    s.reply_error(res, {401, auth.empty() ? "You didn't provide an API key (Authorization: Bearer KEY)."
                                          : "Incorrect API key provided.",
                        "authentication_error", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib produces itself (404 no route, 413 body too large, 400 bad request line,
  // 405) get OpenAI's error shape too; bodies we set are kept.
  http.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    if (res.status == 404) {
      e.message = fmt::format("no route for {} {}", req.method, req.path);
      e.type = "not_found_error";
      e.code = "not_found";
    } else if (res.status == 413) {
      e.message = fmt::format("the request body is larger than the limit of {} bytes", s.sp.max_body);
      e.code = "request_too_large";
    } else {
      e.message = fmt::format("HTTP {}", res.status);
      if (res.status >= 500) e.type = "server_error";
    }
    res.set_content(dump(error_json(e)), "application/json");
  });
  http.set_exception_handler([&s](const httplib::Request&, httplib::Response& res, std::exception_ptr ep_) {
    std::string what = "internal error";
    try {
      if (ep_) std::rethrow_exception(ep_);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    s.reply_error(res, {500, what, "server_error", "", ""});
  });
  http.set_logger([&s](const httplib::Request& req, const httplib::Response& res) { s.metrics.count(req.path, res.status); });

  http.Post("/v1/chat/completions", [&s](const httplib::Request& q, httplib::Response& r) { s.completions(q, r, true); });
  http.Post("/chat/completions", [&s](const httplib::Request& q, httplib::Response& r) { s.completions(q, r, true); });
  http.Post("/v1/completions", [&s](const httplib::Request& q, httplib::Response& r) { s.completions(q, r, false); });
  http.Post("/completions", [&s](const httplib::Request& q, httplib::Response& r) { s.completions(q, r, false); });
  http.Post("/completion", [&s](const httplib::Request& q, httplib::Response& r) { s.native_completion(q, r); });
  auto models = [&s](const httplib::Request&, httplib::Response& r) {
    json m = {{"id", s.sp.alias}, {"object", "model"}, {"created", s.created}, {"owned_by", "minfer"}};
    r.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  };
  http.Get("/v1/models", models);
  http.Get("/models", models);
  http.Get("/health", [&s](const httplib::Request&, httplib::Response& r) {
    if (s.draining) {
      r.status = 503;
      r.set_content(dump(error_json({503, "the server is shutting down", "server_error", "", "unavailable"})), "application/json");
      return;
    }
    if (s.engine->stalled()) {  // the watchdog: work waits or runs but no step finishes
      r.status = 503;
      r.set_content(dump(error_json({503, fmt::format("the engine has work but finished no step for {} s", s.engine->params().watchdog_s),
                                     "server_error", "", "engine_stalled"})),
                    "application/json");
      return;
    }
    r.set_content("{\"status\":\"ok\"}", "application/json");
  });
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& r) {
    r.set_content(s.metrics.render(s.engine->metrics()), "text/plain; version=0.0.4");
  });

  if (!http.bind_to_port(s.sp.host, s.sp.port)) {
    std::fprintf(stderr, "error: cannot listen on %s:%d (in use, or not an address of this machine)\n", s.sp.host.c_str(), s.sp.port);
    return 1;
  }
  // Signals: the first drains (stop accepting; in-flight requests get drain_timeout_s, then
  // are ended with an error), a second one exits at once.
  std::atomic<bool> finished{false};
  std::thread sig_thread([&] {
    const timespec poll{0, 100 * 1000 * 1000};
    int sig = -1;
    while (!finished && sig < 0) sig = sigtimedwait(&sigs, nullptr, &poll);
    if (finished) return;
    std::fprintf(stderr, "[server] signal %d: draining in-flight requests (at most %.0f s)\n", sig, s.sp.drain_timeout_s);
    s.draining = true;
    s.engine->drain();
    http.stop();  // closes the listener; listen_after_bind() returns when every handler is done
    const auto deadline = Clock::now() + std::chrono::duration<double>(s.sp.drain_timeout_s);
    const auto force_exit_at = deadline + std::chrono::seconds(10);
    bool cancelled = false;
    while (!finished) {
      const int again = sigtimedwait(&sigs, nullptr, &poll);
      if (again > 0) {
        std::fprintf(stderr, "[server] signal %d again: exiting now\n", again);
        std::fflush(stderr);
        std::_Exit(128 + again);
      }
      if (!cancelled && Clock::now() > deadline && !s.engine->wait_idle(std::chrono::milliseconds(0))) {
        std::fprintf(stderr, "[server] drain timeout: ending the requests still running\n");
        s.engine->cancel_all(fmt::format("the server is shutting down (drain timeout of {} s passed)", s.sp.drain_timeout_s));
        cancelled = true;
      }
      if (Clock::now() > force_exit_at) {  // a connection that never drains (a client not reading)
        std::fprintf(stderr, "[server] connections still open 10 s after the drain timeout: exiting\n");
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  });
  std::fprintf(stderr, "[server] tool calls: %s syntax%s\n", toolcall::syntax_name(s.template_tools.syntax),
               s.template_tools.syntax == toolcall::Syntax::kGeneric ? " (the template has no tool support: tools are described in a system message)" : "");
  std::fprintf(stderr, "[server] %s: %d slots x %d ctx, listening on http://%s:%d\n", s.sp.alias.c_str(), ep.n_slots,
               s.engine->n_ctx_slot(), s.sp.host.c_str(), s.sp.port);
  std::fflush(stderr);
  http.listen_after_bind();
  s.draining = true;
  s.engine->wait_idle(std::chrono::milliseconds(100));
  s.engine->cancel_all("the server is shutting down");
  s.engine->wait_idle(std::chrono::seconds(10));
  finished = true;
  sig_thread.join();
  std::fprintf(stderr, "[server] stopped\n");
  return 0;
}

}  // namespace minfer::server
