#include "server/model-pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "runtime/kv-file.h"

namespace minfer::server {

std::string ModelPool::Entry::status() const {
  const ServerState* s = state();
  if (s && !s->sleep->sleeping()) return "loaded";
  return pending_.load() > 0 ? "loading" : "unloaded";
}

ModelPool::ModelPool(const PoolParams& pp, ServerState& front) : pp_(pp), front_(front) {
  for (const PoolModel& m : pp_.models) {
    auto file = GgufFile::open(m.path);
    if (!file) {
      std::fprintf(stderr, "[server] warning: %s left out: %s\n", m.names.front().c_str(), file.error().message.c_str());
      continue;
    }
    Entry& e = entries_.emplace_back();
    e.info_ = m;
    e.bytes_ = file->total_file_size();
    std::string ollama_name = m.names.front();  // Ollama's clients know its models without the prefix
    if (ollama_name.starts_with("ollama:")) ollama_name.erase(0, 7);
    e.tags_ = ollama_model_entry(*file, ollama_name, model_identity(*file));
  }
}

ModelPool::Entry* ModelPool::find(const std::string& name) {
  auto plain = [](std::string n) {
    if (n.ends_with(":latest")) n.resize(n.size() - 7);
    return n;
  };
  for (Entry& e : entries_)
    for (const std::string& n : e.info_.names)
      if (n == name || plain(n) == plain(name)) return &e;
  return nullptr;
}

bool ModelPool::loaded(const Entry& e) const {
  if (e.pending_.load() > 0) return true;  // loading, or about to hold it
  const ServerState* s = e.state();
  return s && !s->sleep->sleeping();
}

uint64_t ModelPool::loaded_bytes(const Entry* but) const {
  uint64_t n = 0;
  for (const Entry& o : entries_)
    if (&o != but && loaded(o)) n += o.bytes_.load();
  return n;
}

std::string ModelPool::limits() const {
  std::string s;
  if (pp_.models_max > 0) s = fmt::format("--models-max {}", pp_.models_max);
  if (pp_.models_memory > 0) s += fmt::format("{}--models-memory {:.2f} GiB", s.empty() ? "" : ", ", pp_.models_memory / 1073741824.0);
  return s;
}

bool ModelPool::fits(const Entry& e, std::string& why) const {
  int n_loaded = 0;
  for (const Entry& o : entries_) n_loaded += loaded(o) ? 1 : 0;
  if (pp_.models_max > 0 && n_loaded >= pp_.models_max) {
    why = fmt::format("the {} models of --models-max {} are loaded", n_loaded, pp_.models_max);
    return false;
  }
  const uint64_t used = loaded_bytes(&e);
  if (pp_.models_memory > 0 && n_loaded > 0 && used + e.bytes_.load() > pp_.models_memory) {
    why = fmt::format("it needs {:.1f} MiB and the {} loaded models hold {:.1f} MiB of --models-memory {:.1f} MiB",
                      e.bytes_.load() / 1048576.0, n_loaded, used / 1048576.0, pp_.models_memory / 1048576.0);
    return false;
  }
  return true;
}

bool ModelPool::evict_one(const Entry& keep) {
  std::vector<Entry*> idle;
  for (Entry& e : entries_)
    if (&e != &keep && e.pending_.load() == 0 && loaded(e)) idle.push_back(&e);
  std::sort(idle.begin(), idle.end(), [](const Entry* a, const Entry* b) { return a->last_used_ < b->last_used_; });
  for (Entry* e : idle)
    if (e->state()->sleep->unload()) {
      std::fprintf(stderr, "[server] %s evicted (least recently used; %s)\n", e->info_.names.front().c_str(), limits().c_str());
      std::fflush(stderr);
      return true;
    }
  return false;
}

std::optional<std::string> ModelPool::acquire(Entry& e, std::optional<double> keep_alive_s) {
  ++e.acquiring_;
  struct Done {
    std::atomic<int>& n;
    ~Done() { --n; }
  } done{e.acquiring_};
  {
    std::unique_lock<std::mutex> lk(mu_);
    const auto deadline = Clock::now() + std::chrono::seconds(front_.sp.timeout_s);
    for (;;) {
      if (stopped_) return std::string("the server is shutting down");
      std::string why;
      if (loaded(e) || fits(e, why)) break;
      if (evict_one(e)) continue;  // memory may take more than one
      if (Clock::now() > deadline)
        return fmt::format("model '{}' cannot be loaded: {}, and each has a request running", e.info_.names.front(), why);
      cv_.wait_for(lk, std::chrono::milliseconds(100));
    }
    ++e.pending_;  // counts as loaded from here: no other request takes its place
    e.last_used_ = Clock::now();
  }
  std::optional<std::string> err;
  {
    std::lock_guard<std::mutex> lk(e.init_mu_);
    if (!e.state_) err = make_state(e);
  }
  if (!err) err = e.state_->sleep->acquire(keep_alive_s);  // loads it when asleep: outside mu_
  {
    std::lock_guard<std::mutex> lk(mu_);
    --e.pending_;
    // Its first load told its KV cache: more may have to go.
    if (!err && pp_.models_memory > 0)
      while (loaded_bytes(nullptr) > pp_.models_memory && evict_one(e)) {
      }
  }
  cv_.notify_all();
  return err;
}

void ModelPool::release(Entry& e) {
  e.state()->sleep->release();
  {
    std::lock_guard<std::mutex> lk(mu_);
    e.last_used_ = Clock::now();
  }
  cv_.notify_all();  // an acquire waiting for a place may evict it now
}

bool ModelPool::unload(Entry& e) {
  std::unique_lock<std::mutex> lk(mu_);
  // A reply's last byte reaches its client before its handler releases the model: a request
  // just answered gets that moment to let go.
  const auto until = Clock::now() + std::chrono::seconds(1);
  for (;;) {
    ServerState* s = e.state();
    if (e.pending_.load() == 0 && (!s || s->sleep->unload())) return true;
    if (Clock::now() > until) return false;
    cv_.wait_for(lk, std::chrono::milliseconds(20));
  }
}

void ModelPool::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  for_each_state([](ServerState& s) { s.sleep->stop(); });
}

