#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu-backend.h"
#include "core/fp16.h"
#include "core/thread-pool.h"

namespace minfer {

Expected<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, const SessionParams& p) {
  MINFER_ASSERT(model != nullptr);
  if (p.kv_type != DType::F16 && p.kv_type != DType::F32)
    return make_error("session: KV cache type {} is not supported (f16, f32)", dtype_name(p.kv_type));
  if (p.n_ctx < 0) return make_error("session: n_ctx {} is negative", p.n_ctx);
  if (p.n_batch < 1) return make_error("session: n_batch {} must be at least 1", p.n_batch);
  if (p.n_threads < 0) return make_error("session: n_threads {} is negative", p.n_threads);
  std::unique_ptr<Session> s(new Session());
  s->params_ = p;
  s->n_ctx_ = p.n_ctx > 0 ? p.n_ctx : static_cast<int>(std::min<int64_t>(4096, model->hparams().n_ctx_train));
  s->n_batch_ = std::min(p.n_batch, s->n_ctx_);
  s->model_ = std::move(model);
  s->cpu_ = std::make_unique<cpu::CpuBackend>(p.n_threads > 0 ? p.n_threads : hardware_threads());
  s->sched_ = std::make_unique<Scheduler>(std::vector<Backend*>{s->cpu_.get()});
  return s;
}

Session::~Session() {
  graphs_.clear();  // arenas go back to the backend before it is destroyed
  sched_.reset();
}

int Session::n_threads() const { return cpu_->n_threads(); }

std::vector<std::string> Session::backend_names() const {
  std::vector<std::string> v;
  for (const Backend* b : sched_->backends()) v.emplace_back(b->name());
  return v;
}

Expected<PreparedGraph*> Session::prepared(int n_tokens, int n_out) {
  const auto key = std::make_pair(n_tokens, n_out);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() >= kMaxGraphs) {
      auto lru = std::min_element(graphs_.begin(), graphs_.end(),
                                  [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
      graphs_.erase(lru);
    }
    GraphParams gp{n_tokens, n_out, n_ctx_, params_.kv_type};
    auto pg = sched_->prepare(model_->build_graph(gp), {.fuse = params_.fuse});
    if (!pg) return pg.error();
    Entry e;
    e.pg = std::move(*pg);
    const Graph& g = e.pg->graph;
    e.tokens = g.find(kInpTokens);
    e.pos = g.find(kInpPos);
    e.out_ids = g.find(kInpOutIds);
    e.logits = g.outputs.at(0);
    MINFER_ASSERT(e.tokens >= 0 && e.pos >= 0 && (n_out == n_tokens || e.out_ids >= 0));
    it = graphs_.emplace(key, std::move(e)).first;
    ++stats_.n_graph_builds;
  }
  it->second.last_use = ++clock_;
  return it->second.pg.get();
}

Expected<const PreparedGraph*> Session::graph(int n_tokens, int n_out) {
  if (n_tokens < 1 || n_tokens > n_batch_ || n_out < 1 || n_out > n_tokens)
    return make_error("session: no graph for n_tokens {} (1..{}) with n_out {} (1..n_tokens)", n_tokens, n_batch_, n_out);
  auto pg = prepared(n_tokens, n_out);
  if (!pg) return pg.error();
  return static_cast<const PreparedGraph*>(*pg);
}

// One graph execution: tokens at positions pos0.., logits of the last n_out rows into
// `logits` ([n_out][n_vocab]) unless it is null.
Status Session::run_chunk(std::span<const int32_t> tokens, int pos0, int n_out, float* logits) {
  const int n = static_cast<int>(tokens.size());
  auto pgx = prepared(n, n_out);
  if (!pgx) return pgx.error();
  PreparedGraph& pg = **pgx;
  const Entry& e = graphs_.at({n, n_out});
  MINFER_TRY(sched_->set_input(pg, e.tokens, tokens.data(), tokens.size_bytes()));
  scratch_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) scratch_[static_cast<size_t>(i)] = pos0 + i;
  MINFER_TRY(sched_->set_input(pg, e.pos, scratch_.data(), scratch_.size() * sizeof(int32_t)));
  if (e.out_ids >= 0) {  // the last n_out rows
    for (int i = 0; i < n_out; ++i) scratch_[static_cast<size_t>(i)] = n - n_out + i;
    MINFER_TRY(sched_->set_input(pg, e.out_ids, scratch_.data(), static_cast<size_t>(n_out) * sizeof(int32_t)));
  }
  MINFER_TRY(sched_->compute(pg));
  ++stats_.n_computes;
  if (logits)
    MINFER_TRY(sched_->get_output(pg, e.logits, logits, static_cast<size_t>(n_out) * static_cast<size_t>(n_vocab()) * sizeof(float)));
  return Status::ok();
}

