// Ollama's routes that belong to the server, not to one model (docs/server-api.md#ollama-api):
// GET /api/version, and the model store of a pool: POST /api/pull (the hub's download, its
// progress streamed as Ollama's NDJSON lines), DELETE /api/delete, POST /api/copy. Replies and
// errors are Ollama's: {"status": "success"} or an empty 200, {"error": "..."} with its status.
#include <map>

#include "server/api-ollama.h"
#include "server/model-pool.h"
#include "server/server-state.h"

namespace minfer::server {
namespace {

// The name a request gives in `key` ("model", else Ollama's older "name"); "" when none.
std::string ollama_name_in(const json& body, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (body.is_object() && body.contains(k) && body[k].is_string() && !body[k].get<std::string>().empty()) return body[k].get<std::string>();
  return "";
}

ApiError ollama_not_found(std::string message) { return {404, std::move(message), "not_found_error", "", ""}; }

// What a pull sends, as Ollama's: {"status"} for a step; {"status": "pulling <12 hex>", "digest",
// "total", "completed"} for a file's bytes, at most every 100 ms per file but always its last.
class PullLines {
 public:
  explicit PullLines(std::function<bool(const json&)> send) : send_(std::move(send)) {}
  bool operator()(const std::string& status, const std::string& digest, int64_t total, int64_t completed) {
    if (digest.empty()) {
      said_manifest_ = said_manifest_ || status == "pulling manifest";
      return send_({{"status", status}});
    }
    const auto now = Clock::now();
    auto [at, first] = last_.try_emplace(digest, now);
    if (!first && completed < total && now - at->second < std::chrono::milliseconds(100)) return true;
    at->second = now;
    const std::string hex = digest.substr(digest.find(':') + 1);
    return send_({{"status", "pulling " + hex.substr(0, 12)}, {"digest", digest}, {"total", std::max<int64_t>(total, 0)},
                  {"completed", completed}});
  }
  bool said_manifest() const { return said_manifest_; }

