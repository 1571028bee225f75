// Embeddings: POST /v1/embeddings (OpenAI's shape), /embeddings and /embedding (llama-server's);
// the inputs dealt over the slots' jobs (ServerState::embed; api-embeddings.h, docs/server-api.md#embeddings).
#include <algorithm>

#include "server/api-embeddings.h"
#include "server/server-state.h"

namespace minfer::server {
namespace {

void embeddings(ServerState& s, const httplib::Request& req, httplib::Response& res, bool oai) {
  auto body = s.parse_body(req, res);
  if (!body) return;
  s.embed(*body, res, oai, error_json,
          [&s](const EmbeddingRequest& r, std::vector<DoneEvent::Embedding>& out) { return embeddings_json(r, out, s.model_id); });
}

}  // namespace

void ServerState::embed(const json& body, httplib::Response& res, bool oai, ErrorShape shape,
                        std::function<json(const EmbeddingRequest& r, std::vector<DoneEvent::Embedding>& out)> reply) {
  const auto t0 = Clock::now();
  if (!sp.embeddings_refusal.empty()) return reply_error(res, invalid_param("", sp.embeddings_refusal), shape);
  auto parsed = parse_embedding_request(body, oai, *tok, engine->n_ctx_slot(), sp.pooling);
  if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(res, *e, shape);
  auto r = std::make_shared<EmbeddingRequest>(std::move(std::get<EmbeddingRequest>(parsed)));
  // The inputs dealt over at most one job per slot (in turn), so a request of any size takes a
  // bounded room in the queue and the slots share its work.
  const int n = static_cast<int>(r->inputs.size());
  const int n_jobs = std::min(n, engine->params().n_slots);
  auto ch = std::make_shared<EventChannel>(n_jobs);
  std::vector<Job> jobs(static_cast<size_t>(n_jobs));
  for (int j = 0; j < n_jobs; ++j) {
    Job& job = jobs[static_cast<size_t>(j)];
    job.embed = Job::Embed{.pooling = sp.pooling, .normalize = r->normalize, .inputs = {}};
    job.cache_prompt = false;
    job.index = j;
    job.deadline = Clock::now() + std::chrono::seconds(sp.timeout_s);
    job.channel = ch;
  }
  for (int i = 0; i < n; ++i)
    jobs[static_cast<size_t>(i % n_jobs)].embed->inputs.push_back({i, std::move(r->inputs[static_cast<size_t>(i)].ids)});
  if (!queue(std::move(jobs), res, shape)) return;
  reply_when_done(res, ch, t0, [r, n, shape, reply = std::move(reply)](std::vector<JobEvent>& events) {
    std::vector<DoneEvent::Embedding> out(static_cast<size_t>(n));
    for (JobEvent& ev : events) {
      if (const auto* e = ev.as<ErrorEvent>()) return dump(shape(server_error(e->message)));
      if (auto* done = ev.as<DoneEvent>())
        for (DoneEvent::Embedding& e : done->embeddings) out[static_cast<size_t>(e.input)] = std::move(e);
    }
    return dump(reply(*r, out));
  });
}

void add_embedding_routes(httplib::Server& http, ServerState& s) {
  s.post(http, "/v1/embeddings", [&s](const httplib::Request& q, httplib::Response& r) { embeddings(s, q, r, true); });
  s.post(http, "/embeddings", [&s](const httplib::Request& q, httplib::Response& r) { embeddings(s, q, r, false); });
  s.post(http, "/embedding", [&s](const httplib::Request& q, httplib::Response& r) { embeddings(s, q, r, false); });
}

}  // namespace minfer::server
