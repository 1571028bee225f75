#include "runtime/context.h"

#include <algorithm>
#include <bit>
#include <map>

#include "backends/registry/registry.h"
#include "core/thread-pool.h"
#include "graph/scheduler.h"
#include "models/model.h"
#include "runtime/placement.h"

namespace minfer {

bool kv_type_supported(DType t) {
  return t == DType::F16 || t == DType::F32 || t == DType::Q8_0 || t == DType::Q4_0;
}

std::string_view kv_type_name(DType t) {
  switch (t) {
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    default: return dtype_name(t);
  }
}

size_t kv_row_bytes(DType t, int64_t n_embd) { return row_bytes(t, n_embd); }

namespace {

// A prepared graph and the ids of the nodes the host fills or reads.
struct GraphEntry {
  std::unique_ptr<PreparedGraph> pg;
  int tokens = -1, pos = -1, out_ids = -1, kv_rows = -1, kv_ranges = -1, logits = -1;  // forward
  int kv_rows_swa = -1, kv_ranges_swa = -1;                                          // rings
  int src = -1, dst = -1, shift = -1;                                                // KV move
  uint64_t last_use = 0;
};

// Least recently used graphs are evicted past `max` (speculative decoding alone cycles through a
// shape per draft length, up to 63, and a server's batches through more).
template <class Key>
struct GraphCache {
  std::map<Key, GraphEntry> entries;
  uint64_t clock = 0;
  size_t max = 32;
  GraphEntry* find(const Key& k) {
    auto it = entries.find(k);
    if (it == entries.end()) return nullptr;
    it->second.last_use = ++clock;
    return &it->second;
  }
  GraphEntry& insert(const Key& k, GraphEntry e) {
    if (entries.size() >= max) {
      auto lru = std::min_element(entries.begin(), entries.end(),
                                  [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
      entries.erase(lru);
    }
    e.last_use = ++clock;
    return entries.emplace(k, std::move(e)).first->second;
  }
};

}  // namespace

struct Context::Impl {
  std::vector<std::unique_ptr<Backend>> backends;  // the offload devices (in order), then the host's
  std::vector<std::string> device_names;           // [n_devices] list_devices() names
  LayerPlacement placement;
  // SchedulerOptions::allow: a device runs the nodes of the layers placed on it; the host any.
  std::function<bool(const Node&, int)> allow;
  std::unique_ptr<Scheduler> sched;
  GraphCache<std::tuple<int, int, bool>> forward;     // by (n_tokens, n_out, embeddings)
  GraphCache<std::tuple<int, bool, KvLayers>> moves;  // by (n_rows, rotate, layers)
  std::vector<int32_t> b_rows, b_ranges, b_out, b_rows_swa, b_ranges_swa;
  std::vector<int> len, rows_of;  // decode(): [n_seq] lengths after the batch, its rows per sequence
  std::vector<float> logits;  // [n_out][n_vocab], or [n_out][n_embd] from decode_embeddings

  Expected<GraphEntry*> forward_graph(const Model& m, const ContextParams& p, int n_ctx_total, int n_tokens, int n_out,
                                      bool embd, int ring, int n_seq, ContextStats& stats);
  // The KV move graph of n rows of `layers` (whose caches have n_ctx rows), built on first use.
  Expected<GraphEntry*> move_graph(const Model& m, const ContextParams& p, int n, bool rotate, KvLayers layers,
                                   int64_t n_ctx, ContextStats& stats);
  // Runs it: rows src[i] -> dst[i] (n of each), K rotated by `shift` positions when it rotates.
  Status run_move(GraphEntry& e, std::span<const int32_t> src, std::span<const int32_t> dst, int32_t shift);

