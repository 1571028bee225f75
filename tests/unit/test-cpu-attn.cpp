// RoPE (NORM and NEOX, scaling, frequency factors), causal GQA attention over f32, f16, q8_0
// and q4_0 caches, and the Hadamard rotation against naive float64 references.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "backends/cpu/ops.h"
#include "backends/cpu/rope-angles.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace minfer::cpu {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

Node make_node(Op op, DType t, Shape ne) {
  Node n;
  n.op = op;
  n.type = t;
  n.ne = ne;
  return n;
}

// Naive rope of one head vector: pairs (i0, i1) rotated by theta_i.
std::vector<double> rope_ref(const float* x, int64_t hd, int n_rot, bool neox, int pos, double base, double scale,
                             const float* factors) {
  std::vector<double> y(x, x + hd);
  for (int i = 0; i < n_rot / 2; ++i) {
    double th = pos * std::pow(base, -2.0 * i / n_rot) * scale;
    if (factors) th /= factors[i];
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
    y[static_cast<size_t>(i0)] = x[i0] * std::cos(th) - x[i1] * std::sin(th);
    y[static_cast<size_t>(i1)] = x[i0] * std::sin(th) + x[i1] * std::cos(th);
  }
  return y;
}

std::vector<float> run_rope(const std::vector<float>& x, Shape ne, const std::vector<int32_t>& pos, RopeMode mode,
                            int n_rot, float base, float scale, const std::vector<float>* factors,
                            RopeAngles* angles = nullptr) {
  ThreadPool pool(2);
  Node xn = make_node(Op::kInput, DType::F32, ne);
  Node pn = make_node(Op::kInput, DType::I32, {ne[2], 1, 1, 1});
  Node fn = make_node(Op::kWeight, DType::F32, {n_rot / 2, 1, 1, 1});
  Node yn = make_node(Op::kRope, DType::F32, ne);
  yn.params.rope_mode = mode;
  yn.params.n_rot = n_rot;
  yn.params.rope_freq_base = base;
  yn.params.rope_freq_scale = scale;
  std::vector<float> y(x.size());
  OpArgs a;
  a.dst = {&yn, y.data()};
  a.src[0] = {&xn, const_cast<float*>(x.data())};
  a.src[1] = {&pn, const_cast<int32_t*>(pos.data())};
  if (factors) a.src[2] = {&fn, const_cast<float*>(factors->data())};
  op_rope(OpContext{pool, cpu_kernels(), nullptr, 0, nullptr, angles}, a);
  return y;
}

TEST(CpuRope, NormAndNeoxMatchTheFormula) {
  const int64_t hd = 64, n_head = 3, n_tok = 4;
  const std::vector<float> x = randn(static_cast<size_t>(hd * n_head * n_tok), 1);
  const std::vector<int32_t> pos = {0, 1, 17, 300};
  const std::vector<float> factors = [] {
    std::vector<float> f(16);
    for (size_t i = 0; i < f.size(); ++i) f[i] = 1.0f + static_cast<float>(i) * 0.5f;
    return f;
  }();
  struct Case {
    RopeMode mode;
    int n_rot;
    float scale;
    bool factors;
  };
  for (const Case c : {Case{RopeMode::kNorm, 64, 1.0f, false}, Case{RopeMode::kNeox, 64, 1.0f, false},
                       Case{RopeMode::kNorm, 32, 0.25f, true}, Case{RopeMode::kNeox, 32, 1.0f, true}}) {
    const auto y = run_rope(x, {hd, n_head, n_tok, 1}, pos, c.mode, c.n_rot, 10000.0f, c.scale,
                            c.factors ? &factors : nullptr);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t h = 0; h < n_head; ++h) {
        const size_t off = static_cast<size_t>((t * n_head + h) * hd);
        const auto want = rope_ref(x.data() + off, hd, c.n_rot, c.mode == RopeMode::kNeox, pos[static_cast<size_t>(t)],
                                   10000.0, c.scale, c.factors ? factors.data() : nullptr);
        for (int64_t i = 0; i < hd; ++i)
          ASSERT_NEAR(y[off + static_cast<size_t>(i)], want[static_cast<size_t>(i)], 2e-4)
              << "mode " << int(c.mode) << " t " << t << " i " << i;
      }
  }
}

