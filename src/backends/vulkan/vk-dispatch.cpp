#include "backends/vulkan/vk-dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>

namespace minfer::vulkan {
namespace {

// One node's dispatch being set up: its tensors bound (s0..s3 its sources, s0 standing in for
// those it lacks; d its output), and what its kernel's function below fills.
struct Args {
  Recording& rec;
  const RopeOffsets& rope_off;
  int id;
  const Node& n;
  const Pipeline& pl;
  bool chunked;  // a matmul weight bound in row ranges (s0: x stands in)
  Bound s0, s1, s2, s3, d;
  VkDescriptorBufferInfo bi[kBindings];
  uint32_t pc[kPushWords] = {};
  uint32_t groups = 0;
  bool recorded = false;  // dispatched already (a matmul in row ranges)

  const Node& src(size_t i) const { return rec.g.nodes[static_cast<size_t>(n.src[i])]; }
  uint32_t n_el() const { return static_cast<uint32_t>(n.n_elements()); }
};

// The kernel that runs op; Kernel::kCount where none does.
Kernel kernel_for(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kMul: return Kernel::kBinary;
    case Op::kScale: return Kernel::kScale;
    case Op::kRmsNorm:
    case Op::kRmsNormMul: return Kernel::kRmsNorm;
    case Op::kSilu:
    case Op::kSwiglu:
    case Op::kGelu:
    case Op::kGeglu:
    case Op::kSoftcap: return Kernel::kUnary;
    case Op::kRope: return Kernel::kRope;
    case Op::kMatmul:
    case Op::kMatmulId: return Kernel::kMatmul;
    case Op::kGetRows: return Kernel::kGetRows;
    case Op::kKvStore: return Kernel::kKvStore;
    case Op::kAttn: return Kernel::kAttn;
    case Op::kTopK:
    case Op::kMoeWeights:
    case Op::kMoeSum: return Kernel::kMoe;
    case Op::kHadamard: return Kernel::kHadamard;
    default: return Kernel::kCount;
  }
}

Status binary(Args& a) {
  const uint32_t v[] = {a.n_el(), static_cast<uint32_t>(a.n.ne[0]), static_cast<uint32_t>(a.src(1).n_rows()),
                        a.n.op == Op::kAdd ? 0u : 1u, a.s0.elem, a.s1.elem, a.d.elem};
  std::memcpy(a.pc, v, sizeof(v));
  a.groups = (a.n_el() + 255) / 256;
  return {};
}

Status scale(Args& a) {
  float c = a.n.params.scale;
  a.pc[0] = a.n_el();
  std::memcpy(&a.pc[1], &c, 4);
  a.pc[2] = a.s0.elem;
  a.pc[3] = a.d.elem;
  a.groups = (a.n_el() + 255) / 256;
  return {};
}

Status rms_norm(Args& a) {
  const float eps = a.n.params.eps;
  a.pc[0] = static_cast<uint32_t>(a.n.ne[0]);
  a.pc[1] = static_cast<uint32_t>(a.n.n_rows());
  std::memcpy(&a.pc[2], &eps, 4);
  a.pc[3] = a.n.op == Op::kRmsNormMul ? 1u : 0u;
  a.pc[4] = a.s0.elem;
  a.pc[5] = a.s1.elem;
  a.pc[6] = a.d.elem;
  a.groups = static_cast<uint32_t>(a.n.n_rows());
  return {};
}

Status unary(Args& a) {
  const Op op = a.n.op;
  const bool gelu = op == Op::kGelu || op == Op::kGeglu;
  const float c = a.n.params.scale;
  a.pc[0] = a.n_el();
  a.pc[1] = op == Op::kSoftcap ? 2u : gelu ? 1u : 0u;
  a.pc[2] = op == Op::kSwiglu || op == Op::kGeglu ? 1u : 0u;
  std::memcpy(&a.pc[3], &c, 4);
  a.pc[4] = a.s0.elem;
  a.pc[5] = a.s1.elem;
  a.pc[6] = a.d.elem;
  a.pc[7] = static_cast<uint32_t>(a.n.ne[0]);
  a.groups = (a.n_el() + 255) / 256;
  return {};
}

Status rope(Args& a) {
  const Node& n = a.n;
  const int n_rot = n.params.n_rot;
  const float theta_scale = std::pow(n.params.rope_freq_base, -2.0f / static_cast<float>(n_rot));
  const float freq_scale = n.params.rope_freq_scale;
  a.pc[0] = static_cast<uint32_t>(n.ne[0]);
  a.pc[1] = static_cast<uint32_t>(n.ne[1]);
  a.pc[2] = static_cast<uint32_t>(n.ne[2]);
  a.pc[3] = static_cast<uint32_t>(n_rot);
  a.pc[4] = n.params.rope_mode == RopeMode::kNeox ? 1u : 0u;
  std::memcpy(&a.pc[5], &theta_scale, 4);
  std::memcpy(&a.pc[6], &freq_scale, 4);
  a.pc[7] = n.src.size() > 2 ? 1u : 0u;
  a.pc[8] = a.s0.elem;
  a.pc[9] = a.s1.elem;
  a.pc[10] = a.d.elem;
  a.pc[11] = a.s2.elem;
  a.pc[12] = a.rope_off.at(a.id);
  a.pc[13] = 1u;
  a.bi[4] = {a.rec.m.rope_tab.buffer, 0, VK_WHOLE_SIZE};
  const uint32_t per_head = static_cast<uint32_t>(n_rot / 2 + (n.ne[0] - n_rot));
  a.groups = (per_head * static_cast<uint32_t>(n.ne[1] * n.ne[2]) + 255) / 256;
  return {};
}

// A matmul whose weight is over the storage buffer range: row ranges whose bytes start at
// aligned offsets and fit the range, one dispatch each.
Status matmul_row_ranges(Args& a) {
  VulkanBackend::Impl& m = a.rec.m;
  const Node& wn = a.src(0);
  auto wit = m.weights.find({wn.data, wn.n_bytes()});
  if (wit == m.weights.end()) return make_error("vulkan: node '{}' has no device memory", wn.name);
  auto [wa, woff] = m.resolve(reinterpret_cast<const void*>(wit->second));
  const size_t rb = row_bytes(wn.type, wn.ne[0]);
  size_t per = (m.max_range - m.offset_align) / rb;
  const size_t step = m.offset_align / std::gcd(rb, m.offset_align);  // rows per aligned offset
  per -= per % step;
  if (!wa || woff % m.offset_align != 0 || per == 0)
    return make_error("vulkan {}: weight '{}' ({} bytes) cannot be bound in parts", m.desc.name, wn.name, wn.n_bytes());
  for (size_t r0 = 0; r0 < static_cast<size_t>(wn.ne[1]); r0 += per) {
    const size_t rows = std::min(per, static_cast<size_t>(wn.ne[1]) - r0);
    a.bi[0] = {wa->buffer, woff + r0 * rb, (rows * rb + 3) & ~size_t{3}};
    uint32_t cpc[kPushWords];
    std::memcpy(cpc, a.pc, sizeof(cpc));
    cpc[1] = static_cast<uint32_t>(rows);
    cpc[5] = 0;
    cpc[7] = a.pc[7] + static_cast<uint32_t>(r0);
    cpc[8] = static_cast<uint32_t>((rows + 63) / 64);
    a.rec.dispatch(a.pl, a.bi, cpc, cpc[8] * static_cast<uint32_t>((a.n.n_rows() + 7) / 8));
  }
  a.recorded = true;
  return {};
}

Status matmul(Args& a) {
  const Node& n = a.n;
  const Node& wn = a.src(0);
  uint32_t* pc = a.pc;
  pc[0] = static_cast<uint32_t>(wn.ne[0]);
  pc[1] = static_cast<uint32_t>(wn.ne[1]);
  pc[2] = static_cast<uint32_t>(n.n_rows());
  pc[3] = static_cast<uint32_t>(dequant_type(wn.type));
  pc[4] = static_cast<uint32_t>(row_bytes(wn.type, wn.ne[0]));
  pc[5] = a.s0.elem * 4;
  pc[6] = a.s1.elem;
  pc[7] = a.d.elem;
  pc[8] = static_cast<uint32_t>((wn.ne[1] + 63) / 64);  // row groups
  pc[9] = static_cast<uint32_t>(wn.ne[1]);               // output row stride
  const bool by_id = n.op == Op::kMatmulId;
  if (by_id) {  // slots (j, t) of ids [k, T]; x rows: one per token or per slot
    const Node& xn = a.src(1);
    pc[2] = static_cast<uint32_t>(xn.n_rows());
    pc[10] = 1u;
    pc[11] = static_cast<uint32_t>(n.ne[1]);
    pc[12] = xn.ne[1] == 1 ? 0u : 1u;
    pc[13] = a.s2.elem;
    pc[14] = static_cast<uint32_t>(n.ne[1] * n.ne[2]);
  }
  if (const uint32_t mode = act_round_mode(wn.type); mode != 0) {  // x rounded into the scratch first
    auto ar = a.rec.m.pipeline(Kernel::kActRound);
    if (!ar) return ar.error();
    const Node& xn = a.src(1);
    const uint32_t n_x = static_cast<uint32_t>(xn.n_elements());
    const VkDescriptorBufferInfo sc{a.rec.m.scratch.buffer, 0, xn.n_bytes() * 9 / 8 + 16};
    const VkDescriptorBufferInfo abi[kBindings] = {a.s1.info, a.s1.info, sc, a.s1.info, a.s1.info};
    uint32_t apc[kPushWords] = {n_x, mode, a.s1.elem, 0};
    const uint32_t per = mode <= 2 ? 1 : mode == 4 ? 256 : 32;
    a.rec.dispatch(**ar, abi, apc, (n_x / per + 63) / 64);
    a.bi[1] = sc;
    pc[6] = 0;
  }
  a.groups = pc[8] * (by_id ? pc[14] : static_cast<uint32_t>((n.n_rows() + 7) / 8));
  return a.chunked ? matmul_row_ranges(a) : Status{};
}

Status get_rows(Args& a) {
  const Node& t = a.src(0);
  a.pc[0] = static_cast<uint32_t>(t.ne[0]);
  a.pc[1] = static_cast<uint32_t>(t.n_rows());
  a.pc[2] = static_cast<uint32_t>(a.n.n_rows());
  a.pc[3] = static_cast<uint32_t>(dequant_type(t.type));
  a.pc[4] = static_cast<uint32_t>(row_bytes(t.type, t.ne[0]));
  a.pc[5] = a.s0.elem * 4;
  a.pc[6] = a.s1.elem;
  a.pc[7] = a.d.elem;
  a.groups = (a.n_el() + 255) / 256;
  return {};
}

Status kv_store(Args& a) {
  const Node& c = a.src(0);
  const uint32_t n_tok = static_cast<uint32_t>(a.src(2).ne[0]);
  a.pc[0] = static_cast<uint32_t>(c.ne[0]);
  a.pc[1] = n_tok;
  a.pc[2] = static_cast<uint32_t>(c.n_rows());
  a.pc[3] = static_cast<uint32_t>(dequant_type(c.type));
  a.pc[4] = static_cast<uint32_t>(row_bytes(c.type, c.ne[0]));
  a.pc[5] = a.s1.elem;
  a.pc[6] = a.d.elem * 4;
  a.pc[7] = a.s2.elem;
  const uint32_t units = c.type == DType::F32 ? a.pc[0] : c.type == DType::F16 ? a.pc[0] / 2 : a.pc[0] / 64;
  a.groups = (units * n_tok + 63) / 64;
  return {};
}

Status attn(Args& a) {
  const Node& n = a.n;
  const Node& qn = a.src(0);
  const Node& kn = a.src(1);
  const Node& vn = a.src(2);
  const float softcap = n.params.attn_softcap;
  const float scale = softcap > 0.0f ? n.params.attn_scale / softcap : n.params.attn_scale;
  uint32_t* pc = a.pc;
  pc[0] = static_cast<uint32_t>(qn.ne[0]);
  pc[1] = static_cast<uint32_t>(qn.ne[1]);
  pc[2] = static_cast<uint32_t>(qn.ne[2]);
  pc[3] = static_cast<uint32_t>(n.params.n_head_kv);
  pc[4] = static_cast<uint32_t>(vn.ne[0] / n.params.n_head_kv);
  pc[5] = static_cast<uint32_t>(dequant_type(kn.type));
  pc[6] = static_cast<uint32_t>(row_bytes(kn.type, kn.ne[0]));
  pc[7] = static_cast<uint32_t>(row_bytes(vn.type, vn.ne[0]));
  std::memcpy(&pc[8], &scale, 4);
  std::memcpy(&pc[9], &softcap, 4);
  pc[10] = static_cast<uint32_t>(n.params.attn_window);
  pc[11] = static_cast<uint32_t>(n.params.attn_ring);
  pc[12] = n.params.attn_ranges ? 1u : 0u;
  pc[13] = a.s0.elem;
  pc[14] = a.s1.elem * 4;
  pc[15] = a.s2.elem * 4;
  pc[16] = a.s3.elem;
  pc[17] = a.d.elem;
  a.groups = static_cast<uint32_t>(qn.ne[1] * qn.ne[2]);
  return {};
}

Status moe(Args& a) {
  const Node& n = a.n;
  const Node& a0 = a.src(0);
  a.pc[0] = n.op == Op::kTopK ? 0u : n.op == Op::kMoeWeights ? 1u : 2u;
  a.pc[1] = static_cast<uint32_t>(a0.ne[0]);
  a.pc[2] = static_cast<uint32_t>(n.op == Op::kMoeSum ? a0.ne[1] : n.ne[0]);
  a.pc[3] = static_cast<uint32_t>(n.op == Op::kMoeSum ? a0.ne[2] : a0.n_rows());
  a.pc[4] = n.params.moe_norm ? 1u : 0u;
  a.pc[5] = a.s0.elem;
  a.pc[6] = a.s1.elem;
  a.pc[7] = a.d.elem;
  a.groups = ((n.op == Op::kMoeSum ? a.pc[1] * a.pc[3] : a.pc[3]) + 63) / 64;
  return {};
}

Status hadamard(Args& a) {
  const uint32_t blk = static_cast<uint32_t>(a.n.params.block);
  const float sc = 1.0f / std::sqrt(static_cast<float>(blk));  // the CPU's
  a.pc[0] = blk;
  a.pc[1] = a.n_el() / blk;
  a.pc[2] = a.s0.elem;
  a.pc[3] = a.d.elem;
  std::memcpy(&a.pc[4], &sc, 4);
  a.groups = (a.pc[1] + 63) / 64;
  return {};
}

// Per kernel, in Kernel's order, the function that fills its dispatch; act_round has none (a
// matmul's first step, in matmul()).
using Fill = Status (*)(Args&);
constexpr Fill kFills[] = {binary, scale, rms_norm, unary, rope, matmul, get_rows, kv_store, attn, nullptr, moe, hadamard};
static_assert(std::size(kFills) == static_cast<size_t>(Kernel::kCount));

}  // namespace

