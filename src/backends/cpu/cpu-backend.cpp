#include "backends/cpu/cpu-backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "backends/cpu/ops.h"
#include "quant/quant.h"

namespace minfer::cpu {

CpuBackend::CpuBackend(int n_threads, const CpuKernels* kernels)
    : pool_(n_threads), k_(kernels ? kernels : &cpu_kernels()) {
  const char* p = std::getenv("MINFER_CPU_PROFILE");
  profile_ = p && *p && std::strcmp(p, "0") != 0;
}

std::string CpuBackend::describe() const {
  const CpuKernels* all[8];
  const int n = cpu_kernel_variants(all, 8);
  std::string have;
  for (int i = 0; i < n; ++i) have += (i ? ", " : "") + std::string(all[i]->isa);
  return "cpu: kernels " + std::string(k_->isa) + " (this CPU: " + have + "), " + std::to_string(pool_.n_threads()) +
         " threads";
}

CpuBackend::~CpuBackend() {
  if (!profile_) return;
  double total = 0;
  for (double s : op_seconds_) total += s;
  std::fprintf(stderr, "cpu backend profile (isa %s, %d threads): %.3f s\n", std::string(k_->isa).c_str(),
               pool_.n_threads(), total);
  for (int i = 0; i < kOpCount; ++i) {
    if (op_calls_[static_cast<size_t>(i)] == 0) continue;
    std::fprintf(stderr, "  %-14s %8lld calls %9.3f ms %5.1f%%\n", std::string(op_name(static_cast<Op>(i))).c_str(),
                 static_cast<long long>(op_calls_[static_cast<size_t>(i)]), op_seconds_[static_cast<size_t>(i)] * 1e3,
                 100.0 * op_seconds_[static_cast<size_t>(i)] / (total > 0 ? total : 1));
  }
  for (const auto& [k, v] : matmul_profile_)
    std::fprintf(stderr, "    matmul %-40s %8lld calls %9.3f ms\n", k.c_str(), static_cast<long long>(v.second), v.first * 1e3);
}

bool CpuBackend::supports_op(const Graph& g, const Node& n) const {
  auto src = [&](size_t i) -> const Node& { return g.nodes[static_cast<size_t>(n.src[i])]; };
  auto f32_srcs = [&] {
    for (size_t i = 0; i < n.src.size(); ++i)
      if (src(i).type != DType::F32) return false;
    return n.type == DType::F32;
  };
  switch (n.op) {
    case Op::kInput:
    case Op::kWeight:
    case Op::kKvCache:
    case Op::kReshape:
    case Op::kCopy: return true;
    case Op::kGetRows: return can_dequantize(src(0).type) && src(1).type == DType::I32 && n.type == DType::F32;
    case Op::kMatmul: {
      const DType w = src(0).type;
      if (!matmul_supported(w) || !k_->vec_dot[type_slot(w)]) return false;
      return src(1).type == DType::F32 && src(0).ne[0] % dtype_info(activation_type(w)).block_elems == 0;
    }
    case Op::kMatmulSwiglu: {
      const DType w = src(0).type;
      if (!matmul_supported(w) || !k_->vec_dot[type_slot(w)] || src(1).type != w || src(1).ne != src(0).ne) return false;
      return src(2).type == DType::F32 && src(0).ne[0] % dtype_info(activation_type(w)).block_elems == 0;
    }
    case Op::kMatmulId: {
      const DType w = src(0).type;
      if (!matmul_supported(w) || !k_->vec_dot[type_slot(w)] || src(2).type != DType::I32) return false;
      return src(1).type == DType::F32 && src(0).ne[0] % dtype_info(activation_type(w)).block_elems == 0;
    }
    case Op::kTopK: return src(0).type == DType::F32 && n.type == DType::I32;
    case Op::kMoeWeights: return src(0).type == DType::F32 && src(1).type == DType::I32;
    case Op::kMoeSum: return f32_srcs();
    case Op::kKvStore:
      return kv_cache_type(n.type) && n.ne[0] % dtype_info(n.type).block_elems == 0 && src(1).type == DType::F32 &&
             src(2).type == DType::I32;
    case Op::kAttn: {
      // K and V of one type; a quantized cache's heads are whole blocks (n_embd_kv = n_head_kv * hd)
      const int64_t blk = dtype_info(src(1).type).block_elems;
      const bool caches = kv_cache_type(src(1).type) && src(2).type == src(1).type && src(0).ne[0] % blk == 0 &&
                          (src(2).ne[0] / n.params.n_head_kv) % blk == 0;
      return caches && src(0).type == DType::F32 && src(0).ne[0] <= kMaxHeadDim &&
             src(2).ne[0] / n.params.n_head_kv <= kMaxHeadDim && src(3).type == DType::I32 &&
             (!n.params.attn_ranges || src(3).ne[0] == 3);
    }
    case Op::kRope:
      return src(0).type == DType::F32 && src(1).type == DType::I32 && n.params.n_rot / 2 <= kMaxHeadDim &&
             (n.src.size() < 3 || src(2).type == DType::F32);
    case Op::kRmsNorm:
    case Op::kRmsNormMul:
    case Op::kAdd:
    case Op::kMul:
    case Op::kSilu:
    case Op::kSwiglu:
    case Op::kGelu:
    case Op::kGeglu:
    case Op::kScale:
    case Op::kSoftcap: return f32_srcs();
    case Op::kHadamard: return f32_srcs() && n.params.block >= 2 && n.ne[0] % n.params.block == 0;
  }
  return false;
}

namespace {
// Buffers from this size up are their own anonymous mappings: zero pages until first written
// (an arena's unused tail and a KV cache's unused positions cost nothing), returned to the
// OS on free, and discard() can drop their pages.
constexpr size_t kMapFrom = size_t{1} << 20;
size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}
size_t mapped_size(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }
}  // namespace