  ~Impl() {
    forward.entries.clear();  // arenas go back to the backends before they are destroyed
    moves.entries.clear();
    sched.reset();
  }
};

Expected<std::unique_ptr<Context>> Context::create(std::shared_ptr<const Model> model, const ContextParams& p) {
  MINFER_ASSERT(model != nullptr);
  if (!kv_type_supported(p.kv_type))
    return make_error("context: KV cache type {} is not supported (f16, f32, q8_0, q4_0)", dtype_name(p.kv_type));
  if (const ModelHparams& hp = model->hparams(); dtype_info(p.kv_type).block_elems > 1 &&
      (hp.head_dim_k % 32 != 0 || hp.head_dim_v % 32 != 0))
    return make_error("context: a {} KV cache needs head sizes that are multiples of 32; this model's are {} (K) and {} (V)",
                      kv_type_name(p.kv_type), hp.head_dim_k, hp.head_dim_v);
  if (p.n_seq < 1) return make_error("context: n_seq {} must be at least 1", p.n_seq);
  if (p.n_ctx_seq < 0) return make_error("context: n_ctx {} is negative", p.n_ctx_seq);
  if (p.n_batch < 1) return make_error("context: n_batch {} must be at least 1", p.n_batch);
  if (p.n_threads < 0) return make_error("context: n_threads {} is negative", p.n_threads);
  auto names = parse_backend_list(p.backends);
  if (!names) return names.error();
  std::unique_ptr<Context> c(new Context());
  c->p_ = p;
  c->n_ctx_seq_ = p.n_ctx_seq > 0 ? p.n_ctx_seq : static_cast<int>(std::min<int64_t>(4096, model->hparams().n_ctx_train));
  if (static_cast<int64_t>(c->n_ctx_seq_) * p.n_seq > (int64_t{1} << 30))
    return make_error("context: {} sequences x {} positions is too large a KV cache", p.n_seq, c->n_ctx_seq_);
  c->n_batch_ = std::min<int64_t>(p.n_batch, static_cast<int64_t>(c->n_ctx_seq_) * p.n_seq);
  c->n_threads_ = p.n_threads > 0 ? p.n_threads : hardware_threads();
  c->model_ = std::move(model);
  c->seq_len_.assign(static_cast<size_t>(p.n_seq), 0);
  c->swa_ring_ = swa_ring_rows(c->model_->hparams(), c->n_ctx_seq_, c->n_batch_, p.swa_full);
  c->swa_lo_.assign(static_cast<size_t>(p.n_seq), 0);
  c->impl_ = std::make_unique<Impl>();
  std::vector<Backend*> raw;
  const Offload& off = p.offload;
  if (off.n_gpu_layers < kAllLayers)
    return make_error("context: n_gpu_layers {} is negative (-1 = all)", off.n_gpu_layers);
  const bool offloading = off.n_gpu_layers != 0 && !off.devices.empty();
  if (offloading) {
    const std::vector<DeviceInfo> have = list_devices();
    for (const std::string& d : off.devices) {
      auto it = std::find_if(have.begin(), have.end(), [&](const DeviceInfo& x) { return x.name == d; });
      if (it == have.end()) return make_error("context: no device '{}' here", d);
      auto b = create_backend(it->backend, {.n_threads = c->n_threads_, .device = d});
      if (!b) return b.error();
      raw.push_back(b->get());
      c->impl_->backends.push_back(std::move(*b));
      c->impl_->device_names.push_back(d);
    }
  }
  Impl& im = *c->impl_;
  im.placement = {.n_layer = c->model_->hparams().n_layer, .n_gpu_layers = offloading ? off.n_gpu_layers : 0,
                  .n_devices = static_cast<int>(im.device_names.size())};
  if (offloading) {
    const int n_dev = static_cast<int>(im.device_names.size());
    im.allow = [&im, n_dev](const Node& n, int b) { return b >= n_dev || im.placement.device_of(n.name) == b; };
  }
  for (const std::string& n : *names) {
    auto b = create_backend(n, {.n_threads = c->n_threads_, .device = ""});
    if (!b) return b.error();
    raw.push_back(b->get());
    c->impl_->backends.push_back(std::move(*b));
  }
  c->impl_->sched = std::make_unique<Scheduler>(raw);
  return c;
}

int Context::swa_ring_rows(const ModelHparams& hp, int n_ctx_seq, int n_batch, bool swa_full) {
  bool any = false;
  for (int64_t il = 0; il < hp.n_layer; ++il) any = any || hp.is_swa(il);
  if (!any || swa_full) return 0;
  // The window of a batch's first token and the batch's own rows (one spare).
  const int64_t ring = hp.n_swa + n_batch;
  return ring < n_ctx_seq ? static_cast<int>(ring) : 0;
}

Context::KvFootprint Context::kv_footprint(const ModelHparams& hp, int n_ctx_seq, int n_batch, DType kv_type,
                                           bool swa_full) {
  KvFootprint f;
  f.rows_swa = swa_ring_rows(hp, n_ctx_seq, n_batch, swa_full);
  const size_t row = kv_row_bytes(kv_type, hp.n_embd_k()) + kv_row_bytes(kv_type, hp.n_embd_v());
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    if (f.rows_swa > 0 && hp.is_swa(il)) {
      ++f.layers_swa;
      f.bytes_swa += static_cast<size_t>(f.rows_swa) * row;
    } else {
      ++f.layers_full;
      f.bytes_full += static_cast<size_t>(n_ctx_seq) * row;
    }
  }
  return f;
}

int Context::window_lo(int n) const {
  return std::max<int>(0, n - static_cast<int>(model_->hparams().n_swa) + 1);
}

Expected<GraphEntry*> Context::Impl::forward_graph(const Model& m, const ContextParams& p, int n_ctx_total, int n_tokens,
                                                   int n_out, bool embd, int ring, int n_seq, ContextStats& stats) {
  Impl& im = *this;
  const auto key = std::make_tuple(n_tokens, n_out, embd);
  if (GraphEntry* e = im.forward.find(key)) return e;
  GraphParams gp;
  gp.n_tokens = n_tokens;
  gp.n_out = n_out;
  gp.n_ctx = n_ctx_total;
  gp.kv_type = p.kv_type;
  gp.multi_seq = true;
  gp.swa_ring = ring;
  gp.n_ctx_swa = static_cast<int64_t>(ring) * n_seq;
  gp.embeddings = embd;
  auto pg = im.sched->prepare(m.build_graph(gp), {.fuse = p.fuse, .allow = im.allow});
  if (!pg) return pg.error();
  GraphEntry e;
  e.pg = std::move(*pg);
  const Graph& g = e.pg->graph;
  e.tokens = g.find(kInpTokens);
  e.pos = g.find(kInpPos);
  e.out_ids = g.find(kInpOutIds);
  e.kv_rows = g.find(kInpKvRows);
  e.kv_ranges = g.find(kInpKvRanges);
  e.kv_rows_swa = g.find(kInpKvRowsSwa);
  e.kv_ranges_swa = g.find(kInpKvRangesSwa);
  e.logits = g.outputs.at(0);
  MINFER_ASSERT(e.tokens >= 0 && e.pos >= 0 && e.kv_rows >= 0 && e.kv_ranges >= 0 && (n_out == n_tokens || e.out_ids >= 0));
  MINFER_ASSERT((ring > 0) == (e.kv_rows_swa >= 0 && e.kv_ranges_swa >= 0));
  ++stats.n_graph_builds;
  return &im.forward.insert(key, std::move(e));
}

Context::~Context() = default;

int Context::n_vocab() const { return static_cast<int>(model_->hparams().n_vocab); }
int Context::n_embd() const { return static_cast<int>(model_->hparams().n_embd); }

std::vector<std::string> Context::backend_names() const {
  std::vector<std::string> v;
  for (const auto& b : impl_->backends) v.emplace_back(b->name());
  return v;
}

std::vector<std::string> Context::backend_descriptions() const {
  std::vector<std::string> v;
  for (const auto& b : impl_->backends) v.push_back(b->describe());
  return v;
}

size_t Context::kv_bytes() const { return impl_->sched->persistent_bytes(); }

BackendCounters Context::device_counters() const {
  BackendCounters sum;
  for (size_t d = 0; d < impl_->device_names.size(); ++d) {
    const BackendCounters c = impl_->backends[d]->counters();
    sum.submissions += c.submissions;
    sum.dispatches += c.dispatches;
    sum.replayed += c.replayed;
    sum.bytes_to_device += c.bytes_to_device;
    sum.bytes_to_host += c.bytes_to_host;
  }
  return sum;
}

std::string Context::placement() const {
  const Impl& im = *impl_;
  const LayerPlacement& lp = im.placement;
  if (lp.n_offloaded() == 0 && !lp.output_offloaded()) return "";
  auto range = [](int64_t a, int64_t b) { return a == b ? fmt::format("layer {}", a) : fmt::format("layers {}..{}", a, b); };
  std::string s;
  for (int d = 0; d < lp.n_devices; ++d) {
    int64_t lo = -1, hi = -1;
    for (int64_t il = 0; il < lp.n_layer; ++il)
      if (lp.device_of_layer(il) == d) {
        if (lo < 0) lo = il;
        hi = il;
      }
    const bool out = lp.device_of_layer(lp.n_layer) == d;
    const Backend& b = *im.backends[static_cast<size_t>(d)];
    size_t kv = 0;
    for (int64_t il = lo; lo >= 0 && il <= hi; ++il)
      for (const char* w : {"cache_k", "cache_v"}) {
        const Scheduler::RegionView r = im.sched->persistent_region(fmt::format("blk.{}.{}", il, w));
        if (r.backend == &b) kv += r.size;
      }
    s += fmt::format("{}{}{} on {}: {:.1f} MiB of device memory ({:.1f} MiB of KV cache)", s.empty() ? "" : "; ",
                     lo >= 0 ? range(lo, hi) : "", out ? (lo >= 0 ? " and the output" : "the output") : "",
                     im.device_names[static_cast<size_t>(d)], static_cast<double>(b.memory_used()) / (1 << 20),
                     static_cast<double>(kv) / (1 << 20));
  }
  const int64_t n_host = lp.n_layer - lp.n_offloaded();
  s += n_host > 0 ? fmt::format("; {} on the CPU", range(0, n_host - 1)) : "";
  if (!lp.output_offloaded()) s += n_host > 0 ? " with the output" : "; the output on the CPU";
  return s;
}

void Context::set_observer(NodeObserver obs) { impl_->sched->set_observer(std::move(obs)); }

int Context::seq_len(int s) const {
  MINFER_ASSERT(s >= 0 && s < p_.n_seq);
  return seq_len_[static_cast<size_t>(s)];
}

// ---- forward ------------------------------------------------------------------------------


Expected<const PreparedGraph*> Context::graph(int n_tokens, int n_out, bool embeddings) {
  if (n_tokens < 1 || n_tokens > n_batch_ || n_out < 1 || n_out > n_tokens)
    return make_error("context: no graph for n_tokens {} (1..{}) with n_out {} (1..n_tokens)", n_tokens, n_batch_, n_out);
  auto e = impl_->forward_graph(*model_, p_, n_ctx_seq_ * p_.n_seq, n_tokens, n_out, embeddings, swa_ring_, p_.n_seq, stats_);
  if (!e) return e.error();
  return static_cast<const PreparedGraph*>((*e)->pg.get());
}


Expected<std::span<const float>> Context::decode(const Batch& b) { return run(b, false); }
Expected<std::span<const float>> Context::decode_embeddings(const Batch& b) { return run(b, true); }

Expected<std::span<const float>> Context::run(const Batch& b, bool embd) {
  const int n = b.size();
  if (n == 0) return make_error("decode: the batch is empty");
  if (b.pos.size() != b.token.size() || b.seq.size() != b.token.size() || b.logits.size() != b.token.size())
    return make_error("decode: batch arrays differ in length (token {}, pos {}, seq {}, logits {})", b.token.size(),
                      b.pos.size(), b.seq.size(), b.logits.size());
  if (n > n_batch_) return make_error("decode: batch of {} tokens is larger than n_batch {}", n, n_batch_);
  // Check everything first: an error leaves every sequence as it was.
  Impl& im = *impl_;
  std::vector<int>& len = im.len;
  std::vector<int>& rows_of = im.rows_of;
  len = seq_len_;
  rows_of.assign(static_cast<size_t>(p_.n_seq), 0);
  for (int i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const int32_t s = b.seq[k], t = b.token[k], pos = b.pos[k];
    if (s < 0 || s >= p_.n_seq) return make_error("decode: token {} has sequence id {} (0..{})", i, s, p_.n_seq - 1);
    if (t < 0 || t >= n_vocab()) return make_error("decode: token {} at index {} is outside the vocabulary 0..{}", t, i, n_vocab() - 1);
    int& l = len[static_cast<size_t>(s)];
    if (pos != l)
      return make_error("decode: token {} of sequence {} has position {}, expected {} (the next one)", i, s, pos, l);
    if (l >= n_ctx_seq_)
      return make_error("decode: context full: sequence {} has {} of {} positions", s, l, n_ctx_seq_);
    if (swa_ring_ > 0 && l == seq_len_[static_cast<size_t>(s)] && window_lo(l) < ring_lo(s))
      return make_error("decode: sequence {}'s sliding-window cache no longer holds positions {}..{} (it keeps {}..{})", s,
                        window_lo(l), l - 1, ring_lo(s), l - 1);
    ++l;
    ++rows_of[static_cast<size_t>(s)];
  }
  im.b_rows.resize(static_cast<size_t>(n));
  im.b_ranges.resize(static_cast<size_t>(3 * n));
  im.b_out.clear();
  for (int i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const int32_t s = b.seq[k];
    const int32_t base = s * n_ctx_seq_;
    im.b_rows[k] = base + b.pos[k];
    im.b_ranges[3 * k] = base;
    im.b_ranges[3 * k + 1] = b.pos[k] + 1;
    im.b_ranges[3 * k + 2] = p_.attn == AttnArith::kInvariant ? kAttnRowsInvariant : rows_of[static_cast<size_t>(s)];
    if (b.logits[k]) im.b_out.push_back(i);
  }
  if (swa_ring_ > 0) {
    im.b_rows_swa.resize(static_cast<size_t>(n));
    im.b_ranges_swa = im.b_ranges;
    for (int i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const int32_t base = b.seq[k] * swa_ring_;
      im.b_rows_swa[k] = base + b.pos[k] % swa_ring_;
      im.b_ranges_swa[3 * k] = base;
    }
  }
  const int n_want = static_cast<int>(im.b_out.size());
  if (im.b_out.empty()) im.b_out.push_back(n - 1);  // a graph always has an output row
  const int n_out = static_cast<int>(im.b_out.size());
  auto ge = im.forward_graph(*model_, p_, n_ctx_seq_ * p_.n_seq, n, n_out, embd, swa_ring_, p_.n_seq, stats_);
  if (!ge) return ge.error();
  GraphEntry& e = **ge;
  PreparedGraph& pg = *e.pg;
  Scheduler& sched = *im.sched;
  MINFER_TRY(sched.set_input(pg, e.tokens, b.token.data(), b.token.size() * sizeof(int32_t)));
  MINFER_TRY(sched.set_input(pg, e.pos, b.pos.data(), b.pos.size() * sizeof(int32_t)));
  MINFER_TRY(sched.set_input(pg, e.kv_rows, im.b_rows.data(), im.b_rows.size() * sizeof(int32_t)));
  MINFER_TRY(sched.set_input(pg, e.kv_ranges, im.b_ranges.data(), im.b_ranges.size() * sizeof(int32_t)));
  if (swa_ring_ > 0) {
    MINFER_TRY(sched.set_input(pg, e.kv_rows_swa, im.b_rows_swa.data(), im.b_rows_swa.size() * sizeof(int32_t)));
    MINFER_TRY(sched.set_input(pg, e.kv_ranges_swa, im.b_ranges_swa.data(), im.b_ranges_swa.size() * sizeof(int32_t)));
  }
  if (e.out_ids >= 0) MINFER_TRY(sched.set_input(pg, e.out_ids, im.b_out.data(), static_cast<size_t>(n_out) * sizeof(int32_t)));
  MINFER_TRY(sched.compute(pg));
  ++stats_.n_computes;
  const size_t n_vocab_z = static_cast<size_t>(embd ? n_embd() : n_vocab());  // a row's width
  im.logits.resize(static_cast<size_t>(n_out) * n_vocab_z);
  MINFER_TRY(sched.get_output(pg, e.logits, im.logits.data(), im.logits.size() * sizeof(float)));
  seq_len_.swap(len);
  if (swa_ring_ > 0)
    for (int s = 0; s < p_.n_seq; ++s)
      swa_lo_[static_cast<size_t>(s)] = std::max(swa_lo_[static_cast<size_t>(s)], seq_len_[static_cast<size_t>(s)] - swa_ring_);
  stats_.n_tokens += n;
  return std::span<const float>(im.logits.data(), static_cast<size_t>(n_want) * n_vocab_z);
}

// ---- KV cache edits -----------------------------------------------------------------------

Status Context::move_rows(std::span<const int32_t> src, std::span<const int32_t> dst, int32_t shift) {
  MINFER_ASSERT(src.size() == dst.size() && !src.empty());
  Impl& im = *impl_;
  const bool rotate = shift != 0;
  const int n_ctx_total = n_ctx_seq_ * p_.n_seq;
  // Graphs come in power-of-two row counts (few shapes to build): a move of n rows runs as
  // pieces of its binary decomposition, largest first. Pieces go front to back, so a downward
  // move never overwrites a row that a later piece still reads.
  const int max_rows = static_cast<int>(std::bit_floor(static_cast<unsigned>(std::min(n_ctx_total, 1 << 12))));
  for (size_t done = 0; done < src.size();) {
    const int left = static_cast<int>(src.size() - done);
    const int n = std::min(max_rows, static_cast<int>(std::bit_floor(static_cast<unsigned>(left))));
    const KvLayers layers = swa_ring_ > 0 ? KvLayers::kFull : KvLayers::kAll;
    auto e = im.move_graph(*model_, p_, n, rotate, layers, n_ctx_total, stats_);
    if (!e) return e.error();
    MINFER_TRY(im.run_move(**e, src.subspan(done, static_cast<size_t>(n)), dst.subspan(done, static_cast<size_t>(n)), shift));
    done += static_cast<size_t>(n);
  }
  ++stats_.n_kv_moves;
  return Status::ok();
}

// The ring caches' rows: one graph of exactly n rows (every row is read before any is written,
// so a permutation within a ring is safe; padding would need rows that no live position uses:
// a repeated pair writes one row from two threads).
Status Context::move_ring_rows(const std::vector<int32_t>& src, const std::vector<int32_t>& dst, int32_t shift) {
  MINFER_ASSERT(src.size() == dst.size() && !src.empty() && swa_ring_ > 0);
  const int n = static_cast<int>(src.size());
  auto e = impl_->move_graph(*model_, p_, n, shift != 0, KvLayers::kSwa, int64_t{swa_ring_} * p_.n_seq, stats_);
  if (!e) return e.error();
  return impl_->run_move(**e, src, dst, shift);
}

Expected<GraphEntry*> Context::Impl::move_graph(const Model& m, const ContextParams& p, int n, bool rotate,
                                                KvLayers layers, int64_t n_ctx, ContextStats& stats) {
  const auto key = std::make_tuple(n, rotate, layers);
  if (GraphEntry* e = moves.find(key)) return e;
  auto pg = sched->prepare(m.build_kv_move({.n_rows = n, .n_ctx = n_ctx, .kv_type = p.kv_type, .rotate = rotate,
                                            .layers = layers}),
                           {.fuse = p.fuse, .allow = allow});
  if (!pg) return pg.error();
  GraphEntry ne;
  ne.pg = std::move(*pg);
  ne.src = ne.pg->graph.find(kInpKvSrc);
  ne.dst = ne.pg->graph.find(kInpKvDst);
  ne.shift = rotate ? ne.pg->graph.find(kInpKvShift) : -1;
  MINFER_ASSERT(ne.src >= 0 && ne.dst >= 0 && (!rotate || ne.shift >= 0));
  ++stats.n_graph_builds;
  return &moves.insert(key, std::move(ne));
}

Status Context::Impl::run_move(GraphEntry& e, std::span<const int32_t> src, std::span<const int32_t> dst, int32_t shift) {
  MINFER_ASSERT(src.size() == dst.size());
  MINFER_TRY(sched->set_input(*e.pg, e.src, src.data(), src.size_bytes()));
  MINFER_TRY(sched->set_input(*e.pg, e.dst, dst.data(), dst.size_bytes()));
  if (e.shift >= 0) {
    const std::vector<int32_t> sh(src.size(), shift);
    MINFER_TRY(sched->set_input(*e.pg, e.shift, sh.data(), sh.size() * sizeof(int32_t)));
  }
  return sched->compute(*e.pg);
}

bool Context::can_keep(int s, int n) const {
  MINFER_ASSERT(s >= 0 && s < p_.n_seq);
  if (n < 0 || n > seq_len_[static_cast<size_t>(s)]) return false;
  return swa_ring_ == 0 || n == 0 || window_lo(n) >= ring_lo(s);
}

Status Context::seq_rm(int s, int p0, int p1) {
  if (s < 0 || s >= p_.n_seq) return make_error("seq_rm: sequence {} does not exist (0..{})", s, p_.n_seq - 1);
  const int len = seq_len_[static_cast<size_t>(s)];
  if (p1 < 0) p1 = len;
  if (p0 < 0 || p0 > p1 || p1 > len)
    return make_error("seq_rm: cannot remove positions [{}, {}) of sequence {} ({} cached)", p0, p1, s, len);
  const int d = p1 - p0, n_move = len - p1;
  if (d == 0) return Status::ok();
  // The rings: positions from p1 on move down; what is left must hold the next token's window.
  const int lo = ring_lo(s), lo2 = lo <= p0 ? lo : std::max(p0, lo - d);
  if (swa_ring_ > 0 && len - d > 0 && window_lo(len - d) < lo2)
    return make_error("seq_rm: removing positions [{}, {}) of sequence {} leaves its sliding-window cache without "
                      "positions {}..{} (it keeps only the last {}); reprocess the sequence instead",
                      p0, p1, s, window_lo(len - d), lo2 - 1, swa_ring_);
  if (n_move > 0) {
    // Within one move graph every source row is read before any destination row is written,
    // and move_rows's pieces go front to back.
    const int32_t base = s * n_ctx_seq_;
    std::vector<int32_t> src(static_cast<size_t>(n_move)), dst(static_cast<size_t>(n_move));
    for (int i = 0; i < n_move; ++i) {
      src[static_cast<size_t>(i)] = base + p1 + i;
      dst[static_cast<size_t>(i)] = base + p0 + i;
    }
    MINFER_TRY(move_rows(src, dst, -d));
    if (swa_ring_ > 0) {
      std::vector<int32_t> rs, rd;
      const int32_t rbase = s * swa_ring_;
      for (int q = std::max(p1, lo); q < len; ++q) {
        rs.push_back(rbase + q % swa_ring_);
        rd.push_back(rbase + (q - d) % swa_ring_);
      }
      if (!rs.empty()) MINFER_TRY(move_ring_rows(rs, rd, -d));
    }
  }
  seq_len_[static_cast<size_t>(s)] = len - d;
  swa_lo_[static_cast<size_t>(s)] = len - d == 0 ? 0 : lo2;
  return Status::ok();
}

Status Context::seq_rollback(int s, int n) {
  if (s < 0 || s >= p_.n_seq) return make_error("seq_rollback: sequence {} does not exist (0..{})", s, p_.n_seq - 1);
  const int len = seq_len_[static_cast<size_t>(s)];
  if (n < 0 || n > len) return make_error("seq_rollback: cannot drop {} positions of sequence {} ({} cached)", n, s, len);
  if (!can_keep(s, len - n))
    return make_error("seq_rollback: sequence {}'s sliding-window cache keeps only positions {}..{}; cannot go back {}",
                      s, ring_lo(s), len - 1, n);
  seq_len_[static_cast<size_t>(s)] = len - n;
  if (len == n) swa_lo_[static_cast<size_t>(s)] = 0;
  return Status::ok();
}

Status Context::seq_cp(int src, int dst, int n) {
  if (src < 0 || src >= p_.n_seq || dst < 0 || dst >= p_.n_seq)
    return make_error("seq_cp: sequences {} -> {}: ids are 0..{}", src, dst, p_.n_seq - 1);
  if (src == dst) return make_error("seq_cp: source and destination are both sequence {}", src);
  const int len = seq_len_[static_cast<size_t>(src)];
  if (n < 0 || n > len) return make_error("seq_cp: cannot copy {} positions of sequence {} ({} cached)", n, src, len);
  if (!can_keep(src, n))
    return make_error("seq_cp: sequence {}'s sliding-window cache keeps only positions {}..{}; cannot copy its first {}",
                      src, ring_lo(src), len - 1, n);
  if (n > 0) {
    std::vector<int32_t> from(static_cast<size_t>(n)), to(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      from[static_cast<size_t>(i)] = src * n_ctx_seq_ + i;
      to[static_cast<size_t>(i)] = dst * n_ctx_seq_ + i;
    }
    MINFER_TRY(move_rows(from, to, 0));
    if (swa_ring_ > 0) {
      std::vector<int32_t> rs, rd;
      for (int q = ring_lo(src); q < n; ++q) {
        rs.push_back(src * swa_ring_ + q % swa_ring_);
        rd.push_back(dst * swa_ring_ + q % swa_ring_);
      }
      if (!rs.empty()) MINFER_TRY(move_ring_rows(rs, rd, 0));
    }
  }
  seq_len_[static_cast<size_t>(dst)] = n;
  swa_lo_[static_cast<size_t>(dst)] = n == 0 ? 0 : ring_lo(src);
  return Status::ok();
}

void Context::seq_clear(int s) {
  MINFER_ASSERT(s >= 0 && s < p_.n_seq);
  seq_len_[static_cast<size_t>(s)] = 0;
  swa_lo_[static_cast<size_t>(s)] = 0;
}

// ---- export / import ----------------------------------------------------------------------

size_t Context::kv_export_bytes(int n) const {
  const ModelHparams& hp = model_->hparams();
  const size_t row = kv_row_bytes(p_.kv_type, hp.n_embd_k()) + kv_row_bytes(p_.kv_type, hp.n_embd_v());
  size_t total = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il)
    total += static_cast<size_t>(swa_ring_ > 0 && hp.is_swa(il) ? n - window_lo(n) : n) * row;
  return total;
}

namespace {

// Layer il's K (is_value = false) or V cache, checked against the shape the model implies.
Expected<Scheduler::RegionView> kv_region(const Scheduler& sched, int64_t il, bool is_value, int64_t n_embd, DType type) {
  const std::string name = fmt::format("blk.{}.{}", il, is_value ? "cache_v" : "cache_k");
  Scheduler::RegionView r = sched.persistent_region(name);
  if (!r.base) return make_error("context: KV region '{}' does not exist yet", name);
  if (r.type != type || r.ne[0] != n_embd)
    return make_error("context: KV region '{}' is {} {}, expected {} rows of {}", name, dtype_name(r.type),
                      shape_string(r.ne), dtype_name(type), n_embd);
  return r;
}

// Where sequence s's positions lo .. n - 1 are in a cache: its rows from `base`, position p at
// base + p (ring == 0) or base + p mod ring.
struct SeqRows {
  int64_t base, ring, lo, n;
};

// The flat layout of kv_export/kv_import: for each layer, its K rows then its V rows (the
// positions `full` gives, or `swa` for a ring layer); fn gets each contiguous piece: the
// cache's region, the byte offset of its first row, the offset in the flat buffer, the bytes.
Status for_each_kv_slice(const Scheduler& sched, const ModelHparams& hp, DType type, const SeqRows& full,
                         const SeqRows& swa, const std::function<void(const Scheduler::RegionView&, size_t, size_t, size_t)>& fn) {
  size_t off = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il)
    for (bool is_value : {false, true}) {
      const int64_t n_embd = is_value ? hp.n_embd_v() : hp.n_embd_k();
      auto r = kv_region(sched, il, is_value, n_embd, type);
      if (!r) return r.error();
      const size_t row = kv_row_bytes(type, n_embd);
      const SeqRows& sr = swa.ring > 0 && hp.is_swa(il) ? swa : full;
      for (int64_t p = sr.lo; p < sr.n;) {  // pieces up to the ring's end
        const int64_t at = sr.ring > 0 ? p % sr.ring : p;
        const int64_t len = sr.ring > 0 ? std::min(sr.n - p, sr.ring - at) : sr.n - p;
        fn(*r, static_cast<size_t>(sr.base + at) * row, off, static_cast<size_t>(len) * row);
        off += static_cast<size_t>(len) * row;
        p += len;
      }
    }
  return Status::ok();
}

}  // namespace

