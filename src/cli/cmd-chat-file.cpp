#include "cli/cmd-chat-file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/atomic-file.h"

namespace minfer::cli {

Status write_session(const std::string& path, const std::string& model_name, const ModelIdentity& id, const Session& s,
                     const SessionHistory& history, const std::vector<int32_t>& tokens, const std::string& text) {
  MINFER_TRY(write_kv_file(path + ".kv", id, s.context(), 0, tokens, text));
  nlohmann::ordered_json j = {{"format", "minfer-chat-session"}, {"version", 1}, {"model", model_name},
                              {"kv_type", kv_type_name(s.params().kv_type)},  // for the reader; FILE.kv's header decides
                              {"messages", history.messages}, {"n_archived", history.n_archived}};
  return write_file_atomic(path, j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
}

Expected<SessionHistory> read_session_history(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return make_error("'{}' is a directory", path);
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot read '{}': {}", path, std::strerror(errno));
  const std::string s{std::istreambuf_iterator<char>(f), {}};
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("'{}' is not valid JSON", path);
  if (!j.is_object() || j.value("format", "") != "minfer-chat-session" || !j.contains("messages") ||
      !j["messages"].is_array())
    return make_error("'{}' is not a minfer chat session (no \"format\": \"minfer-chat-session\" with \"messages\")", path);
  for (const auto& m : j["messages"])
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      return make_error("'{}': every message needs string \"role\" and \"content\"", path);
  SessionHistory h;
  h.messages = j["messages"];
  if (j.contains("n_archived")) {
    if (!j["n_archived"].is_number_integer() || j["n_archived"].get<int64_t>() < 0 ||
        j["n_archived"].get<int64_t>() > static_cast<int64_t>(h.messages.size()))
      return make_error("'{}': \"n_archived\" must be a count of its {} messages", path, h.messages.size());
    h.n_archived = j["n_archived"].get<int>();
  }
  return h;
}

}  // namespace minfer::cli
