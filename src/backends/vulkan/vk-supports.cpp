#include <cstddef>
#include <cstdint>

#include "backends/vulkan/vk-device.h"

namespace minfer::vulkan {
namespace {

// The KV cache types the kv_store and attn shaders read and write (their type numbers are
// dequant.glsl's: 0 F32, 1 F16, 2 Q8_0, 3 Q4_0). A cache row is written in whole 32-bit words:
// f16 rows of an even length, quantized rows of whole pairs of blocks.
bool kv_cache_ok(const Node& c) {
  switch (c.type) {
    case DType::F32: return true;
    case DType::F16: return c.ne[0] % 2 == 0;
    case DType::Q8_0:
    case DType::Q4_0: return c.ne[0] % 64 == 0;
    default: return false;
  }
}

}  // namespace

bool VulkanBackend::supports_op(const Graph& g, const Node& n) const {
  auto f32_srcs = [&] {
    if (n.type != DType::F32) return false;
    for (int s : n.src)
      if (g.nodes[static_cast<size_t>(s)].type != DType::F32) return false;
    return true;
  };
  auto src = [&](size_t i) -> const Node& { return g.nodes[static_cast<size_t>(n.src[i])]; };
  if (n.n_elements() >= (int64_t{1} << 31)) return false;  // 32-bit indices in the shaders
  // Every tensor a dispatch binds whole fits one storage-buffer binding (a matmul's weight
  // excepted: bound in row ranges); a matmul's rounded activations too (the scratch).
  const size_t range = impl_->max_range - impl_->offset_align;
  if (!op_is_view(n.op) && n.n_bytes() > range) return false;
  for (size_t i = 0; i < n.src.size(); ++i)
    if (!(n.op == Op::kMatmul && i == 0) && src(i).n_bytes() > range) return false;
  if ((n.op == Op::kMatmul || n.op == Op::kMatmulId) && src(1).n_bytes() * 9 / 8 + 16 > range) return false;
  // Weights the shaders read from their raw bytes (shaders/dequant.glsl), byte offsets in 32 bits.
  auto dequantizes = [](const Node& w) {
    return dequant_type(w.type) >= 0 && w.ne[0] % dtype_info(w.type).block_elems == 0 && w.n_bytes() < (size_t{1} << 32);
  };
  switch (n.op) {
    case Op::kAdd:
    case Op::kMul:
      return f32_srcs() && src(1).ne[0] == n.ne[0] && (src(1).n_rows() == 1 || src(1).n_rows() == n.n_rows());
    case Op::kScale:
    case Op::kRmsNorm:
    case Op::kSilu:
    case Op::kGelu:
    case Op::kSoftcap: return f32_srcs();
    case Op::kSwiglu:
    case Op::kGeglu: return f32_srcs() && src(1).n_elements() == n.n_elements();
    case Op::kMatmul:
      return n.type == DType::F32 && src(1).type == DType::F32 && dequantizes(src(0));
    case Op::kMatmulId:  // the experts' weights bound whole
      return n.type == DType::F32 && src(1).type == DType::F32 && src(2).type == DType::I32 && dequantizes(src(0)) &&
             src(0).n_bytes() + impl_->offset_align <= impl_->max_range;
    case Op::kGetRows:  // rows of a KV cache (a KV move) only where its kv_store can run here too
      return n.type == DType::F32 && src(1).type == DType::I32 && dequantizes(src(0)) &&
             (src(0).op != Op::kKvCache || kv_cache_ok(src(0)));
    case Op::kRope:  // frequency factors read on the host for the angle table: a weight
      return n.type == DType::F32 && src(0).type == DType::F32 && src(1).type == DType::I32 &&
             (n.src.size() < 3 || (src(2).type == DType::F32 && src(2).op == Op::kWeight));
    case Op::kRmsNormMul: return f32_srcs() && src(1).n_elements() == n.ne[0];
    case Op::kKvStore:  // the cache, x f32 [ne0, n] (or [hd, n_head_kv, n]), rows I32 [n]
      return kv_cache_ok(src(0)) && src(1).type == DType::F32 && src(1).n_elements() == src(0).ne[0] * src(2).ne[0] &&
             src(2).type == DType::I32 && n.n_bytes() < (size_t{1} << 32);
    case Op::kReshape: return true;  // a view: nothing to run
    case Op::kTopK: return src(0).type == DType::F32 && n.type == DType::I32 && src(0).ne[0] <= 256 && n.ne[0] <= 8;
    case Op::kMoeWeights:
      return n.type == DType::F32 && src(0).type == DType::F32 && src(1).type == DType::I32 &&
             n.ne[0] <= 8;
    case Op::kMoeSum: return f32_srcs();
    case Op::kHadamard: return f32_srcs() && n.params.block >= 1 && n.params.block <= 256;
    case Op::kAttn: {  // q [hd, n_head, n_tokens], K and V (kv_store views of the caches), pos or ranges
      const int64_t hd = src(0).ne[0], n_head = src(0).ne[1], n_kv = n.params.n_head_kv;
      if (n_kv <= 0 || n_head % n_kv != 0 || src(2).ne[0] % n_kv != 0) return false;
      const int64_t hd_v = src(2).ne[0] / n_kv;
      const bool blocks = (src(1).type != DType::Q8_0 && src(1).type != DType::Q4_0) || (hd % 32 == 0 && hd_v % 32 == 0);
      return n.type == DType::F32 && src(0).type == DType::F32 && src(1).type == src(2).type && kv_cache_ok(src(1)) &&
             kv_cache_ok(src(2)) && src(3).type == DType::I32 && hd <= 256 && hd_v <= 256 && blocks &&
             (src(1).type != DType::F16 || (hd % 2 == 0 && hd_v % 2 == 0)) && src(1).n_bytes() < (size_t{1} << 32) &&
             src(2).n_bytes() < (size_t{1} << 32);
    }
    default: return false;
  }
}

}  // namespace minfer::vulkan
