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

namespace {

// The /api/tags entry of a model file, named as Ollama names it: without "ollama:", and a
// Hugging Face model as "hf.co/ORG/REPO:QUANT".
Expected<json> tags_of(const PoolModel& m) {
  auto file = GgufFile::open(m.path);
  if (!file) return file.error();
  std::string ollama_name = m.names.front();
  if (ollama_name.starts_with("ollama:")) ollama_name.erase(0, 7);
  if (ollama_name.starts_with("hf:")) ollama_name = "hf.co/" + ollama_name.substr(3);
  return ollama_model_entry(*file, ollama_name, model_identity(*file));
}

bool same_name(std::string a, std::string b) {
  for (std::string* n : {&a, &b})
    if (n->ends_with(":latest")) n->resize(n->size() - 7);
  return a == b;
}

}  // namespace

ModelPool::ModelPool(const PoolParams& pp, ServerState& front) : pp_(pp), front_(front) {
  for (const PoolModel& m : pp_.models) {
    auto tags = tags_of(m);
    if (!tags) {
      std::fprintf(stderr, "[server] warning: %s left out: %s\n", m.names.front().c_str(), tags.error().message.c_str());
      continue;
    }
    Entry& e = entries_.emplace_back();
    e.info_ = m;
    e.file_bytes_ = e.bytes_ = (*tags)["size"].get<uint64_t>();  // the GGUF files' size
    e.tags_ = std::move(*tags);
  }
}

std::vector<ModelPool::Entry*> ModelPool::entries() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Entry*> out;
  for (Entry& e : entries_)
    if (!e.removed_) out.push_back(&e);
  return out;
}

Expected<ModelPool::Entry*> ModelPool::add(const PoolModel& m) {
  // An entry of that file under one of the names: the others become its aliases (a pull of
  // "hf.co/ORG/REPO" that the hub listed as hf:ORG/REPO:QUANT answers to what the client said).
  auto known = [&]() -> Entry* {
    for (const std::string& n : m.names)
      if (Entry* e = find_locked(n)) {
        if (e->info_.path == m.path)
          for (const std::string& a : m.names)
            if (!find_locked(a)) e->aliases_.push_back(a);
        return e;
      }
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (Entry* e = known()) return e;
  }
  auto tags = tags_of(m);  // outside the lock: it reads the file
  if (!tags) return make_error("model '{}' ({}): {}", m.names.front(), m.path, tags.error().message);
  std::lock_guard<std::mutex> lk(mu_);
  if (Entry* e = known()) return e;  // added meanwhile by another request
  Entry& e = entries_.emplace_back();
  e.info_ = m;
  e.file_bytes_ = e.bytes_ = (*tags)["size"].get<uint64_t>();
  e.tags_ = std::move(*tags);
  return &e;
}

void ModelPool::remove(Entry& e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    e.removed_ = true;
  }
  unload(e);  // false: a request holds it; release() unloads it after the last one
}

ModelPool::Entry* ModelPool::find(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  return find_locked(name);
}

ModelPool::Entry* ModelPool::find_locked(const std::string& name) {
  for (Entry& e : entries_)
    if (!e.removed_) {
      for (const std::string& n : e.info_.names)
        if (same_name(n, name)) return &e;
      for (const std::string& n : e.aliases_)
        if (same_name(n, name)) return &e;
    }
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

std::optional<std::string> ModelPool::acquire(Entry& e, std::optional<double> keep_alive_s, std::optional<int> n_ctx_slot) {
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
    if (!e.state_) err = make_state(e, n_ctx_slot);
  }
  if (!err) err = e.state_->sleep->acquire(keep_alive_s, n_ctx_slot);  // loads it when asleep: outside mu_
  // Held now: its engine stays. A num_ctx reload may have changed its cache.
  if (!err) e.bytes_ = e.file_bytes_ + e.state_->engine->context().kv_bytes();
  {
    std::lock_guard<std::mutex> lk(mu_);
    --e.pending_;
    // Its load told its KV cache: more may have to go.
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
  if (e.removed_) unload(e);  // deleted while this request ran: the last one unloads it
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
  std::vector<ServerState*> states;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (Entry& e : entries_)
      if (ServerState* s = e.state()) states.push_back(s);
  }
  for (ServerState* s : states) f(*s);
}

std::optional<std::string> ModelPool::make_state(Entry& e, std::optional<int> n_ctx_slot) {
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
  EngineParams ep = lm->ep;  // Ollama's num_ctx for this load; lm->ep stays the default of later ones
  if (const int64_t n_train = lm->model->hparams().n_ctx_train; n_ctx_slot && *n_ctx_slot > 0)
    ep.n_ctx_slot = static_cast<int>(n_train > 0 ? std::min<int64_t>(*n_ctx_slot, n_train) : *n_ctx_slot);
  if (auto err = init_state(*s, std::move(lm->model), *e.tok_, ep, sp, {})) return fmt::format("model '{}': {}", id, *err);
  s->model_id = id;
  s->pooled = true;
  s->draining = front_.draining.load();
  e.routes_ = std::make_unique<httplib::Server>();
  add_model_routes(*e.routes_, *s);
  s->sleep = std::make_unique<ModelSleep>(*s, pp_.keep_alive_s, lm->ep, EngineDraft{}, /*pooled=*/true);
  e.bytes_ = e.file_bytes_ + s->engine->context().kv_bytes();
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