// NEOX on x equals NORM on x with its halves interleaved: the two modes differ only in pairing.
TEST(CpuRope, NeoxIsNormOnInterleavedDims) {
  const int64_t hd = 16;
  const std::vector<float> x = randn(static_cast<size_t>(hd), 2);
  std::vector<float> inter(static_cast<size_t>(hd));
  for (int64_t i = 0; i < hd / 2; ++i) {
    inter[static_cast<size_t>(2 * i)] = x[static_cast<size_t>(i)];
    inter[static_cast<size_t>(2 * i + 1)] = x[static_cast<size_t>(i + hd / 2)];
  }
  const auto neox = run_rope(x, {hd, 1, 1, 1}, {7}, RopeMode::kNeox, 16, 10000.0f, 1.0f, nullptr);
  const auto norm = run_rope(inter, {hd, 1, 1, 1}, {7}, RopeMode::kNorm, 16, 10000.0f, 1.0f, nullptr);
  for (int64_t i = 0; i < hd / 2; ++i) {
    EXPECT_EQ(neox[static_cast<size_t>(i)], norm[static_cast<size_t>(2 * i)]);
    EXPECT_EQ(neox[static_cast<size_t>(i + hd / 2)], norm[static_cast<size_t>(2 * i + 1)]);
  }
  // And the two modes do differ on the same input.
  const auto norm_x = run_rope(x, {hd, 1, 1, 1}, {7}, RopeMode::kNorm, 16, 10000.0f, 1.0f, nullptr);
  EXPECT_NE(norm_x, neox);
}

// rope_row on every ISA gives the reference's bits: both pairings, vector bodies and scalar
// tails (half = 3, 5, 13), in place and not.
TEST(CpuRope, RopeRowIsBitIdenticalAcrossIsas) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (int64_t half : {64, 48, 32, 13, 5, 3}) {
    const std::vector<float> x = randn(static_cast<size_t>(2 * half), 5, 3.0f);
    const std::vector<float> cos = randn(static_cast<size_t>(half), 6), sin = randn(static_cast<size_t>(half), 7);
    for (bool neox : {true, false}) {
      std::vector<float> want(x.size());
      tables[0]->rope_row(half, neox, cos.data(), sin.data(), x.data(), want.data());
      for (int t = 0; t < n_tables; ++t) {
        std::vector<float> got(x.size()), in_place = x;
        tables[t]->rope_row(half, neox, cos.data(), sin.data(), x.data(), got.data());
        tables[t]->rope_row(half, neox, cos.data(), sin.data(), in_place.data(), in_place.data());
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << tables[t]->isa << " half " << half << " neox " << neox << " i " << i;
          ASSERT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(want[i])) << tables[t]->isa;
        }
      }
    }
  }
}

// A backend's angle cache serves a rope the bits it would compute itself, and only for the same
// positions and parameters: a changed position, base, scale or factor value recomputes.
TEST(CpuRope, AngleCacheServesOnlyItsOwnPositionsAndParameters) {
  const int64_t hd = 64, n_head = 2, n_tok = 3;
  const std::vector<float> x = randn(static_cast<size_t>(hd * n_head * n_tok), 8);
  std::vector<float> f1(32, 1.5f), f2(32, 1.5f);
  f2[9] = 2.0f;  // same size, one value differs
  RopeAngles cache;
  struct Case {
    std::vector<int32_t> pos;
    float base, scale;
    const std::vector<float>* factors;
  };
  const std::vector<Case> cases = {{{4, 5, 6}, 10000.0f, 1.0f, nullptr}, {{4, 5, 6}, 10000.0f, 1.0f, nullptr},
                                   {{4, 5, 7}, 10000.0f, 1.0f, nullptr}, {{4, 5, 7}, 500000.0f, 1.0f, nullptr},
                                   {{4, 5, 7}, 500000.0f, 0.5f, nullptr}, {{4, 5, 7}, 500000.0f, 0.5f, &f1},
                                   {{4, 5, 7}, 500000.0f, 0.5f, &f2},    {{4, 5, 6}, 10000.0f, 1.0f, nullptr}};
  for (const Case& c : cases) {
    const auto fresh = run_rope(x, {hd, n_head, n_tok, 1}, c.pos, RopeMode::kNeox, 64, c.base, c.scale, c.factors);
    const auto cached =
        run_rope(x, {hd, n_head, n_tok, 1}, c.pos, RopeMode::kNeox, 64, c.base, c.scale, c.factors, &cache);
    // The rope left its table in the cache (the next case with these inputs is served from it).
    EXPECT_NE(cache.find({64, c.base, c.scale, c.factors ? c.factors->data() : nullptr}, c.pos.data(), n_tok), nullptr);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(cached[i]), std::bit_cast<uint32_t>(fresh[i]))
          << "pos " << c.pos[2] << " base " << c.base << " scale " << c.scale << " i " << i;
  }
}