Expected<std::span<const float>> Session::decode(std::span<const int32_t> tokens, int n_out) {
  const int total = static_cast<int>(tokens.size());
  if (total == 0) return make_error("decode: no tokens");
  if (n_out < 1 || n_out > total) return make_error("decode: n_out {} is outside 1..{} (the number of tokens)", n_out, total);
  if (n_past_ + total > n_ctx_)
    return make_error("decode: context full: {} cached + {} new tokens > n_ctx {}", n_past_, total, n_ctx_);
  for (int i = 0; i < total; ++i) {
    const int32_t t = tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= n_vocab()) return make_error("decode: token {} at index {} is outside the vocabulary 0..{}", t, i, n_vocab() - 1);
  }
  const size_t n_vocab_z = static_cast<size_t>(n_vocab());
  logits_.resize(static_cast<size_t>(n_out) * n_vocab_z);
  const int first_out = total - n_out;  // global index of the first row whose logits we return
  for (int start = 0; start < total; start += n_batch_) {
    const int len = std::min(n_batch_, total - start);
    const int end = start + len;
    // The rows of this chunk that are wanted form a suffix of it; a chunk without any computes
    // one row of logits and drops it (a graph always has an output).
    const int wanted = std::max(0, end - std::max(start, first_out));
    float* dst = wanted > 0 ? logits_.data() + static_cast<size_t>(std::max(start, first_out) - first_out) * n_vocab_z : nullptr;
    Status s = run_chunk(tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(len)), n_past_ + start,
                         std::max(wanted, 1), dst);
    if (!s) return s.error();  // positions past n_past_ are simply overwritten by the next call
  }
  n_past_ += total;
  stats_.n_tokens += total;
  return std::span<const float>(logits_);
}

Status Session::truncate(int n_past) {
  if (n_past < 0 || n_past > n_past_)
    return make_error("session: cannot truncate to {} positions (have {})", n_past, n_past_);
  n_past_ = n_past;  // cache rows >= n_past are ignored by attention and rewritten later
  return Status::ok();
}

// ---- KV cache editing -----------------------------------------------------------------------

namespace {

size_t kv_elem_bytes(DType t) { return t == DType::F16 ? 2 : 4; }

// Layer il's K (is_value = false) or V cache, checked against the shape the model implies.
Expected<Scheduler::RegionView> kv_region(const Scheduler& sched, int64_t il, bool is_value, int64_t n_embd, DType type) {
  const std::string name = fmt::format("blk.{}.{}", il, is_value ? "cache_v" : "cache_k");
  Scheduler::RegionView r = sched.persistent_region(name);
  if (!r.base) return make_error("session: KV region '{}' does not exist yet", name);
  if (r.type != type || r.ne[0] != n_embd)
    return make_error("session: KV region '{}' is {} {}, expected {} rows of {}", name, dtype_name(r.type),
                      shape_string(r.ne), dtype_name(type), n_embd);
  return r;
}

}  // namespace

// The flat KV layout of kv_export/kv_import: for each layer, its K rows then its V rows, the
// first n_pos rows of each; fn gets each cache's region, its byte offset in the flat buffer
// and its byte count.
Status Session::for_each_kv_slice(int n_pos,
                                  const std::function<void(const Scheduler::RegionView&, size_t, size_t)>& fn) const {
  const ModelHparams& hp = model_->hparams();
  const size_t esz = kv_elem_bytes(params_.kv_type);
  size_t off = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il)
    for (bool is_value : {false, true}) {
      const int64_t n_embd = is_value ? hp.n_embd_v() : hp.n_embd_k();
      auto r = kv_region(*sched_, il, is_value, n_embd, params_.kv_type);
      if (!r) return r.error();
      const size_t n = static_cast<size_t>(n_pos) * static_cast<size_t>(n_embd) * esz;
      fn(*r, off, n);
      off += n;
    }
  MINFER_ASSERT(off == static_cast<size_t>(n_pos) * kv_row_bytes());
  return Status::ok();
}

size_t Session::kv_row_bytes() const {
  const ModelHparams& hp = model_->hparams();
  return static_cast<size_t>(hp.n_layer * (hp.n_embd_k() + hp.n_embd_v())) * kv_elem_bytes(params_.kv_type);
}

