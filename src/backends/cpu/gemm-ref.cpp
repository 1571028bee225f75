// Scalar GEMM kernels over repacked weights (repack.h): the spec of the layout and of the
// vector versions (gemm-avx2.cpp, gemm-avx512.cpp, gemm-float-avx512.cpp), in the Seq order of
// vec-dot-ref.cpp (the float types: one fma chain per row and token, kernels.h).
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels-ref.h"
#include "backends/cpu/repack.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace minfer::cpu::ref {
namespace {

// w(k, r, j) -> the integer weight paired with activation byte x_index(k, j) in chunk k.
template <int kChunks, class Weight, class XIndex>
void gemm_generic(const GemmArgs& a, Weight weight, XIndex x_index) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(a.x + static_cast<size_t>(t) * a.x_row);
      float acc[kRepackRows] = {};
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        const uint8_t* blk = a.w + static_cast<size_t>(g * a.n_blocks + b) * a.block_bytes;
        const auto* d = reinterpret_cast<const uint16_t*>(blk);
        for (int r = 0; r < kRepackRows; ++r) {
          int isum = 0;
          for (int k = 0; k < kChunks; ++k)
            for (int j = 0; j < 4; ++j) isum += weight(blk, k, r, j) * xb[b].qs[x_index(k, j)];
          const float dd = fp16_to_fp32(d[r]) * fp16_to_fp32(xb[b].d);
          acc[r] = std::fma(dd, static_cast<float>(isum), acc[r]);
        }
      }
      std::memcpy(a.y + t * a.y_stride + g * kRepackRows, acc, sizeof acc);
    }
  }
}

}  // namespace

// Chunks 0..3 are the low nibbles (elements 4k+j), 4..7 the high nibbles (16+4k+j).
void gemm_q4_0(const GemmArgs& a) {
  gemm_generic<8>(
      a,
      [](const uint8_t* blk, int k, int r, int j) {
        const uint8_t byte = blk[32 + ((k % 4) * kRepackRows + r) * 4 + j] ^ kRepackQ4Xor;
        return (k < 4 ? (byte & 0x0f) : (byte >> 4)) - 8;
      },
      [](int k, int j) { return (k < 4 ? 4 * k : 16 + 4 * (k - 4)) + j; });
}

void gemm_q5_0(const GemmArgs& a) {
  gemm_generic<8>(
      a,
      [](const uint8_t* blk, int k, int r, int j) {
        const uint8_t byte = blk[32 + ((k % 4) * kRepackRows + r) * 4 + j];
        uint64_t hm;
        std::memcpy(&hm, blk + 32 + 256 + ((k % 4) * 2 + k / 4) * 8, 8);
        const int hi = static_cast<int>((hm >> (4 * r + j)) & 1u);
        return ((k < 4 ? (byte & 0x0f) : (byte >> 4)) | (hi << 4)) - 16;
      },
      [](int k, int j) { return (k < 4 ? 4 * k : 16 + 4 * (k - 4)) + j; });
}

// Q5_1 x Q8_1: unsigned 5-bit weights (no offset); per block s = fma(d_w d_x, isum, s), then
// s = fma(m_w, s_x, s).
void gemm_q5_1(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_1*>(a.x + static_cast<size_t>(t) * a.x_row);
      float acc[kRepackRows] = {};
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        const uint8_t* blk = a.w + static_cast<size_t>(g * a.n_blocks + b) * a.block_bytes;
        const auto* d = reinterpret_cast<const uint16_t*>(blk);
        uint64_t hm[4][2];
        std::memcpy(hm, blk + 64 + 256, sizeof hm);
        for (int r = 0; r < kRepackRows; ++r) {
          int isum = 0;
          for (int k = 0; k < 4; ++k)
            for (int j = 0; j < 4; ++j) {
              const uint8_t byte = blk[64 + (k * kRepackRows + r) * 4 + j];
              const int lo = (byte & 0x0f) | static_cast<int>(((hm[k][0] >> (4 * r + j)) & 1u) << 4);
              const int hi = (byte >> 4) | static_cast<int>(((hm[k][1] >> (4 * r + j)) & 1u) << 4);
              isum += lo * xb[b].qs[4 * k + j] + hi * xb[b].qs[16 + 4 * k + j];
            }
          acc[r] = std::fma(fp16_to_fp32(d[r]) * fp16_to_fp32(xb[b].d), static_cast<float>(isum), acc[r]);
          acc[r] = std::fma(fp16_to_fp32(d[kRepackRows + r]), fp16_to_fp32(xb[b].s), acc[r]);
        }
      }
      std::memcpy(a.y + t * a.y_stride + g * kRepackRows, acc, sizeof acc);
    }
  }
}