Status record_node(Recording& rec, int id, const RopeOffsets& rope_off) {
  const Graph& g = rec.g;
  const Node& n = g.nodes[static_cast<size_t>(id)];
  if (op_is_view(n.op) && n.op != Op::kKvStore) return {};  // reshape: the same bytes
  const Kernel kernel = kernel_for(n.op);
  if (kernel == Kernel::kCount)
    return make_error("vulkan: node '{}': op {} is not supported here", n.name, op_name(n.op));
  VulkanBackend::Impl& m = rec.m;
  auto pl = kernel == Kernel::kMatmul ? m.pipeline(kernel, dequant_type(g.nodes[static_cast<size_t>(n.src[0])].type))
                                      : m.pipeline(kernel);
  if (!pl) return pl.error();
  auto d = rec.bind(id);
  if (!d) return d.error();
  // A matmul weight over the storage buffer range (a large vocabulary's LM head) is bound
  // in row ranges (matmul_row_ranges), one dispatch each.
  const Node& n0 = g.nodes[static_cast<size_t>(n.src[0])];
  const bool chunked = n.op == Op::kMatmul && n0.n_bytes() + m.offset_align > m.max_range;
  auto s0 = chunked ? rec.bind(n.src[1]) : rec.bind(n.src[0]);  // chunked: bound per range; x stands in
  if (!s0) return s0.error();
  auto s1 = n.src.size() > 1 ? rec.bind(n.src[1]) : s0;
  if (!s1) return s1.error();
  auto s2 = n.src.size() > 2 ? rec.bind(n.src[2]) : s0;
  if (!s2) return s2.error();
  auto s3 = n.src.size() > 3 ? rec.bind(n.src[3]) : s0;
  if (!s3) return s3.error();
  Args a{rec, rope_off, id, n, **pl, chunked, *s0, *s1, *s2, *s3, *d, {s0->info, s1->info, d->info, s2->info, s3->info}};
  if (Status s = kFills[static_cast<size_t>(kernel)](a); !s) return s;
  if (!a.recorded) rec.dispatch(a.pl, a.bi, a.pc, a.groups);
  return {};
}

}  // namespace minfer::vulkan