 private:
  std::function<bool(const json&)> send_;
  std::map<std::string, Clock::time_point> last_;
  bool said_manifest_ = false;
};

// Downloads `name` and adds it to the pool; the error says why not.
std::optional<std::string> pull_into(ModelPool& pool, const ModelStore& store, const std::string& name, const ModelStore::Progress& progress) {
  auto m = store.pull(name, progress);
  if (!m) return m.error().message;
  m->names.push_back(name);  // as the client will call it (hf.co/ORG/REPO without its quant, a lower-case tag ...)
  if (auto e = pool.add(*m); !e) return e.error().message;
  return std::nullopt;
}

// POST /api/pull {"model", "stream"}: NDJSON progress lines ending in {"status": "success"}, or
// an {"error"} line; "stream": false answers the last object (an error: 500, as Ollama).
void pull_route(ModelPool& pool, ServerState& front, const ModelStore& store, const httplib::Request& req, httplib::Response& res) {
  auto body = front.parse_body(req, res, ollama_error_json);
  if (!body) return;
  const std::string name = ollama_name_in(*body, {"model", "name"});
  if (name.empty()) return front.reply_error(res, invalid_param("model", "model is required"), ollama_error_json);
  if (auto why = store.check_name(name)) return front.reply_error(res, invalid_param("model", *why), ollama_error_json);
  const auto stream = body->find("stream");
  if (stream != body->end() && !stream->is_null() && !stream->is_boolean())
    return front.reply_error(res, invalid_param("stream", "'stream' must be a boolean"), ollama_error_json);
  if (stream != body->end() && stream->is_boolean() && !stream->get<bool>()) {
    if (auto err = pull_into(pool, store, name, [](const std::string&, const std::string&, int64_t, int64_t) { return true; }))
      return front.reply_error(res, server_error(*err), ollama_error_json);
    return front.reply_json(res, {{"status", "success"}});
  }
  res.set_chunked_content_provider("application/x-ndjson", [&pool, &store, name](size_t, httplib::DataSink& sink) {
    auto send = [&sink](const json& j) {
      const std::string line = dump(j) + "\n";
      return sink.write(line.data(), line.size());
    };
    PullLines lines(send);
    const auto err = pull_into(pool, store, name, std::ref(lines));
    if (err) {
      send({{"error", *err}});
    } else {
      if (!lines.said_manifest()) send({{"status", "pulling manifest"}});  // a model already cached
      send({{"status", "success"}});
    }
    sink.done();
    return true;
  });
}

// DELETE /api/delete {"model"}: its files (as `minfer rm`), and its place in the pool; a loaded
// model is unloaded now, or after the requests that hold it (Ollama lets them finish too).
void delete_route(ModelPool& pool, ServerState& front, const ModelStore& store, const httplib::Request& req, httplib::Response& res) {
  auto body = front.parse_body(req, res, ollama_error_json);
  if (!body) return;
  const std::string name = ollama_name_in(*body, {"model", "name"});
  if (name.empty()) return front.reply_error(res, invalid_param("model", "model is required"), ollama_error_json);
  ModelPool::Entry* e = pool.find(name);
  if (!e) return front.reply_error(res, ollama_not_found(fmt::format("model '{}' not found", name)), ollama_error_json);
  if (Status st = store.remove(e->info()); !st.is_ok())
    return front.reply_error(res, invalid_param("model", st.error().message), ollama_error_json);  // 400: not one of minfer's to delete
  pool.remove(*e);
  res.status = 200;
}

// POST /api/copy {"source", "destination"}: the destination names the source's file from now on
// (a manifest in minfer's Ollama store); an empty 200.
void copy_route(ModelPool& pool, ServerState& front, const ModelStore& store, const httplib::Request& req, httplib::Response& res) {
  auto body = front.parse_body(req, res, ollama_error_json);
  if (!body) return;
  const std::string source = ollama_name_in(*body, {"source"}), destination = ollama_name_in(*body, {"destination"});
  if (source.empty() || destination.empty())
    return front.reply_error(res, invalid_param("source", "source and destination are required"), ollama_error_json);
  ModelPool::Entry* src = pool.find(source);
  if (!src) return front.reply_error(res, ollama_not_found(fmt::format("model \"{}\" not found", source)), ollama_error_json);
  if (store.check_name(destination))
    return front.reply_error(res, invalid_param("destination", fmt::format("destination \"{}\" is invalid", destination)), ollama_error_json);
  if (pool.find(destination) == src) return void(res.status = 200);  // already its name
  auto m = store.copy(src->info(), destination);
  if (!m) return front.reply_error(res, server_error(m.error().message), ollama_error_json);
  // The name now means the copy, as in Ollama: by each spelling of it ("library/b" is "b").
  for (const std::string& n : m->names)
    if (ModelPool::Entry* old = pool.find(n); old && old != src && old->info().path != m->path) pool.remove(*old);
  if (auto e = pool.add(*m); !e) return front.reply_error(res, server_error(e.error().message), ollama_error_json);
  res.status = 200;
}

}  // namespace

void add_ollama_server_routes(httplib::Server& http, ServerState& front, ModelPool* pool, const ModelStore* store) {
  http.Get("/api/version", [&front](const httplib::Request&, httplib::Response& r) { front.reply_json(r, {{"version", kOllamaApiVersion}}); });
  auto route = [&front, pool, store](auto handler) {
    return [&front, pool, store, handler](const httplib::Request& q, httplib::Response& r) {
      if (!pool || !store || !store->pull || !store->remove || !store->copy || !store->check_name)
        return front.reply_error(r, {501, fmt::format("{} needs a server of several models: minfer serve with no MODEL", q.path), "not_supported_error", "", ""},
                                 ollama_error_json);
      handler(*pool, front, *store, q, r);
    };
  };
  http.Post("/api/pull", route(pull_route));
  http.Post("/api/copy", route(copy_route));
  http.Delete("/api/delete", route(delete_route));
}

}  // namespace minfer::server