void ModelPool::for_each_state(const std::function<void(ServerState&)>& f) {
  for (Entry& e : entries_)
    if (ServerState* s = e.state()) f(*s);
}

std::optional<std::string> ModelPool::make_state(Entry& e) {
  const std::string& id = e.info_.names.front();
  const auto t0 = Clock::now();
  Expected<LoadedModel> lm = make_error("unreached");
  {
    std::lock_guard<std::mutex> lk(load_mu_);
    lm = pp_.load(e.info_.path);
  }
  if (!lm) return fmt::format("loading model '{}' failed: {}", id, lm.error().message);
  e.tok_ = std::move(lm->tok);
  auto s = std::make_unique<ServerState>();
  ServerParams sp = lm->sp;
  sp.aliases = e.info_.names;
  if (auto err = init_state(*s, std::move(lm->model), *e.tok_, lm->ep, sp, {})) return fmt::format("model '{}': {}", id, *err);
  s->model_id = id;
  s->draining = front_.draining.load();
  e.routes_ = std::make_unique<httplib::Server>();
  add_model_routes(*e.routes_, *s);
  s->sleep = std::make_unique<ModelSleep>(*s, pp_.keep_alive_s, lm->ep, EngineDraft{}, /*pooled=*/true);
  e.bytes_ = e.bytes_.load() + s->engine->context().kv_bytes();
  std::fprintf(stderr, "[server] %s: loaded in %.2f s (%d slots x %d ctx, %.1f MiB with its KV cache)\n", id.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count(), s->n_slots, s->n_ctx_slot, e.bytes_.load() / 1048576.0);
  if (pp_.models_memory > 0 && e.bytes_.load() > pp_.models_memory)
    std::fprintf(stderr, "[server] warning: %s alone needs more than --models-memory (%.1f MiB): it is loaded only while no other model is\n",
                 id.c_str(), pp_.models_memory / 1048576.0);
  std::fflush(stderr);
  e.state_ = std::move(s);
  e.ready_ = e.state_.get();
  return std::nullopt;
}

}  // namespace minfer::server