struct AttnCase {
  int64_t hd, n_head, n_head_kv, n_ctx;
  std::vector<int32_t> pos;
  DType cache;
  float score_scale;  // inflates q so softmax is peaked (online-softmax rescaling path)
  int32_t window = 0;    // sliding window (0: none)
  float softcap = 0.0f;  // score soft-cap (0: none)
};

// Runs op_attn; returns y [hd * n_head, n_tokens] (and checks for overruns).
std::vector<float> check_attention(const AttnCase& c, const CpuKernels& kern) {
  ThreadPool pool(2);
  const int64_t n_tok = static_cast<int64_t>(c.pos.size());
  const int64_t row = c.n_head_kv * c.hd;
  std::vector<float> q = randn(static_cast<size_t>(c.hd * c.n_head * n_tok), 3, c.score_scale);
  const std::vector<float> k = randn(static_cast<size_t>(row * c.n_ctx), 4), v = randn(static_cast<size_t>(row * c.n_ctx), 5);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = fp32_to_fp16(k[i]);
    v16[i] = fp32_to_fp16(v[i]);
  }
  const bool f16 = c.cache == DType::F16;
  // A quantized cache: rows of q8_0 / q4_0 blocks; the reference reads them dequantized.
  const bool quant = c.cache == DType::Q8_0 || c.cache == DType::Q4_0;
  const size_t rb = row_bytes(c.cache, row);
  std::vector<uint8_t> kq(quant ? rb * static_cast<size_t>(c.n_ctx) : 0), vq(kq.size());
  std::vector<float> kd(quant ? k.size() : 0), vd(kd.size());
  for (int64_t r = 0; quant && r < c.n_ctx; ++r) {
    const size_t o = static_cast<size_t>(r * row);
    quantize_row(c.cache, k.data() + o, kq.data() + static_cast<size_t>(r) * rb, row);
    quantize_row(c.cache, v.data() + o, vq.data() + static_cast<size_t>(r) * rb, row);
    dequantize_row(c.cache, kq.data() + static_cast<size_t>(r) * rb, kd.data() + o, row);
    dequantize_row(c.cache, vq.data() + static_cast<size_t>(r) * rb, vd.data() + o, row);
  }
  auto kv_at = [&](const std::vector<float>& f, const std::vector<uint16_t>& h, size_t i) {
    if (quant) return double((&f == &k ? kd : vd)[i]);
    return f16 ? double(fp16_to_fp32(h[i])) : double(f[i]);
  };
  Node qn = make_node(Op::kRope, DType::F32, {c.hd, c.n_head, n_tok, 1});
  Node kn = make_node(Op::kKvStore, c.cache, {row, c.n_ctx, 1, 1});
  Node vn = kn;
  Node pn = make_node(Op::kInput, DType::I32, {n_tok, 1, 1, 1});
  Node yn = make_node(Op::kAttn, DType::F32, {c.hd * c.n_head, n_tok, 1, 1});
  yn.params.n_head_kv = static_cast<int32_t>(c.n_head_kv);
  yn.params.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  yn.params.attn_window = c.window;
  yn.params.attn_softcap = c.softcap;
  std::vector<float> y(static_cast<size_t>(c.hd * c.n_head * n_tok) + 16, -7.0f);
  OpArgs a;
  a.dst = {&yn, y.data()};
  a.src[0] = {&qn, q.data()};
  a.src[1] = {&kn, quant ? static_cast<void*>(kq.data()) : f16 ? static_cast<void*>(k16.data()) : const_cast<float*>(k.data())};
  a.src[2] = {&vn, quant ? static_cast<void*>(vq.data()) : f16 ? static_cast<void*>(v16.data()) : const_cast<float*>(v.data())};
  a.src[3] = {&pn, const_cast<int32_t*>(c.pos.data())};
  op_attn(OpContext{pool, kern, nullptr, 0}, a);
  for (size_t i = y.size() - 16; i < y.size(); ++i) EXPECT_EQ(y[i], -7.0f) << "overrun";
  // Small batches of an f16 cache round q to f16 and sum V in f16 (ops-attn.cpp): the float64
  // reference takes the same q, and the f16 running sum costs ~2^-11 relative per step.
  const bool narrow_f16 = f16 && n_tok < 64;
  if (narrow_f16)
    for (float& e : q) e = fp16_to_fp32(fp32_to_fp16(e));
  // A quantized cache scores q quantized to q8_0 (at every batch size) by exact integer dots.
  if (quant) {
    std::vector<uint8_t> blocks(row_bytes(DType::Q8_0, c.hd));
    for (size_t o = 0; o < q.size(); o += static_cast<size_t>(c.hd)) {
      quantize_row(DType::Q8_0, q.data() + o, blocks.data(), c.hd);
      dequantize_row(DType::Q8_0, blocks.data(), q.data() + o, c.hd);
    }
  }

  const int64_t group = c.n_head / c.n_head_kv;
  double err = 0, mag = 0;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t h = 0; h < c.n_head; ++h) {
      const int64_t kvh = h / group, p = c.pos[static_cast<size_t>(t)];
      // Positions p - window + 1 .. p with a window, else 0 .. p.
      const int64_t j0 = c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : 0, n_kv = p + 1 - j0;
      std::vector<double> s(static_cast<size_t>(n_kv));
      double mx = -1e300;
      for (int64_t j = 0; j < n_kv; ++j) {
        double d = 0;
        for (int64_t i = 0; i < c.hd; ++i) {
          const float qv = q[static_cast<size_t>((t * c.n_head + h) * c.hd + i)];
          d += qv * kv_at(k, k16, static_cast<size_t>((j0 + j) * row + kvh * c.hd + i));
        }
        double sc = d / std::sqrt(double(c.hd));
        if (c.softcap > 0) sc = c.softcap * std::tanh(sc / c.softcap);
        s[static_cast<size_t>(j)] = sc;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t i = 0; i < c.hd; ++i) {
        double o = 0;
        for (int64_t j = 0; j < n_kv; ++j)
          o += s[static_cast<size_t>(j)] / sum * kv_at(v, v16, static_cast<size_t>((j0 + j) * row + kvh * c.hd + i));
        const double got = y[static_cast<size_t>(t * c.n_head * c.hd + h * c.hd + i)];
        err = std::max(err, std::fabs(got - o));
        mag = std::max(mag, std::fabs(o));
      }
    }
  const double tol = narrow_f16 ? 2e-3 : 1e-5;
  EXPECT_LT(err, tol * std::max(1.0, mag)) << "hd " << c.hd << " heads " << c.n_head << "/" << c.n_head_kv << " "
                                           << n_tok << " tokens on " << kern.isa;
  y.resize(y.size() - 16);
  return y;
}

