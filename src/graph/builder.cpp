#include "graph/builder.h"

#include "core/status.h"

namespace minfer {

Dims::Dims(std::initializer_list<int64_t> d) : ne{1, 1, 1, 1} {
  MINFER_ASSERT(d.size() >= 1 && d.size() <= kMaxDims);
  size_t i = 0;
  for (int64_t x : d) ne[i++] = x;
}

int GraphBuilder::push(Node n) {
  for (int64_t d : n.ne) MINFER_ASSERT(d >= 1);
  for (int s : n.src) MINFER_ASSERT(s >= 0 && s < static_cast<int>(g_.nodes.size()));
  n.id = static_cast<int>(g_.nodes.size());
  g_.nodes.push_back(std::move(n));
  return g_.nodes.back().id;
}

namespace {

Node make(std::string name, Op op, DType type, const Shape& ne, std::vector<int> src) {
  Node n;
  n.name = std::move(name);
  n.op = op;
  n.type = type;
  n.ne = ne;
  n.src = std::move(src);
  return n;
}

Shape with_ne0(Shape s, int64_t ne0) {
  s[0] = ne0;
  return s;
}

}  // namespace

int GraphBuilder::input(std::string name, DType type, Dims ne) {
  const int id = push(make(std::move(name), Op::kInput, type, ne.ne, {}));
  g_.inputs.push_back(id);
  return id;
}

int GraphBuilder::weight(std::string name, DType type, Dims ne, const void* data) {
  Node n = make(std::move(name), Op::kWeight, type, ne.ne, {});
  n.data = data;
  return push(std::move(n));
}

int GraphBuilder::kv_cache(std::string name, int layer, bool is_value, DType type, int64_t n_embd_kv,
                           int64_t n_ctx) {
  MINFER_ASSERT(n_embd_kv % dtype_info(type).block_elems == 0);  // rows of whole blocks
  Node n = make(std::move(name), Op::kKvCache, type, Shape{n_embd_kv, n_ctx, 1, 1}, {});
  n.params.layer = layer;
  n.params.is_value = is_value;
  return push(std::move(n));
}

int GraphBuilder::get_rows(std::string name, int table, int ids) {
  const Node& t = node(table);
  const Node& i = node(ids);
  MINFER_ASSERT(i.type == DType::I32 && i.ne[1] == 1 && t.ne[2] == 1);
  return push(make(std::move(name), Op::kGetRows, DType::F32, Shape{t.ne[0], i.ne[0], 1, 1}, {table, ids}));
}

int GraphBuilder::rms_norm(std::string name, int x, float eps) {
  Node n = make(std::move(name), Op::kRmsNorm, DType::F32, node(x).ne, {x});
  n.params.eps = eps;
  return push(std::move(n));
}

int GraphBuilder::rms_norm_mul(std::string name, int x, int w, float eps) {
  MINFER_ASSERT(node(w).ne[0] == node(x).ne[0] && node(w).n_rows() == 1 && node(w).type == DType::F32);
  Node n = make(std::move(name), Op::kRmsNormMul, DType::F32, node(x).ne, {x, w});
  n.params.eps = eps;
  n.fused = true;
  return push(std::move(n));
}

namespace {
// b broadcasts over a's rows when it is a single row of a's width.
bool broadcastable(const Node& a, const Node& b) {
  return b.type == DType::F32 && b.ne[0] == a.ne[0] && (b.n_rows() == 1 || b.ne == a.ne);
}
}  // namespace

int GraphBuilder::add(std::string name, int a, int b) {
  MINFER_ASSERT(node(a).type == DType::F32 && broadcastable(node(a), node(b)));
  return push(make(std::move(name), Op::kAdd, DType::F32, node(a).ne, {a, b}));
}

int GraphBuilder::mul(std::string name, int a, int b) {
  MINFER_ASSERT(node(a).type == DType::F32 && broadcastable(node(a), node(b)));
  return push(make(std::move(name), Op::kMul, DType::F32, node(a).ne, {a, b}));
}

int GraphBuilder::silu(std::string name, int x) {
  return push(make(std::move(name), Op::kSilu, DType::F32, node(x).ne, {x}));
}

int GraphBuilder::swiglu(std::string name, int gate, int up) {
  MINFER_ASSERT(node(gate).ne == node(up).ne);
  Node n = make(std::move(name), Op::kSwiglu, DType::F32, node(gate).ne, {gate, up});
  n.fused = true;
  return push(std::move(n));
}

int GraphBuilder::gelu(std::string name, int x) {
  return push(make(std::move(name), Op::kGelu, DType::F32, node(x).ne, {x}));
}

int GraphBuilder::geglu(std::string name, int gate, int up) {
  MINFER_ASSERT(node(gate).ne == node(up).ne);
  Node n = make(std::move(name), Op::kGeglu, DType::F32, node(gate).ne, {gate, up});
  n.fused = true;
  return push(std::move(n));
}

int GraphBuilder::scale(std::string name, int x, float c) {
  Node n = make(std::move(name), Op::kScale, DType::F32, node(x).ne, {x});
  n.params.scale = c;
  return push(std::move(n));
}

int GraphBuilder::hadamard(std::string name, int x, int n) {
  MINFER_ASSERT(n >= 2 && (n & (n - 1)) == 0 && node(x).ne[0] % n == 0);
  Node h = make(std::move(name), Op::kHadamard, DType::F32, node(x).ne, {x});
  h.params.block = n;
  return push(std::move(h));
}

int GraphBuilder::softcap(std::string name, int x, float c) {
  MINFER_ASSERT(c > 0.0f);
  Node n = make(std::move(name), Op::kSoftcap, DType::F32, node(x).ne, {x});
  n.params.scale = c;
  return push(std::move(n));
}

int GraphBuilder::top_k(std::string name, int x, int k) {
  const Node& xn = node(x);
  MINFER_ASSERT(xn.type == DType::F32 && k >= 1 && k <= xn.ne[0] && xn.ne[2] == 1);
  Node n = make(std::move(name), Op::kTopK, DType::I32, Shape{k, xn.ne[1], 1, 1}, {x});
  n.params.top_k = k;
  return push(std::move(n));
}

int GraphBuilder::moe_weights(std::string name, int logits, int ids, bool norm) {
  const Node& l = node(logits);
  const Node& i = node(ids);
  MINFER_ASSERT(l.type == DType::F32 && i.type == DType::I32 && i.ne[1] == l.ne[1] && l.ne[2] == 1);
  Node n = make(std::move(name), Op::kMoeWeights, DType::F32, i.ne, {logits, ids});
  n.params.moe_norm = norm;
  return push(std::move(n));
}

int GraphBuilder::matmul_id(std::string name, int w, int x, int ids) {
  const Node& wn = node(w);
  const Node& xn = node(x);
  const Node& in = node(ids);
  MINFER_ASSERT(wn.ne[0] == xn.ne[0] && wn.ne[3] == 1 && xn.type == DType::F32 && in.type == DType::I32);
  MINFER_ASSERT(xn.ne[2] == in.ne[1] && (xn.ne[1] == 1 || xn.ne[1] == in.ne[0]) && xn.ne[3] == 1);
  return push(make(std::move(name), Op::kMatmulId, DType::F32, Shape{wn.ne[1], in.ne[0], in.ne[1], 1}, {w, x, ids}));
}

int GraphBuilder::moe_sum(std::string name, int experts, int weights) {
  const Node& e = node(experts);
  const Node& w = node(weights);
  MINFER_ASSERT(e.type == DType::F32 && w.type == DType::F32 && w.ne[0] == e.ne[1] && w.ne[1] == e.ne[2]);
  return push(make(std::move(name), Op::kMoeSum, DType::F32, Shape{e.ne[0], e.ne[2], 1, 1}, {experts, weights}));
}

int GraphBuilder::matmul(std::string name, int w, int x) {
  const Node& wn = node(w);
  const Node& xn = node(x);
  MINFER_ASSERT(wn.ne[0] == xn.ne[0] && wn.ne[2] == 1 && xn.type == DType::F32);
  return push(make(std::move(name), Op::kMatmul, DType::F32, with_ne0(xn.ne, wn.ne[1]), {w, x}));
}

int GraphBuilder::rope(std::string name, int x, int pos, RopeMode mode, int n_rot, float freq_base,
                       float freq_scale, int freq_factors) {
  const Node& xn = node(x);
  MINFER_ASSERT(node(pos).type == DType::I32 && node(pos).ne[0] == xn.ne[2]);
  MINFER_ASSERT(n_rot > 0 && n_rot % 2 == 0 && n_rot <= xn.ne[0]);
  Node n = make(std::move(name), Op::kRope, DType::F32, xn.ne, {x, pos});
  if (freq_factors >= 0) {
    MINFER_ASSERT(node(freq_factors).type == DType::F32 && node(freq_factors).n_elements() == n_rot / 2);
    n.src.push_back(freq_factors);
  }
  n.params.rope_mode = mode;
  n.params.n_rot = n_rot;
  n.params.rope_freq_base = freq_base;
  n.params.rope_freq_scale = freq_scale;
  return push(std::move(n));
}

int GraphBuilder::kv_store(std::string name, int cache, int x, int pos) {
  const Node& c = node(cache);
  const Node& xn = node(x);
  MINFER_ASSERT(c.op == Op::kKvCache || c.op == Op::kKvStore);
  MINFER_ASSERT(xn.n_elements() == c.ne[0] * node(pos).ne[0] && node(pos).type == DType::I32);
  Node n = make(std::move(name), Op::kKvStore, c.type, c.ne, {cache, x, pos});
  n.params.layer = c.params.layer;
  n.params.is_value = c.params.is_value;
  return push(std::move(n));
}

int GraphBuilder::attn(std::string name, int q, int k, int v, int pos, int n_head_kv, AttnOpts o) {
  return attn(std::move(name), q, k, v, pos, n_head_kv, o, true);
}

int GraphBuilder::attn(std::string name, int q, int k, int v, int pos, int n_head_kv, AttnOpts o, bool check_pos) {
  const Node& qn = node(q);
  const Node& kn = node(k);
  const Node& vn = node(v);
  const int64_t hd = qn.ne[0], n_head = qn.ne[1], n_tokens = qn.ne[2];
  MINFER_ASSERT(n_head_kv > 0 && n_head % n_head_kv == 0);
  MINFER_ASSERT(kn.ne[0] == hd * n_head_kv && vn.ne[0] % n_head_kv == 0 && kn.ne[1] == vn.ne[1]);
  MINFER_ASSERT(!check_pos || (node(pos).type == DType::I32 && node(pos).ne[0] == n_tokens));
  const int64_t hd_v = vn.ne[0] / n_head_kv;
  Node n = make(std::move(name), Op::kAttn, DType::F32, Shape{hd_v * n_head, n_tokens, 1, 1}, {q, k, v, pos});
  n.params.n_head_kv = n_head_kv;
  MINFER_ASSERT(o.window >= 0 && o.softcap >= 0.0f && (!check_pos || o.ring == 0));
  n.params.attn_scale = o.scale;
  n.params.attn_window = o.window;
  n.params.attn_softcap = o.softcap;
  n.params.layer = kn.params.layer;
  return push(std::move(n));
}

int GraphBuilder::attn_ranges(std::string name, int q, int k, int v, int ranges, int n_head_kv, AttnOpts o) {
  const Node& rn = node(ranges);
  const int64_t n_tokens = node(q).ne[2];
  MINFER_ASSERT(rn.type == DType::I32 && rn.ne[0] == 3 && rn.ne[1] == n_tokens);
  // Built as the single-sequence node over a stand-in pos (same checks), then re-pointed.
  const int id = attn(std::move(name), q, k, v, q, n_head_kv, o, /*check_pos=*/false);
  Node& n = g_.nodes[static_cast<size_t>(id)];
  n.src[3] = ranges;
  n.params.attn_ranges = true;
  // A ring holds every key of a window at once (the window plus the batch's new rows).
  MINFER_ASSERT(o.ring >= 0 && (o.ring == 0 || (o.window > 0 && o.ring >= o.window)));
  n.params.attn_ring = o.ring;
  return id;
}

int GraphBuilder::reshape(std::string name, int x, Dims ne) {
  Node n = make(std::move(name), Op::kReshape, node(x).type, ne.ne, {x});
  MINFER_ASSERT(n.n_elements() == node(x).n_elements());
  MINFER_ASSERT(n.ne[0] % dtype_info(n.type).block_elems == 0);
  return push(std::move(n));
}

Graph GraphBuilder::finish(std::initializer_list<int> outputs) {
  return finish(std::vector<int>(outputs));
}

Graph GraphBuilder::finish(const std::vector<int>& outputs) {
  for (int o : outputs) MINFER_ASSERT(o >= 0 && o < static_cast<int>(g_.nodes.size()));
  g_.outputs = outputs;
  Graph g = std::move(g_);
  g_ = Graph{};
  return g;
}

}  // namespace minfer