Expected<std::vector<uint8_t>> Context::kv_export(int s) const {
  if (s < 0 || s >= p_.n_seq) return make_error("kv_export: sequence {} does not exist (0..{})", s, p_.n_seq - 1);
  const int n = seq_len_[static_cast<size_t>(s)];
  std::vector<uint8_t> out(kv_export_bytes(n));
  if (n == 0) return out;
  MINFER_TRY(for_each_kv_slice(*impl_->sched, model_->hparams(), p_.kv_type, {int64_t{s} * n_ctx_seq_, 0, 0, n},
                               {int64_t{s} * swa_ring_, swa_ring_, window_lo(n), n},
                               [&](const Scheduler::RegionView& r, size_t src, size_t off, size_t bytes) {
                                 r.backend->read(out.data() + off, static_cast<const uint8_t*>(r.base) + src, bytes);
                               }));
  return out;
}

Status Context::kv_import(int s, std::span<const uint8_t> bytes, int n) {
  if (s < 0 || s >= p_.n_seq) return make_error("kv_import: sequence {} does not exist (0..{})", s, p_.n_seq - 1);
  if (n < 0 || n > n_ctx_seq_) return make_error("kv_import: cannot import {} positions into n_ctx {}", n, n_ctx_seq_);
  if (bytes.size() != kv_export_bytes(n))
    return make_error("kv_import: {} bytes, expected {} for {} positions", bytes.size(), kv_export_bytes(n), n);
  auto g = graph(1, 1);  // creates the cache regions on a fresh context
  if (!g) return g.error();
  MINFER_TRY(for_each_kv_slice(*impl_->sched, model_->hparams(), p_.kv_type, {int64_t{s} * n_ctx_seq_, 0, 0, n},
                               {int64_t{s} * swa_ring_, swa_ring_, window_lo(n), n},
                               [&](const Scheduler::RegionView& r, size_t dst, size_t off, size_t nb) {
                                 r.backend->write(static_cast<uint8_t*>(r.base) + dst, bytes.data() + off, nb);
                               }));
  seq_len_[static_cast<size_t>(s)] = n;
  swa_lo_[static_cast<size_t>(s)] = swa_ring_ > 0 ? window_lo(n) : 0;
  return Status::ok();
}

}  // namespace minfer