std::vector<int32_t> iota_pos(int32_t from, int32_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = from + i;
  return p;
}

TEST(CpuAttention, MatchesNaiveSoftmaxAttentionOnEveryIsa) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (int t = 0; t < n_tables; ++t) {
    const CpuKernels& k = *tables[t];
    check_attention({64, 4, 4, 8, {0, 1, 2, 3}, DType::F32, 1.0f}, k);       // MHA, a causal batch
    check_attention({64, 8, 2, 40, {5, 6, 7}, DType::F32, 1.0f}, k);         // GQA 4:1, after a prefix
    check_attention({128, 6, 3, 300, {0, 150, 299}, DType::F16, 1.0f}, k);  // f16 cache, long
    check_attention({36, 4, 1, 64, {63, 10}, DType::F16, 8.0f}, k);          // peaked softmax, MQA, hd % 8 != 0
    check_attention({64, 4, 2, 80, iota_pos(10, 64), DType::F16, 1.0f}, k);  // wide batch: f32 arithmetic
    check_attention({72, 2, 1, 70, iota_pos(0, 64), DType::F32, 4.0f}, k);
    check_attention({64, 3, 1, 90, iota_pos(20, 64), DType::F16, 2.0f}, k);   // odd GQA group
    check_attention({128, 14, 2, 70, iota_pos(3, 65), DType::F32, 1.0f}, k);  // Qwen-like 7:1
    // Sliding windows (Gemma's local layers) and score soft-capping (Gemma 2), narrow and wide.
    check_attention({64, 4, 2, 300, {0, 5, 17, 200, 299}, DType::F16, 2.0f, 16}, k);
    check_attention({256, 4, 1, 100, iota_pos(20, 64), DType::F16, 1.0f, 24}, k);  // Gemma 3: hd 256, MQA
    check_attention({64, 4, 2, 90, iota_pos(10, 70), DType::F32, 1.0f, 30}, k);
    check_attention({64, 4, 2, 40, {3, 20, 39}, DType::F16, 12.0f, 0, 5.0f}, k);     // capped, peaked
    check_attention({64, 8, 4, 90, iota_pos(5, 64), DType::F16, 12.0f, 16, 5.0f}, k); // both, wide
    check_attention({128, 4, 2, 90, iota_pos(5, 64), DType::F32, 8.0f, 0, 50.0f}, k);
    check_attention({64, 9, 3, 300, iota_pos(0, 229), DType::F16, 1.0f}, k);  // SmolLM2's 3:1 over tiles of 21 tokens
    check_attention({64, 9, 3, 300, iota_pos(0, 229), DType::F16, 6.0f}, k);
    // Quantized caches: decode, a wide batch (still the narrow arithmetic), window, soft-cap.
    check_attention({64, 8, 2, 40, {5, 6, 7}, DType::Q8_0, 1.0f}, k);
    check_attention({64, 8, 2, 40, {0, 6, 39}, DType::Q4_0, 4.0f}, k);
    check_attention({128, 14, 2, 70, iota_pos(3, 65), DType::Q8_0, 1.0f}, k);  // Qwen-like 7:1, 65 rows
    check_attention({64, 4, 2, 300, {0, 5, 17, 200, 299}, DType::Q4_0, 2.0f, 16}, k);
    check_attention({256, 4, 1, 60, {40, 59}, DType::Q8_0, 8.0f, 0, 5.0f}, k);   // Gemma 3's hd 256, capped
    check_attention({96, 12, 4, 70, iota_pos(0, 66), DType::Q4_0, 1.0f}, k);    // hd 96: 3 blocks
  }
}

