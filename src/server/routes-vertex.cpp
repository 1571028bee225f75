// Vertex AI's prediction protocol (a custom container behind a Vertex endpoint; serve turns it
// on from AIP_MODE=PREDICTION): POST {"instances": [{"@requestFormat": "chatCompletions", ...},
// ...]} -> {"predictions": [reply, ...]}, each instance run through one of the server's POST
// routes, named by its path or by the camelCase form of it ("/v1/chat/completions" ->
// "chatCompletions", "/apply-template" -> "applyTemplate") (docs/server-api.md#vertex-ai-predict).
#include <future>

#include "server/server-state.h"

namespace minfer::server {
namespace {

constexpr size_t kMaxInstances = 128;  // llama-server's limit

// "/v1/chat/completions" -> "chatCompletions": without "/v1", each '/', '-' or '_' capitalizes
// the next letter.
std::string camel_case_route(std::string_view path) {
  if (path.starts_with("/v1/")) path.remove_prefix(3);
  if (path.starts_with("/")) path.remove_prefix(1);
  std::string out;
  bool upper = false;
  for (char c : path) {
    if (c == '/' || c == '-' || c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

// The whole body of a reply: set, or written by its content provider (a non-streamed reply past
// its first second is chunked).
std::string whole_body(httplib::Response& res) {
  if (!res.content_provider_) return res.body;
  std::string out;
  bool done = false;
  httplib::DataSink sink;
  sink.write = [&](const char* d, size_t n) {
    out.append(d, n);
    return true;
  };
  sink.is_writable = [] { return true; };
  sink.done = [&] { done = true; };
  while (!done && res.content_provider_(out.size(), 0, sink)) {
  }
  res.content_provider_success_ = done;
  return out;
}

json instance_error(const std::string& message, int status = 400) {
  return error_json({status, message, status >= 500 ? "server_error" : "invalid_request_error", "", ""});
}

}  // namespace

void add_vertex_routes(httplib::Server& http, ServerState& s) {
  if (s.sp.vertex_predict_route.empty()) return;
  // camelCase name -> path; the first in sorted order wins ("completions": /completions).
  auto names = std::make_shared<std::map<std::string, std::string>>();
  for (const auto& [path, handler] : s.post_routes) names->emplace(camel_case_route(path), path);
  s.post(http, s.sp.vertex_predict_route, [&s, names](const httplib::Request& req, httplib::Response& res) {
    auto body = s.parse_body(req, res);
    if (!body) return;
    if (!body->is_object() || !body->contains("instances") || !(*body)["instances"].is_array())
      return s.reply_error(res, invalid_param("instances", "the request body must be an object with an array 'instances'"));
    const json& instances = (*body)["instances"];
    if (instances.size() > kMaxInstances)
      return s.reply_error(res, invalid_param("instances", fmt::format("'instances' has {} items, more than the limit of {}",
                                                                         instances.size(), kMaxInstances)));
    // Instances run at once (a completion each waits for its slot), each as a request of its own.
    std::vector<std::future<json>> replies;
    for (size_t i = 0; i < instances.size(); ++i) {
      replies.push_back(std::async(std::launch::async, [&s, &req, names, inst = instances[i], i]() -> json {
        const std::string at = fmt::format("instances[{}]", i);
        if (!inst.is_object() || !inst.contains("@requestFormat") || !inst["@requestFormat"].is_string())
          return instance_error(fmt::format("'{}' must be an object with a string '@requestFormat'", at));
        const std::string format = inst["@requestFormat"].get<std::string>();
        auto named = names->find(format);
        const std::string path = named != names->end() ? named->second : format;
        auto route = s.post_routes.find(path);
        if (route == s.post_routes.end() || path == s.sp.vertex_predict_route)
          return instance_error(fmt::format("'{}.@requestFormat' '{}' names no route (e.g. chatCompletions, completions, embeddings)",
                                            at, format));
        json payload = inst;
        payload.erase("@requestFormat");
        if (payload.contains("stream")) payload["stream"] = false;  // one reply per instance
        httplib::Request sub;
        sub.method = "POST";
        sub.path = path;
        sub.headers = req.headers;
        sub.body = dump(payload);
        httplib::Response out;
        try {
          route->second(sub, out);
        } catch (const std::exception& e) {
          return instance_error(e.what(), 500);
        }
        const std::string text = whole_body(out);
        json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
        return j.is_discarded() ? json(text) : j;
      }));
    }
    json predictions = json::array();
    for (auto& r : replies) predictions.push_back(r.get());
    s.reply_json(res, {{"predictions", std::move(predictions)}});
  });
}

}  // namespace minfer::server