// Q4_1 x Q8_1 in the Lanes8 order of vec_dot_q4_1 (llama.cpp's): lane l of a block is the
// integer sum of elements 4l..4l+3 (lanes 0-3: low nibbles of chunk l, 4-7: high nibbles of
// chunk l - 4); acc_l = fma(d_w d_x, lane_l, acc_l); mins += m_w * s_x; the lanes are added as
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), then the mins.
void gemm_q4_1(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_1*>(a.x + static_cast<size_t>(t) * a.x_row);
      for (int r = 0; r < kRepackRows; ++r) {
        float acc[8] = {}, mins = 0.0f;
        for (int64_t b = 0; b < a.n_blocks; ++b) {
          const uint8_t* blk = a.w + static_cast<size_t>(g * a.n_blocks + b) * a.block_bytes;
          const auto* d = reinterpret_cast<const uint16_t*>(blk);
          const float dd = fp16_to_fp32(d[r]) * fp16_to_fp32(xb[b].d);
          for (int l = 0; l < 8; ++l) {
            int lane = 0;
            for (int j = 0; j < 4; ++j) {
              const uint8_t byte = blk[64 + ((l % 4) * kRepackRows + r) * 4 + j];
              lane += (l < 4 ? (byte & 0x0f) : (byte >> 4)) * xb[b].qs[4 * l + j];
            }
            acc[l] = std::fma(dd, static_cast<float>(lane), acc[l]);
          }
          mins += fp16_to_fp32(d[kRepackRows + r]) * fp16_to_fp32(xb[b].s);
        }
        a.y[t * a.y_stride + g * kRepackRows + r] =
            ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) + mins;
      }
    }
  }
}

// IQ4_NL: the Q4_0 layout, each nibble indexing kIq4nlValues (Seq order, as vec_dot_iq4_nl).
void gemm_iq4_nl(const GemmArgs& a) {
  gemm_generic<8>(
      a,
      [](const uint8_t* blk, int k, int r, int j) {
        const uint8_t byte = blk[32 + ((k % 4) * kRepackRows + r) * 4 + j];
        return static_cast<int>(kIq4nlValues[k < 4 ? (byte & 0x0f) : (byte >> 4)]);
      },
      [](int k, int j) { return (k < 4 ? 4 * k : 16 + 4 * (k - 4)) + j; });
}

void gemm_q8_0(const GemmArgs& a) {
  gemm_generic<8>(
      a,
      [](const uint8_t* blk, int k, int r, int j) { return static_cast<int>(static_cast<int8_t>(blk[32 + (k * kRepackRows + r) * 4 + j] ^ kRepackQ8Xor)); },
      [](int k, int j) { return 4 * k + j; });
}



namespace {

// F16 / BF16: a group is w[n_in][16] (element-major, repack.h); x rows are f32 holding the
// activations rounded to the weight type (op_matmul). Per row and token one chain
// s = fma(w_e, x_e, s) over e = 0 .. n_in - 1 (the products of two F16 or two BF16 values are
// exact in f32, so the fma rounds only the sum); no partial sums, so the result of a (row,
// token) pair does not depend on the batch.
template <float (*kLoad)(uint16_t)>
void gemm_u16(const GemmArgs& a) {
  const int64_t n_in = a.n_blocks * 32;
  for (int64_t g = a.g0; g < a.g1; ++g) {
    const auto* w = reinterpret_cast<const uint16_t*>(a.w + static_cast<size_t>(g * a.n_blocks) * a.block_bytes);
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const auto* x = reinterpret_cast<const float*>(a.x + static_cast<size_t>(t) * a.x_row);
      float acc[kRepackRows] = {};
      for (int64_t e = 0; e < n_in; ++e)
        for (int r = 0; r < kRepackRows; ++r) acc[r] = std::fma(kLoad(w[e * kRepackRows + r]), x[e], acc[r]);
      std::memcpy(a.y + t * a.y_stride + g * kRepackRows, acc, sizeof acc);
    }
  }
}

}  // namespace

void gemm_f16(const GemmArgs& a) { gemm_u16<fp16_to_fp32>(a); }
void gemm_bf16(const GemmArgs& a) { gemm_u16<bf16_to_fp32>(a); }

namespace {

// The exact integer sums of one row's super-block: sum_j sc_j * (q . x over sub-block j), and
// for the types with mins sum_j m_j * (sum of x over sub-block j).
struct KSums {
  int q = 0, m = 0;
};

// The K-quant / IQ4_XS GEMMs over Q8_K activations: sums(blk, xb, r) gives row r's integer
// sums of one repacked super-block (d[16] f16, and dmin[16] for kMins, at its start), then the
// float expression of the type's vec_dot, per super-block in order:
//   kMins: s += d_x * (d * sum_q - dmin * sum_m)      else: s += d_x * d * sum_q
template <bool kMins, class Sums>
void gemm_super_blocks(const GemmArgs& a, Sums sums) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t) * a.x_row);
      float acc[kRepackRows] = {};
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        const uint8_t* blk = a.w + static_cast<size_t>(g * a.n_blocks + b) * a.block_bytes;
        const auto* d = reinterpret_cast<const uint16_t*>(blk);
        for (int r = 0; r < kRepackRows; ++r) {
          const KSums k = sums(blk, xb[b], r);
          if constexpr (kMins)
            acc[r] += xb[b].d * (fp16_to_fp32(d[r]) * static_cast<float>(k.q) -
                                 fp16_to_fp32(d[kRepackRows + r]) * static_cast<float>(k.m));
          else
            acc[r] += xb[b].d * fp16_to_fp32(d[r]) * static_cast<float>(k.q);
        }
      }
      std::memcpy(a.y + t * a.y_stride + g * kRepackRows, acc, sizeof acc);
    }
  }
}

}  // namespace