// Each case's output on every ISA's table equals the reference table's bit for bit.
void expect_bit_identical_across_isas(const std::vector<AttnCase>& cases) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (const AttnCase& c : cases) {
    const std::vector<float> want = check_attention(c, *tables[0]);
    for (int t = 1; t < n_tables; ++t) {
      const std::vector<float> got = check_attention(c, *tables[t]);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "element " << i << " hd " << c.hd << " on " << tables[t]->isa;
    }
  }
}

// The small-batch arithmetic is one fixed order of float steps (kernels.h, W64), so every
// ISA's result is bit-identical to the reference's.
TEST(CpuAttention, SmallBatchesAreBitIdenticalAcrossIsas) {
  const std::vector<AttnCase> cases = {
      {64, 9, 3, 50, {0, 17, 49}, DType::F16, 2.0f},
      {128, 4, 2, 130, {129}, DType::F16, 1.0f},
      {80, 2, 1, 33, {5, 32}, DType::F32, 3.0f},   // 80 = 64 + a 16-element tail
      {36, 4, 1, 64, {63, 10}, DType::F16, 8.0f},  // only a tail
      {64, 4, 2, 300, {0, 5, 17, 200, 299}, DType::F16, 2.0f, 16},  // sliding window
      {256, 4, 1, 60, {40, 59}, DType::F16, 8.0f, 0, 5.0f},          // soft-capped
      {128, 16, 2, 91, {70, 90}, DType::F16, 4.0f},  // 8 rows per item, keys in blocks and a partial one
      {64, 14, 2, 21, {20}, DType::F16, 3.0f},       // Qwen2.5-0.5B's 7:1 decode (items of 4 and 3 rows)
      {64, 4, 2, 60, {40, 59}, DType::F32, 8.0f, 20, 5.0f},          // both, f32 cache
      {64, 9, 3, 50, {0, 17, 49}, DType::Q8_0, 2.0f},                 // quantized caches
      {128, 14, 2, 80, iota_pos(10, 66), DType::Q4_0, 1.0f},          // a wide batch
      {256, 4, 1, 60, {40, 59}, DType::Q8_0, 8.0f, 16, 5.0f},
  };
  expect_bit_identical_across_isas(cases);
}

