// Builder helpers: each call appends one node (with its stable name) and returns its id.
// Shape rules are asserted: a mismatch here is a bug in a model builder, since models validate
// their tensors at load.
//
//   GraphBuilder b;
//   int ids = b.input("inp_tokens", DType::I32, {n_tokens});
//   int emb = b.weight("token_embd.weight", t.type, {n_embd, n_vocab}, t.data);
//   int x = b.get_rows("inp_embd", emb, ids);                      // [n_embd, n_tokens]
//   int n = b.rms_norm_mul("blk.0.attn_norm", x, b.weight(...), eps);
//   Graph g = b.finish({logits});
#pragma once

#include <initializer_list>
#include <string>

#include "graph/graph.h"

namespace minfer {

// A shape written as {ne0, ne1, ...}; missing trailing dims are 1.
struct Dims {
  Shape ne;
  Dims(std::initializer_list<int64_t> d);  // NOLINT(implicit)
  Dims(const Shape& s) : ne(s) {}          // NOLINT(implicit)
};

class GraphBuilder {
 public:
  int input(std::string name, DType type, Dims ne);
  int weight(std::string name, DType type, Dims ne, const void* data);
  // One layer's persistent K (is_value = false) or V region: [n_embd_kv, n_ctx] of `type`.
  int kv_cache(std::string name, int layer, bool is_value, DType type, int64_t n_embd_kv, int64_t n_ctx);

  int get_rows(std::string name, int table, int ids);            // [table.ne0, ids.ne0] f32
  int rms_norm(std::string name, int x, float eps);
  int rms_norm_mul(std::string name, int x, int w, float eps);  // the fused form
  int add(std::string name, int a, int b);
  int mul(std::string name, int a, int b);
  int silu(std::string name, int x);
  int swiglu(std::string name, int gate, int up);               // the fused form
  int gelu(std::string name, int x);                             // tanh approximation
  int geglu(std::string name, int gate, int up);                 // the fused gelu(gate) * up
  int scale(std::string name, int x, float c);                   // x * c
  // Each run of n values (n a power of two dividing ne[0]) times the orthonormal n x n
  // Walsh-Hadamard matrix H (H = H^T = H^-1): the rotation of a quantized KV cache.
  int hadamard(std::string name, int x, int n);
  int softcap(std::string name, int x, float c);                 // c * tanh(x / c)
  // Mixture of experts (ops.h): x [n, T] -> I32 [k, T], the k largest of each row, largest first.
  int top_k(std::string name, int x, int k);
  // logits [n_expert, T], ids I32 [k, T] -> [k, T]: softmax over each logits row taken at the
  // ids; divided by their sum when `norm` (Mixtral, Qwen3-MoE).
  int moe_weights(std::string name, int logits, int ids, bool norm);
  // w [n_in, n_out, n_expert], x [n_in, 1 or k, T], ids I32 [k, T] -> [n_out, k, T]: slot (j, t)
  // is w[ids[j][t]] times x's row (0 or j, t).
  int matmul_id(std::string name, int w, int x, int ids);
  // experts [n, k, T], weights [k, T] -> [n, T]: the weighted sum over j in order.
  int moe_sum(std::string name, int experts, int weights);
  int matmul(std::string name, int w, int x);                    // w [n_in, n_out], x [n_in, ...]
  // x [hd, n_head, n_tokens], pos I32 [n_tokens]; rotates the first n_rot dims of each head.
  // freq_factors (optional, f32 [n_rot/2]) divide each pair's angle (Llama 3 long-context rope).
  int rope(std::string name, int x, int pos, RopeMode mode, int n_rot, float freq_base, float freq_scale,
           int freq_factors = -1);
  // Writes rows of x [n_embd_kv, n_tokens] into cache at rows pos[t]; the node is the cache.
  int kv_store(std::string name, int cache, int x, int pos);
  // How scores are formed: s = q.k * scale, capped to c * tanh(s / c) when softcap = c > 0; a
  // sliding window > 0 keeps only the last `window` positions (the query's own included).
  struct AttnOpts {
    float scale = 1.0f;
    int32_t window = 0;
    float softcap = 0.0f;
    int32_t ring = 0;  // attn_ranges only: rows per sequence of a ring cache (OpParams::attn_ring)
  };
  // q [hd, n_head, n_tokens]; k, v: stored caches; pos I32 [n_tokens]. Query t attends to cache
  // rows 0..pos[t] (the last `window` of them with a window). Output [hd_v * n_head, n_tokens].
  int attn(std::string name, int q, int k, int v, int pos, int n_head_kv, AttnOpts o);
  int attn(std::string name, int q, int k, int v, int pos, int n_head_kv, float scale) {
    return attn(std::move(name), q, k, v, pos, n_head_kv, AttnOpts{scale});
  }
  // Several sequences in one batch: ranges I32 [3, n_tokens] gives, per query t, the first cache
  // row it reads, the number of rows (its own sequence's, causal), and how many query rows its
  // sequence has in this batch (which picks the arithmetic, so a token rounds the same alone or
  // batched with other sequences).
  // A window keeps the last `window` of a token's rows (its sequence's rows are positions in order).
  int attn_ranges(std::string name, int q, int k, int v, int ranges, int n_head_kv, AttnOpts o);
  int attn_ranges(std::string name, int q, int k, int v, int ranges, int n_head_kv, float scale) {
    return attn_ranges(std::move(name), q, k, v, ranges, n_head_kv, AttnOpts{scale});
  }
  int reshape(std::string name, int x, Dims ne);

  const Node& node(int id) const { return g_.nodes[static_cast<size_t>(id)]; }
  Graph finish(std::initializer_list<int> outputs);
  Graph finish(const std::vector<int>& outputs);

 private:
  int attn(std::string name, int q, int k, int v, int pos, int n_head_kv, AttnOpts o, bool check_pos);
  int push(Node n);
  Graph g_;
};

}  // namespace minfer