Expected<BackendBuffer> CpuBackend::alloc(size_t bytes) {
  if (bytes >= kMapFrom) {
    void* p = mmap(nullptr, mapped_size(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return make_error("cpu: out of memory mapping {} bytes: {}", bytes, std::strerror(errno));
    return BackendBuffer{p, bytes};
  }
  const size_t size = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, size);
  if (!p) return make_error("cpu: out of memory allocating {} bytes", bytes);
  std::memset(p, 0, size);
  return BackendBuffer{p, bytes};
}

void CpuBackend::free(BackendBuffer b) {
  if (b.size >= kMapFrom)
    munmap(b.base, mapped_size(b.size));
  else
    std::free(b.base);
}

void CpuBackend::discard(BackendBuffer b) {
  // Small buffers live in the malloc heap and are not worth a system call.
  if (b.size >= kMapFrom) madvise(b.base, mapped_size(b.size), MADV_DONTNEED);
}

void CpuBackend::write(void* dst, const void* host, size_t n) { std::memcpy(dst, host, n); }
void CpuBackend::read(void* host, const void* src, size_t n) { std::memcpy(host, src, n); }

Status CpuBackend::prepare(const Graph& g, std::span<const int> nodes) {
  size_t need = 0;
  std::unordered_set<const void*> read_elsewhere;  // weights read by ops that need the GGUF bytes
  for (const Node& n : g.nodes)
    if (!n.dead && n.op != Op::kMatmul && n.op != Op::kMatmulSwiglu && n.op != Op::kMatmulId && n.op != Op::kGetRows)
      for (int s : n.src)
        if (g.nodes[static_cast<size_t>(s)].op == Op::kWeight) read_elsewhere.insert(g.nodes[static_cast<size_t>(s)].data);
  std::vector<const Node*> dense;  // 2-D matmul weights to repack, each once
  std::unordered_set<const void*> queued;
  for (int id : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    const Node* s0 = n.src.size() > 0 ? &g.nodes[static_cast<size_t>(n.src[0])] : nullptr;
    const Node* s1 = n.src.size() > 1 ? &g.nodes[static_cast<size_t>(n.src[1])] : nullptr;
    const Node* s2 = n.src.size() > 2 ? &g.nodes[static_cast<size_t>(n.src[2])] : nullptr;
    need = std::max(need, op_work_size(n, s0, n.op == Op::kMatmulSwiglu ? s2 : s1));
    const bool fused = n.op == Op::kMatmulSwiglu;
    for (const Node* w : {s0, fused ? s1 : nullptr})
      if ((n.op == Op::kMatmul || fused) && w && w->op == Op::kWeight && repack_enabled() && k_->gemm[type_slot(w->type)] &&
          !repacked_.count(w->data) && queued.insert(w->data).second)
        dense.push_back(w);
    // Mixture of experts: each expert's slice [n_in, n_out] of a 3-D weight, repacked like a
    // 2-D weight (op_matmul_id finds it by the slice's address).
    if (n.op == Op::kMatmulId && s0 && s0->op == Op::kWeight && repack_enabled() && k_->gemm[type_slot(s0->type)]) {
      const size_t slice = row_bytes(s0->type, s0->ne[0]) * static_cast<size_t>(s0->ne[1]);
      const auto* base = static_cast<const uint8_t*>(s0->data);
      const bool release = !read_elsewhere.count(s0->data);
      std::vector<std::shared_ptr<const RepackedWeight>> done(static_cast<size_t>(s0->ne[2]));
      pool_.parallel_for(s0->ne[2], [&](int64_t e0, int64_t e1) {  // experts in parallel
        for (int64_t e = e0; e < e1; ++e) {
          const void* p = base + static_cast<size_t>(e) * slice;
          if (!repacked_.count(p)) done[static_cast<size_t>(e)] = repack_weight(s0->type, p, s0->ne[0], s0->ne[1], release);
        }
      }, 1);
      for (int64_t e = 0; e < s0->ne[2]; ++e)
        if (done[static_cast<size_t>(e)]) repacked_.emplace(base + static_cast<size_t>(e) * slice, std::move(done[static_cast<size_t>(e)]));
    }
  }
  // The 2-D weights on every thread, each taking the next weight: at load, most of the time
  // goes to faulting in the copy's fresh pages, which the threads then do side by side.
  std::vector<std::shared_ptr<const RepackedWeight>> done(dense.size());
  std::atomic<size_t> next{0};
  pool_.parallel_for(pool_.n_threads(), [&](int64_t, int64_t) {
    for (size_t i; (i = next.fetch_add(1)) < dense.size();) {
      const Node* w = dense[i];
      done[i] = repack_weight(w->type, w->data, w->ne[0], w->ne[1], !read_elsewhere.count(w->data));
    }
  }, 1);
  for (size_t i = 0; i < dense.size(); ++i)
    if (done[i]) repacked_.emplace(dense[i]->data, std::move(done[i]));
  if (need > work_.size()) work_.resize(need);
  return Status::ok();
}

Status CpuBackend::compute(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs) {
  WorkActivations held;  // what a matmul left converted in work_ (nothing at the start)
  OpContext ctx{pool_, *k_, work_.data(), work_.size(), &repacked_, &rope_, &held};
  auto args_of = [&](int id) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    OpArgs a;
    a.dst = {&n, addrs[static_cast<size_t>(id)]};
    MINFER_ASSERT(n.src.size() <= 4);
    for (size_t i = 0; i < n.src.size(); ++i)
      a.src[i] = {&g.nodes[static_cast<size_t>(n.src[i])], addrs[static_cast<size_t>(n.src[i])]};
    return a;
  };
  for (size_t k = 0; k < nodes.size(); ++k) {
    const int id = nodes[k];
    const Node& n = g.nodes[static_cast<size_t>(id)];
    const OpArgs a = args_of(id);
    // Consecutive decode matmuls of one tensor (a layer's q, k, v) run as one job. They are
    // independent (each reads the tensor and its weight), and all their outputs are live
    // together, so running them at once writes nothing another node still needs.
    if (n.op == Op::kMatmul) {
      OpArgs run[8] = {a};
      size_t len = 1;
      while (len < 8 && k + len < nodes.size()) {
        const Node& m = g.nodes[static_cast<size_t>(nodes[k + len])];
        if (m.op != Op::kMatmul || m.src[1] != n.src[1]) break;
        run[len] = args_of(nodes[k + len]);
        ++len;
      }
      if (len > 1 && can_join_matmuls(ctx, {run, len})) {
        const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
        op_matmuls_joint(ctx, {run, len});
        ++stats_.joint_runs;
        for (size_t i = 0; i < len; ++i)
          if (held.overlaps(run[i].dst.data, run[i].dst.node->n_bytes())) held.valid = false;
        if (profile_) {
          std::string key = "joint:";
          for (size_t i = 0; i < len; ++i) {
            key += ' ';
            key += matmul_key(*run[i].src[0].node);
          }
          record(Op::kMatmul, t0, static_cast<int64_t>(len), key + " rows " + std::to_string(n.ne[1]));
        }
        k += len - 1;
        continue;
      }
    }
    const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    switch (n.op) {
      case Op::kGetRows: op_get_rows(ctx, a); break;
      case Op::kKvStore: op_kv_store(ctx, a); break;
      case Op::kRmsNorm: op_rms_norm(ctx, a); break;
      case Op::kRmsNormMul: op_rms_norm_mul(ctx, a); break;
      case Op::kAdd: op_add(ctx, a); break;
      case Op::kMul: op_mul(ctx, a); break;
      case Op::kSilu: op_silu(ctx, a); break;
      case Op::kSwiglu: op_swiglu(ctx, a); break;
      case Op::kGelu: op_gelu(ctx, a); break;
      case Op::kGeglu: op_geglu(ctx, a); break;
      case Op::kScale: op_scale(ctx, a); break;
      case Op::kSoftcap: op_softcap(ctx, a); break;
      case Op::kHadamard: op_hadamard(ctx, a); break;
      case Op::kTopK: op_top_k(ctx, a); break;
      case Op::kMoeWeights: op_moe_weights(ctx, a); break;
      case Op::kMatmulId: op_matmul_id(ctx, a); break;
      case Op::kMoeSum: op_moe_sum(ctx, a); break;
      case Op::kMatmul: op_matmul(ctx, a); break;
      case Op::kMatmulSwiglu: op_matmul_swiglu(ctx, a); break;
      case Op::kRope: op_rope(ctx, a); break;
      case Op::kAttn: op_attn(ctx, a); break;
      case Op::kReshape: break;  // a view: same bytes
      case Op::kInput:
      case Op::kWeight:
      case Op::kKvCache:
      case Op::kCopy: return make_error("cpu: node '{}' ({}) is not executable here", n.name, op_name(n.op));
    }
    // The converted activations stay valid while their source bytes and the work buffer do.
    // Matmuls keep `held` themselves (a new conversion replaces it); views write nothing; any
    // other op might use the work buffer. And nothing may have written over the source.
    const bool keeps = n.op == Op::kMatmul || n.op == Op::kMatmulSwiglu || op_is_view(n.op);
    if (!keeps || held.overlaps(a.dst.data, n.n_bytes())) held.valid = false;
    if (profile_) {
      std::string key;
      if (n.op == Op::kMatmul || n.op == Op::kMatmulSwiglu) {
        const Node& w = g.nodes[static_cast<size_t>(n.src[0])];
        key = std::string(n.op == Op::kMatmulSwiglu ? "swiglu " : "") + matmul_key(w) + " rows " +
              std::to_string(n.ne[1]) + (repacked_.count(w.data) ? " repacked" : "");
      }
      record(n.op, t0, 1, key);
    }
  }
  stats_.reused_conversions += held.reuses;
  return Status::ok();
}

std::string CpuBackend::matmul_key(const Node& w) {
  return std::string(dtype_name(w.type)) + " " + std::to_string(w.ne[0]) + "x" + std::to_string(w.ne[1]);
}

void CpuBackend::record(Op op, std::chrono::steady_clock::time_point t0, int64_t calls, const std::string& matmul) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  op_seconds_[static_cast<size_t>(op)] += s;
  op_calls_[static_cast<size_t>(op)] += calls;
  if (!matmul.empty()) {
    auto& e = matmul_profile_[matmul];
    e.first += s;
    ++e.second;
  }
}

}  // namespace minfer::cpu