// Wide batches without a window go through k.attn_tile, whose per-lane float steps are fixed
// (kernels.h): every ISA's result is the reference's bit for bit, over several tiles and key
// blocks (partial ones included), GQA groups from 1 to 16, head sizes the vector kernels take
// and ones they hand to the reference, float and quantized caches.
TEST(CpuAttention, TiledBatchesAreBitIdenticalAcrossIsas) {
  const std::vector<AttnCase> cases = {
      {64, 14, 2, 700, iota_pos(500, 130), DType::F16, 1.0f},   // Qwen2.5-0.5B's 7:1, deep
      {128, 16, 2, 300, iota_pos(0, 100), DType::F32, 2.0f},    // 8:1, from position 0
      {256, 8, 1, 200, iota_pos(37, 64), DType::F16, 4.0f, 0, 5.0f},  // soft-capped
      {64, 4, 4, 150, iota_pos(3, 70), DType::F16, 8.0f},       // MHA: 64 tokens per tile
      {72, 6, 2, 100, iota_pos(9, 66), DType::F32, 1.0f},       // hd 72: AVX-512 hands it over
      {64, 14, 2, 300, iota_pos(200, 70), DType::Q8_0, 1.0f},   // quantized caches: rows widened
      {128, 8, 2, 200, iota_pos(0, 64), DType::Q4_0, 2.0f},
      {64, 14, 2, 700, {600}, DType::F16, 1.0f},                // decode past kTileFromKeys keys
      {128, 8, 2, 1000, {999, 700, 511, 512}, DType::Q8_0, 2.0f},  // short batches, long contexts
      // Up to 4 rows (AVX-512: keys in lanes): decode with 2 and 4 heads per KV head, two
      // tokens that see different key counts, f32 and q4_0 caches, a soft-cap, key counts that
      // end inside a block; and 8 heads per KV head (the tiles again).
      {128, 16, 8, 900, {899}, DType::F16, 4.0f},
      {128, 8, 1, 800, {799}, DType::F16, 1.0f},
      {64, 4, 2, 700, {690, 530}, DType::F16, 2.0f},
      {128, 8, 2, 700, {650}, DType::F16, 1.0f},
      {128, 4, 2, 600, {555}, DType::F32, 1.0f},
      {64, 4, 1, 600, {521}, DType::Q4_0, 2.0f},
      {256, 2, 1, 600, {577}, DType::F16, 4.0f, 0, 5.0f},
  };
  expect_bit_identical_across_isas(cases);
}

// A sliding-window layer's ring cache (params.attn_ring = R: position p of the sequence whose
// rows start at `first` is row first + p mod R) gives, bit for bit, what the full cache gives,
// on the narrow f16 and f32 paths and the wide one, windows that wrap round the ring included.
std::vector<float> run_ranges(const CpuKernels& kern, DType cache, int64_t hd, int64_t n_head, int64_t n_head_kv,
                              int64_t cache_rows, const void* kc, const void* vc, const std::vector<float>& q,
                              const std::vector<int32_t>& ranges, int32_t window, int32_t ring) {
  ThreadPool pool(2);
  const int64_t n_tok = static_cast<int64_t>(ranges.size() / 3);
  Node qn = make_node(Op::kRope, DType::F32, {hd, n_head, n_tok, 1});
  Node kn = make_node(Op::kKvStore, cache, {n_head_kv * hd, cache_rows, 1, 1});
  Node rn = make_node(Op::kInput, DType::I32, {3, n_tok, 1, 1});
  Node yn = make_node(Op::kAttn, DType::F32, {hd * n_head, n_tok, 1, 1});
  yn.params.n_head_kv = static_cast<int32_t>(n_head_kv);
  yn.params.attn_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  yn.params.attn_window = window;
  yn.params.attn_ring = ring;
  yn.params.attn_ranges = true;
  std::vector<float> y(static_cast<size_t>(hd * n_head * n_tok));
  OpArgs a;
  a.dst = {&yn, y.data()};
  a.src[0] = {&qn, const_cast<float*>(q.data())};
  a.src[1] = {&kn, const_cast<void*>(kc)};
  a.src[2] = {&kn, const_cast<void*>(vc)};
  a.src[3] = {&rn, const_cast<int32_t*>(ranges.data())};
  op_attn(OpContext{pool, kern, nullptr, 0}, a);
  return y;
}