Status Session::kv_remove(int p0, int p1) {
  if (p0 < 0 || p0 > p1 || p1 > n_past_)
    return make_error("session: cannot remove positions [{}, {}) of {} cached", p0, p1, n_past_);
  const int d = p1 - p0, n_move = n_past_ - p1;
  if (d == 0) return Status::ok();
  if (n_move == 0) {
    n_past_ = p0;
    return Status::ok();
  }
  const ModelHparams& hp = model_->hparams();
  const int n_rot = static_cast<int>(hp.n_rot);
  const int64_t hd = hp.head_dim_k;
  const bool neox = hp.rope_mode == RopeMode::kNeox;
  MINFER_ASSERT(n_rot > 0 && n_rot <= hd && n_rot % 2 == 0);
  const float* factors = nullptr;  // [n_rot/2]
  if (const GgufTensor* f = model_->weights().rope_freqs) {
    if (f->type != DType::F32 || f->n_elements() < n_rot / 2)
      return make_error("session: rope_freqs is {} with {} elements, expected F32 with {}", dtype_name(f->type),
                        f->n_elements(), n_rot / 2);
    factors = reinterpret_cast<const float*>(f->data);
  }
  // The angles of position -d, built as op_rope builds them (repeated multiplication in f32).
  std::vector<float> cos_t(static_cast<size_t>(n_rot / 2)), sin_t(static_cast<size_t>(n_rot / 2));
  const float theta_scale = std::pow(hp.rope_freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(-d);
  for (int i = 0; i < n_rot / 2; ++i) {
    const float th = hp.rope_freq_scale * (factors ? theta / factors[i] : theta);
    cos_t[static_cast<size_t>(i)] = std::cos(th);
    sin_t[static_cast<size_t>(i)] = std::sin(th);
    theta *= theta_scale;
  }
  const DType type = params_.kv_type;
  const size_t esz = kv_elem_bytes(type);
  std::vector<uint8_t> raw;
  std::vector<float> row(static_cast<size_t>(hp.n_embd_k()));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    for (bool is_value : {false, true}) {
      const int64_t n_embd = is_value ? hp.n_embd_v() : hp.n_embd_k();
      auto r = kv_region(*sched_, il, is_value, n_embd, type);
      if (!r) return r.error();
      const size_t row_bytes = static_cast<size_t>(n_embd) * esz;
      raw.resize(static_cast<size_t>(n_move) * row_bytes);
      uint8_t* base = static_cast<uint8_t*>(r->base);
      r->backend->read(raw.data(), base + static_cast<size_t>(p1) * row_bytes, raw.size());
      if (!is_value) {
        for (int t = 0; t < n_move; ++t) {
          uint8_t* rp = raw.data() + static_cast<size_t>(t) * row_bytes;
          if (type == DType::F16) {
            const uint16_t* h = reinterpret_cast<const uint16_t*>(rp);
            for (size_t i = 0; i < row.size(); ++i) row[i] = fp16_to_fp32(h[i]);
          } else {
            std::memcpy(row.data(), rp, row_bytes);
          }
          for (int64_t h = 0; h < hp.n_head_kv; ++h) {
            float* x = row.data() + h * hd;
            for (int i = 0; i < n_rot / 2; ++i) {
              const int64_t i0 = neox ? i : 2 * i;
              const int64_t i1 = neox ? i + n_rot / 2 : 2 * i + 1;
              const float x0 = x[i0], x1 = x[i1];
              const float c = cos_t[static_cast<size_t>(i)], s = sin_t[static_cast<size_t>(i)];
              x[i0] = std::fma(x0, c, -(x1 * s));
              x[i1] = std::fma(x0, s, x1 * c);
            }
          }
          if (type == DType::F16) {
            uint16_t* h = reinterpret_cast<uint16_t*>(rp);
            for (size_t i = 0; i < row.size(); ++i) h[i] = fp32_to_fp16(row[i]);
          } else {
            std::memcpy(rp, row.data(), row_bytes);
          }
        }
      }
      r->backend->write(base + static_cast<size_t>(p0) * row_bytes, raw.data(), raw.size());
    }
  }
  n_past_ -= d;
  return Status::ok();
}

Expected<std::vector<uint8_t>> Session::kv_export() const {
  std::vector<uint8_t> out(static_cast<size_t>(n_past_) * kv_row_bytes());
  if (n_past_ == 0) return out;
  MINFER_TRY(for_each_kv_slice(n_past_, [&](const Scheduler::RegionView& r, size_t off, size_t n) {
    r.backend->read(out.data() + off, r.base, n);
  }));
  return out;
}

Status Session::kv_import(std::span<const uint8_t> bytes, int n_past) {
  if (n_past < 0 || n_past > n_ctx_) return make_error("session: cannot import {} positions into n_ctx {}", n_past, n_ctx_);
  if (bytes.size() != static_cast<size_t>(n_past) * kv_row_bytes())
    return make_error("session: KV import of {} bytes, expected {} ({} positions x {} bytes)", bytes.size(),
                      static_cast<size_t>(n_past) * kv_row_bytes(), n_past, kv_row_bytes());
  auto pg = prepared(1, 1);  // creates the cache regions on a fresh session
  if (!pg) return pg.error();
  MINFER_TRY(for_each_kv_slice(n_past, [&](const Scheduler::RegionView& r, size_t off, size_t n) {
    r.backend->write(r.base, bytes.data() + off, n);
  }));
  n_past_ = n_past;
  return Status::ok();
}

}  // namespace minfer
