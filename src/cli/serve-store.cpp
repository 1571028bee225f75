#include "cli/serve-store.h"

#include "hub/hf-hub.h"
#include "hub/ollama.h"

namespace minfer::cli {

std::string hub_ref(const std::string& name) {
  if (name.starts_with("hf:") || name.starts_with("ollama:")) return name;
  for (const char* host : {"hf.co/", "huggingface.co/"})
    if (name.starts_with(host)) return "hf:" + name.substr(std::string(host).size());
  return "ollama:" + name;
}

server::PoolModel pool_model(const hub::ListedModel& l) {
  server::PoolModel m{{l.name}, l.path};
  for (const char* prefix : {"ollama:", "hf:"})
    if (l.name.starts_with(prefix)) m.names.push_back(l.name.substr(std::string(prefix).size()));
  if (l.name.starts_with("hf:")) m.names.push_back("hf.co/" + l.name.substr(3));  // as Ollama names it
  return m;
}

namespace {

// `ref` as `minfer list` writes it (ollama: with its namespace and tag); "" when that is not known.
std::string list_name_of(const std::string& ref) {
  if (!ref.starts_with("ollama:")) return ref;
  auto n = hub::parse_ollama_name(ref);
  return n ? n->text() : "";
}

// The listed model `ref` became: by its listed name, else by its file.
server::PoolModel listed_model(const std::string& ref, const std::string& path) {
  const std::vector<hub::ListedModel> all = hub::list_models();
  const std::string name = list_name_of(ref);
  for (const hub::ListedModel& l : all)
    if (l.name == name) return pool_model(l);
  for (const hub::ListedModel& l : all)
    if (l.path == path) return pool_model(l);
  return {{ref}, path};  // not listed: a file minfer only reads
}

Expected<server::PoolModel> store_pull(const std::string& name, const server::ModelStore::Progress& progress) {
  const std::string ref = hub_ref(name);
  bool stopped = false;  // the client went away
  hub::PullEvents ev;
  ev.status = [&](const std::string& s) { stopped = stopped || !progress(s, "", 0, 0); };
  ev.bytes = [&](const std::string& digest, int64_t total, int64_t done) {
    stopped = stopped || !progress("", digest, total, done);
    return !stopped;
  };
  auto r = hub::resolve_model_ref(ref, /*allow_network=*/true, &ev);
  if (!r) return r.error();
  if (stopped) return make_error("pulling {}: stopped, the client went away", ref);
  return listed_model(ref, r->path);
}

Expected<server::PoolModel> store_copy(const server::PoolModel& source, const std::string& destination) {
  const std::string ref = hub_ref(destination);
  if (!ref.starts_with("ollama:"))
    return make_error("destination '{}': a copy is an Ollama name (MODEL[:TAG]) in minfer's Ollama store", destination);
  auto n = hub::parse_ollama_name(ref);
  if (!n) return n.error();
  auto m = hub::ollama_copy(source.path, *n);
  if (!m) return m.error();
  return server::PoolModel{{n->text(), n->text().substr(7)}, m->path};
}

std::optional<std::string> store_check_name(const std::string& name) {
  const std::string ref = hub_ref(name);
  if (ref.starts_with("hf:")) {
    if (auto n = hub::parse_hf_name(ref); !n) return n.error().message;
    return std::nullopt;
  }
  if (auto n = hub::parse_ollama_name(ref); !n) return n.error().message;
  return std::nullopt;
}

}  // namespace

server::ModelStore hub_model_store() {
  server::ModelStore s;
  s.pull = store_pull;
  s.copy = store_copy;
  s.check_name = store_check_name;
  s.remove = [](const server::PoolModel& m) -> Status {
    // Only what minfer's stores list under that name with that file: a --models-dir file (or a
    // path given to serve) is one minfer only reads, and its stem may name another cached model.
    bool listed = false;
    for (const hub::ListedModel& l : hub::list_models()) listed = listed || (l.name == m.names.front() && l.path == m.path);
    if (!listed)
      return make_error("model '{}' ({}) is a file this server only reads (--models-dir or a path given to serve): delete it there", m.names.front(), m.path);
    auto r = hub::remove_model(m.names.front());
    if (!r) return r.error();
    return Status::ok();
  };
  return s;
}

}  // namespace minfer::cli