TEST(CpuAttention, RingCacheEqualsTheFullCache) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  struct Case {
    DType cache;
    int32_t p0, n_tok, window, ring;
  };
  // (first position, batch, window, ring rows): decode steps and short batches wrapping, a wide
  // batch (64 rows) wrapping, a ring exactly window + batch - 1 rows.
  const Case cases[] = {{DType::F16, 45, 1, 16, 20}, {DType::F16, 30, 5, 16, 20}, {DType::F32, 37, 3, 12, 14},
                        {DType::F16, 100, 64, 24, 87}, {DType::F32, 75, 64, 16, 79}, {DType::F16, 3, 7, 16, 22}};
  const int64_t hd = 64, n_head = 4, n_head_kv = 2, row = n_head_kv * hd;
  for (const Case& c : cases) {
    const bool f16 = c.cache == DType::F16;
    const int64_t n_full = c.p0 + c.n_tok, first = 3, ring_rows = first + c.ring + 2;
    const std::vector<float> k = randn(static_cast<size_t>(row * n_full), 21), v = randn(static_cast<size_t>(row * n_full), 22);
    std::vector<float> kr = randn(static_cast<size_t>(row * ring_rows), 23), vr = randn(static_cast<size_t>(row * ring_rows), 24);
    // The ring holds the last `ring` positions; older rows and the rows around it are noise.
    for (int64_t p = std::max<int64_t>(0, n_full - c.ring); p < n_full; ++p)
      for (int64_t i = 0; i < row; ++i) {
        kr[static_cast<size_t>((first + p % c.ring) * row + i)] = k[static_cast<size_t>(p * row + i)];
        vr[static_cast<size_t>((first + p % c.ring) * row + i)] = v[static_cast<size_t>(p * row + i)];
      }
    auto as16 = [](const std::vector<float>& f) {
      std::vector<uint16_t> h(f.size());
      for (size_t i = 0; i < f.size(); ++i) h[i] = fp32_to_fp16(f[i]);
      return h;
    };
    const auto k16 = as16(k), v16 = as16(v), kr16 = as16(kr), vr16 = as16(vr);
    const std::vector<float> q = randn(static_cast<size_t>(hd * n_head * c.n_tok), 25, 2.0f);
    std::vector<int32_t> full_ranges, ring_ranges;
    for (int32_t t = 0; t < c.n_tok; ++t) {
      full_ranges.insert(full_ranges.end(), {0, c.p0 + t + 1, c.n_tok});
      ring_ranges.insert(ring_ranges.end(), {static_cast<int32_t>(first), c.p0 + t + 1, c.n_tok});
    }
    for (int t = 0; t < n_tables; ++t) {
      const auto want = run_ranges(*tables[t], c.cache, hd, n_head, n_head_kv, n_full, f16 ? (const void*)k16.data() : k.data(),
                                   f16 ? (const void*)v16.data() : v.data(), q, full_ranges, c.window, 0);
      const auto got = run_ranges(*tables[t], c.cache, hd, n_head, n_head_kv, ring_rows, f16 ? (const void*)kr16.data() : kr.data(),
                                  f16 ? (const void*)vr16.data() : vr.data(), q, ring_ranges, c.window, c.ring);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "element " << i << " p0 " << c.p0 << " batch " << c.n_tok
                                                       << " ring " << c.ring << " on " << tables[t]->isa;
    }
  }
}

// The several-row kernels are the one-row kernels row by row, bit for bit, on every ISA (head
// sizes with and without a tail; a row of zeros; more rows than a GQA group).
TEST(CpuAttention, RowKernelsEqualTheOneRowKernels) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (int64_t n : {64, 128, 80, 36, 256}) {
    const int64_t rows = 5, stride = n + 3;
    const std::vector<float> kf = randn(static_cast<size_t>(n), 7), vf = randn(static_cast<size_t>(n), 8, 3.0f);
    std::vector<float> q = randn(static_cast<size_t>(rows * stride), 9, 2.0f);
    for (float& e : q) e = fp16_to_fp32(fp32_to_fp16(e));
    for (int64_t i = 0; i < n; ++i) q[static_cast<size_t>(2 * stride + i)] = 0.0f;
    std::vector<uint16_t> k16(static_cast<size_t>(n)), v16(static_cast<size_t>(n)), acc0(static_cast<size_t>(rows * stride));
    for (int64_t i = 0; i < n; ++i) {
      k16[static_cast<size_t>(i)] = fp32_to_fp16(kf[static_cast<size_t>(i)]);
      v16[static_cast<size_t>(i)] = fp32_to_fp16(vf[static_cast<size_t>(i)]);
    }
    const std::vector<float> a0 = randn(acc0.size(), 10);
    for (size_t i = 0; i < acc0.size(); ++i) acc0[i] = fp32_to_fp16(a0[i]);
    const float p[rows] = {0.5f, 1e-6f, 0.0f, 1.0f, 0.03125f};
    for (int t = 0; t < n_tables; ++t) {
      const CpuKernels& kern = *tables[t];
      float s[rows];
      kern.dot_w64_rows_f16(n, k16.data(), q.data(), stride, rows, s);
      std::vector<uint16_t> acc = acc0, want = acc0;
      kern.mad_rows_f16(n, acc.data(), stride, v16.data(), p, rows);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<uint16_t> q16(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) q16[static_cast<size_t>(i)] = fp32_to_fp16(q[static_cast<size_t>(r * stride + i)]);
        EXPECT_EQ(f32_bits(s[r]), f32_bits(kern.dot_w64_f16(n, k16.data(), q16.data()))) << "row " << r << " n " << n << " on " << kern.isa;
        kern.mad_f16(n, want.data() + r * stride, v16.data(), p[r]);
      }
      EXPECT_EQ(acc, want) << "n " << n << " on " << kern.isa;
    }
  }
}

}  // namespace
}  // namespace minfer::cpu