// Q2_K: q = the 2-bit values, sc / m = the low / high nibble of scm[j] (16 sub-blocks of 16).
void gemm_q2_k(const GemmArgs& a) {
  gemm_super_blocks<true>(a, [](const uint8_t* blk, const BlockQ8_K& x, int r) {
    const uint8_t* scm = blk + 64;
    KSums k;
    for (int j = 0; j < 16; ++j) {
      int isum = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) isum += k_repacked_low2(blk + q2_k_q2_offset(j), r, e % 16) * x.qs[e];
      k.q += (scm[j * kRepackRows + r] & 0x0f) * isum;
      k.m += (scm[j * kRepackRows + r] >> 4) * x.bsums[j];
    }
    return k;
  });
}

// Q3_K: (u - 4) with u = low 2 bits + 4 * hmask bit, times (scale_j - 32) (16 sub-blocks of 16).
void gemm_q3_k(const GemmArgs& a) {
  gemm_super_blocks<false>(a, [](const uint8_t* blk, const BlockQ8_K& x, int r) {
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 32);
    KSums k;
    for (int j = 0; j < 16; ++j) {
      int isum = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int u = k_repacked_low2(blk + q3_k_q2_offset(j), r, e % 16) + 4 * k_repacked_bit(blk + q3_k_hm_offset(j / 2), r, e % 32);
        isum += (u - 4) * x.qs[e];
      }
      k.q += sc[j * kRepackRows + r] * isum;
    }
    return k;
  });
}

namespace {

// Q4_K / Q5_K: the nibbles of qs (Q5_K: plus the fifth bit of hm, k_repacked_bit), 8
// sub-blocks of 32 with 6-bit scales sc and mins m unpacked to bytes.
template <bool kQ5>
KSums q45_k_sums(const uint8_t* blk, const BlockQ8_K& x, int r) {
  const uint8_t* sc = blk + 64;
  const uint8_t* mn = blk + 64 + 128;
  KSums k;
  for (int j = 0; j < 8; ++j) {
    const int p = j / 2, shift = 4 * (j % 2);
    int isum = 0;
    for (int c = 0; c < 8; ++c)
      for (int e = 0; e < 4; ++e) {
        int q;
        if constexpr (kQ5)
          q = ((blk[q5_k_qs_offset(p) + (c * kRepackRows + r) * 4 + e] >> shift) & 0x0f) |
              k_repacked_bit(blk + q5_k_hm_offset(j), r, 4 * c + e) << 4;
        else
          q = (blk[64 + 256 + ((p * 8 + c) * kRepackRows + r) * 4 + e] >> shift) & 0x0f;
        isum += q * x.qs[32 * j + 4 * c + e];
      }
    k.q += sc[j * kRepackRows + r] * isum;
    k.m += mn[j * kRepackRows + r] * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
  }
  return k;
}

}  // namespace

void gemm_q4_k(const GemmArgs& a) { gemm_super_blocks<true>(a, q45_k_sums<false>); }
void gemm_q5_k(const GemmArgs& a) { gemm_super_blocks<true>(a, q45_k_sums<true>); }

// Q6_K: (u - 32) times the int8 scale of each group of 16; u read through q6_k_repacked_u.
void gemm_q6_k(const GemmArgs& a) {
  gemm_super_blocks<false>(a, [](const uint8_t* blk, const BlockQ8_K& x, int r) {
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 32);
    KSums k;
    for (int j = 0; j < 16; ++j) {
      int isum = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) isum += (q6_k_repacked_u(blk, r, e) - 32) * x.qs[e];
      k.q += sc[j * kRepackRows + r] * isum;
    }
    return k;
  });
}

// IQ4_XS: table values of the nibbles times ls_s (8 sub-blocks of 32).
void gemm_iq4_xs(const GemmArgs& a) {
  gemm_super_blocks<false>(a, [](const uint8_t* blk, const BlockQ8_K& xb, int r) {
    const auto* ls = reinterpret_cast<const int8_t*>(blk + 32);
    const uint8_t* qs = blk + kIQ4XSRepackedQuants;
    KSums k;
    for (int s = 0; s < 8; ++s) {
      const int8_t* x = xb.qs + 32 * s;
      int isum = 0;
      for (int c = 0; c < 4; ++c)
        for (int j = 0; j < 4; ++j) {
          const uint8_t byte = qs[((s * 4 + c) * kRepackRows + r) * 4 + j];
          isum += kIq4nlValues[byte & 0x0f] * x[4 * c + j] + kIq4nlValues[byte >> 4] * x[16 + 4 * c + j];
        }
      k.q += ls[s * kRepackRows + r] * isum;
    }
    return k;
  });
}

}  // namespace minfer::cpu::ref
