// Row gathers and scatters: get_rows (embedding lookup, tail gather) and kv_store.
#include <cstring>
#include <vector>

#include "backends/cpu/ops.h"
#include "core/status.h"
#include "quant/quant.h"

namespace minfer::cpu {

// dst [ne0, n] f32: row r = table row ids[r], dequantized from the table's type.
void op_get_rows(const OpContext& c, const OpArgs& a) {
  const Node& t = *a.src[0].node;
  const int64_t ne0 = t.ne[0];
  const size_t rb = row_bytes(t.type, ne0);
  const auto* table = static_cast<const uint8_t*>(a.src[0].data);
  const int32_t* ids = a.src[1].i32();
  float* y = a.dst.f32();
  // A tied embedding may live in its repacked form only (repack.h): rebuild the row's bytes.
  const RepackedWeight* rw = nullptr;
  if (c.repacked)
    if (auto it = c.repacked->find(table); it != c.repacked->end()) rw = it->second.get();
  c.pool.parallel_for(a.dst.node->ne[1], [&](int64_t r0, int64_t r1) {
    std::vector<uint8_t> row(rw ? rb : 0);
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t id = ids[r];
      MINFER_ASSERT(id >= 0 && id < t.n_rows());  // callers validate token ids
      if (rw && id < rw->n_groups * kRepackRows) {
        unrepack_row(*rw, id, row.data());
        dequantize_row(t.type, row.data(), y + r * ne0, ne0);
      } else {
        dequantize_row(t.type, table + static_cast<size_t>(id) * rb, y + r * ne0, ne0);
      }
    }
  }, 8);
}

// cache [n_embd_kv, n_ctx] (f16, f32, q8_0 or q4_0): row pos[t] = x row t, converted to the
// cache type (f16 and q8_0 rows as the matmul activations are, k.quantize: llama.cpp's set_rows
// rounds the same way; q4_0 by the reference quantizer). The node aliases the cache
// (a view), so dst == src0.
void op_kv_store(const OpContext& c, const OpArgs& a) {
  const Node& cache = *a.dst.node;
  const int64_t ne0 = cache.ne[0];
  const size_t rb = row_bytes(cache.type, ne0);
  const int64_t n_tokens = a.src[2].node->ne[0];
  const float* x = a.src[1].f32();
  const int32_t* pos = a.src[2].i32();
  auto* base = static_cast<uint8_t*>(a.dst.data);
  c.pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      MINFER_ASSERT(pos[t] >= 0 && pos[t] < cache.ne[1]);  // the session keeps positions < n_ctx
      const float* xr = x + t * ne0;
      uint8_t* yr = base + static_cast<size_t>(pos[t]) * rb;
      switch (cache.type) {
        case DType::F32: std::memcpy(yr, xr, rb); break;
        case DType::F16:
        case DType::Q8_0: c.k.quantize[type_slot(cache.type)](xr, yr, ne0); break;
        default: quantize_row(cache.type, xr, yr, ne0); break;  // Q4_0 (supports() admits no other)
      }
    }
  }, 4);
}

}  // namespace minfer::cpu