namespace minfer::cpu {
namespace {

// The several-row f32 V sum is fma row by row, and cache rows widen to d * q: every ISA's
// kernels give the reference's floats bit for bit.
TEST(CpuAttention, QuantizedCacheKernelsEqualTheReference) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  const CpuKernels& ref = *tables[0];
  for (int64_t n : {32, 64, 96, 256, 40}) {
    const int64_t rows = 5, stride = n + 3;
    const std::vector<float> v = randn(static_cast<size_t>(n), 11, 3.0f), a0 = randn(static_cast<size_t>(rows * stride), 12);
    const float p[rows] = {0.5f, 1e-6f, 0.0f, 1.0f, 0.03125f};
    std::vector<float> want = a0;
    ref.mad_rows_f32(n, want.data(), stride, v.data(), p, rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(f32_bits(want[static_cast<size_t>(r * stride + i)]),
                  f32_bits(std::fma(v[static_cast<size_t>(i)], p[r], a0[static_cast<size_t>(r * stride + i)])));
    for (int t = 1; t < n_tables; ++t) {
      std::vector<float> got = a0;
      tables[t]->mad_rows_f32(n, got.data(), stride, v.data(), p, rows);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "n " << n << " on " << tables[t]->isa;
    }
    if (n % 32 != 0) continue;
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
      std::vector<uint8_t> blocks(row_bytes(type, n));
      quantize_row(type, v.data(), blocks.data(), n);
      std::vector<float> deq(static_cast<size_t>(n));
      dequantize_row(type, blocks.data(), deq.data(), n);
      for (int t = 0; t < n_tables; ++t) {
        std::vector<float> got(static_cast<size_t>(n), -1.0f);
        tables[t]->row_to_f32[type_slot(type)](n, blocks.data(), got.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(f32_bits(got[static_cast<size_t>(i)]), f32_bits(deq[static_cast<size_t>(i)]))
              << dtype_name(type) << " n " << n << " element " << i << " on " << tables[t]->isa;
      }
    }
  }
}

std::vector<float> run_hadamard(const std::vector<float>& x, int64_t ne0, int n) {
  ThreadPool pool(2);
  Node xn = make_node(Op::kRope, DType::F32, {ne0, static_cast<int64_t>(x.size()) / ne0, 1, 1});
  Node yn = make_node(Op::kHadamard, DType::F32, xn.ne);
  yn.params.block = n;
  std::vector<float> y(x.size());
  OpArgs a;
  a.dst = {&yn, y.data()};
  a.src[0] = {&xn, const_cast<float*>(x.data())};
  op_hadamard(OpContext{pool, cpu_kernels_ref(), nullptr, 0}, a);
  return y;
}

// y = H x per run of n, with H[i][j] = (-1)^popcount(i & j) / sqrt(n) (Sylvester's matrix); H is
// its own inverse, so twice gives x back; in place (the planner may alias y and x) as well.
TEST(CpuHadamard, IsTheOrthonormalWalshHadamardMatrix) {
  for (int n : {64, 128, 256}) {
    const int64_t ne0 = 2 * 256, rows = 3;
    const std::vector<float> x = randn(static_cast<size_t>(ne0 * rows), 13, 2.0f);
    const std::vector<float> y = run_hadamard(x, ne0, n);
    double err = 0;
    for (size_t r0 = 0; r0 < x.size(); r0 += static_cast<size_t>(n))
      for (int i = 0; i < n; ++i) {
        double want = 0;
        for (int j = 0; j < n; ++j) want += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[r0 + static_cast<size_t>(j)];
        want /= std::sqrt(double(n));
        err = std::max(err, std::fabs(want - y[r0 + static_cast<size_t>(i)]));
      }
    EXPECT_LT(err, 1e-5) << "n " << n;
    const std::vector<float> back = run_hadamard(y, ne0, n);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(back[i], x[i], 1e-5) << "n " << n;
    // In place: the same floats.
    std::vector<float> z = x;
    ThreadPool pool(2);
    Node zn = make_node(Op::kHadamard, DType::F32, {ne0, rows, 1, 1});
    zn.params.block = n;
    OpArgs a;
    a.dst = {&zn, z.data()};
    a.src[0] = {&zn, z.data()};
    op_hadamard(OpContext{pool, cpu_kernels_ref(), nullptr, 0}, a);
    EXPECT_EQ(z, y) << "n " << n;
  }
}

}  // namespace
}  // namespace minfer::cpu
