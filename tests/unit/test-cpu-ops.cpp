// CPU ops against naive references: matmul and get_rows for every weight type on every
// kernel table the machine runs (NMSE bound per type), each vec_dot against a float64 dot of the
// dequantized operands, the element-wise ops; outputs carry guard bytes to catch overruns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/kernels.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/repack.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace minfer::cpu {
namespace {

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardBytes = 64;

// A float buffer with guard bytes on both sides, 64-byte aligned like the backend's arenas.
class Guarded {
 public:
  explicit Guarded(size_t n) : n_(n * sizeof(float)), bytes_(n_ + 2 * kGuardBytes + 63, kGuard) {
    const auto at = reinterpret_cast<uintptr_t>(bytes_.data());
    start_ = static_cast<size_t>((at + 63) / 64 * 64 - at);
  }
  float* data() { return reinterpret_cast<float*>(bytes_.data() + start_ + kGuardBytes); }
  bool intact() const {
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (bytes_[start_ + i] != kGuard || bytes_[start_ + kGuardBytes + n_ + i] != kGuard) return false;
    return true;
  }

 private:
  size_t n_, start_ = 0;
  std::vector<uint8_t> bytes_;
};

double nmse(const float* a, const double* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / den;
}

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

struct TypeBound {
  DType type;
  double matmul_nmse;  // vs the float64 product of the unquantized operands
};
// Bounds: the weight's own quantization error dominates (about 2^-2b per element for b bits),
// plus the activation rounding (Q8: ~1e-5, f16: ~1e-7, bf16: ~1e-5).
const TypeBound kTypes[] = {
    {DType::F32, 1e-12},  {DType::F16, 1e-6},    {DType::BF16, 1e-4},   {DType::Q4_0, 1.5e-2},
    {DType::Q4_1, 1e-2},  {DType::Q5_0, 4e-3},   {DType::Q5_1, 3e-3},   {DType::Q8_0, 1e-4},
    {DType::Q2_K, 1.5e-1}, {DType::Q3_K, 5e-2},  {DType::Q4_K, 1e-2},   {DType::Q5_K, 3e-3},
    {DType::Q6_K, 1e-3},  {DType::IQ4_NL, 1e-2}, {DType::IQ4_XS, 1e-2},
};

// Dequantized activation row (the exact values the dot product sees).
std::vector<double> act_values(DType act, const uint8_t* q, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  if (act == DType::Q8_1) {
    const auto* b = reinterpret_cast<const BlockQ8_1*>(q);
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = double(fp16_to_fp32(b[i / 32].d)) * b[i / 32].qs[i % 32];
    return v;
  }
  std::vector<float> f(static_cast<size_t>(n));
  dequantize_row(act, q, f.data(), n);
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f[static_cast<size_t>(i)];
  return v;
}

TEST(CpuVecDot, EveryTypeMatchesFloat64DotOfItsOperands) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  const int64_t n = 1024;
  for (const TypeBound& tb : kTypes) {
    const DType act = activation_type(tb.type);
    const std::vector<float> w = randn(static_cast<size_t>(n), 1), x = randn(static_cast<size_t>(n), 2);
    std::vector<uint8_t> wq(row_bytes(tb.type, n)), xq(row_bytes(act, n) + 64);
    quantize_row(tb.type, w.data(), wq.data(), n);
    std::vector<float> wd(static_cast<size_t>(n));
    dequantize_row(tb.type, wq.data(), wd.data(), n);
    for (int t = 0; t < n_tables; ++t) {
      const CpuKernels& k = *tables[t];
      k.quantize[type_slot(act)](x.data(), xq.data(), n);
      const std::vector<double> xv = act_values(act, xq.data(), n);
      double want = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += wd[static_cast<size_t>(i)] * xv[static_cast<size_t>(i)];
        mag += std::fabs(wd[static_cast<size_t>(i)] * xv[static_cast<size_t>(i)]);
      }
      const float got = k.vec_dot[type_slot(tb.type)](n, wq.data(), xq.data());
      // Q8_1 carries d*sum(q) rounded to f16: allow for that rounding on the min term.
      const double tol = (act == DType::Q8_1 ? 2e-3 : 2e-6) * mag;
      EXPECT_NEAR(got, want, tol) << dtype_name(tb.type) << " on " << k.isa;
    }
  }
}

// The 32-element block types have one float order on every ISA (vec-dot-ref.cpp, Lanes8): the
// results are bit-identical to the reference's, on random rows including extreme values.
TEST(CpuVecDot, BlockTypesAreBitIdenticalAcrossIsas) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL}) {
    const DType act = activation_type(type);
    for (int64_t n : {32, 96, 224, 4096}) {  // 224: 4-block steps and a tail of 3
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        std::vector<float> w = randn(static_cast<size_t>(n), seed, 3.0f), x = randn(static_cast<size_t>(n), seed + 10, 50.0f);
        x[0] = 1e4f;  // one large activation: a block with tiny other values
        if (n >= 96)
          for (int i = 32; i < 64; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero block
        if (n >= 96) x[70] = 0.5f * 127.0f / 50.0f;  // near a rounding boundary
        std::vector<uint8_t> wq(row_bytes(type, n)), xq(row_bytes(act, n));
        quantize_row(type, w.data(), wq.data(), n);
        tables[0]->quantize[type_slot(act)](x.data(), xq.data(), n);
        const float want = tables[0]->vec_dot[type_slot(type)](n, wq.data(), xq.data());
        for (int t = 1; t < n_tables; ++t) {
          std::vector<uint8_t> xq2(xq.size());
          tables[t]->quantize[type_slot(act)](x.data(), xq2.data(), n);
          ASSERT_EQ(xq2, xq) << dtype_name(act) << " quantizer on " << tables[t]->isa;
          const float got = tables[t]->vec_dot[type_slot(type)](n, wq.data(), xq.data());
          ASSERT_EQ(f32_bits(got), f32_bits(want)) << dtype_name(type) << " n " << n << " on " << tables[t]->isa;
        }
      }
    }
  }
}

// The super-block types (vec-dot-kquant-ref.cpp): exact integer sums per super-block, then the
// reference's few float steps, so every ISA's result is the reference's bit for bit; rows of
// 1, 3 and 16 super-blocks with an outlier activation and an all-zero super-block.
TEST(CpuVecDot, SuperBlockTypesAreBitIdenticalAcrossIsas) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (DType type : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    const DType act = activation_type(type);
    for (int64_t n : {256, 768, 4096}) {
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        std::vector<float> w = randn(static_cast<size_t>(n), seed, 3.0f), x = randn(static_cast<size_t>(n), seed + 10, 50.0f);
        x[0] = 1e4f;  // one large activation: a super-block with tiny other values
        w[7] = -40.0f;  // one large weight: a sub-block at the scale's extreme
        if (n >= 768)
          for (int i = 256; i < 512; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero super-block
        std::vector<uint8_t> wq(row_bytes(type, n)), xq(row_bytes(act, n));
        quantize_row(type, w.data(), wq.data(), n);
        tables[0]->quantize[type_slot(act)](x.data(), xq.data(), n);
        const float want = tables[0]->vec_dot[type_slot(type)](n, wq.data(), xq.data());
        for (int t = 1; t < n_tables; ++t) {
          std::vector<uint8_t> xq2(xq.size());
          tables[t]->quantize[type_slot(act)](x.data(), xq2.data(), n);
          ASSERT_EQ(xq2, xq) << dtype_name(act) << " quantizer on " << tables[t]->isa;
          const float got = tables[t]->vec_dot[type_slot(type)](n, wq.data(), xq.data());
          ASSERT_EQ(f32_bits(got), f32_bits(want)) << dtype_name(type) << " n " << n << " on " << tables[t]->isa;
        }
      }
    }
  }
}

// The float types: the ARM tables follow the reference's order (8 partial sums, a product then
// an add per element) bit for bit; the x86 tables sum in their own lanes with fma, within float
// rounding of it. Lengths with every tail n % 8.
TEST(CpuVecDot, FloatTypesFollowTheReferenceOrder) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t n : {1, 5, 8, 15, 64, 67, 1000, 1027}) {
      const std::vector<float> w = randn(static_cast<size_t>(n), 31, 2.0f), x = randn(static_cast<size_t>(n), 32, 3.0f);
      std::vector<uint8_t> wq(row_bytes(type, n)), xq(row_bytes(type, n));
      quantize_row(type, w.data(), wq.data(), n);
      tables[0]->quantize[type_slot(type)](x.data(), xq.data(), n);
      std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
      dequantize_row(type, wq.data(), wd.data(), n);
      dequantize_row(type, xq.data(), xd.data(), n);
      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(wd[static_cast<size_t>(i)]) * xd[static_cast<size_t>(i)]);
      const float want = tables[0]->vec_dot[type_slot(type)](n, wq.data(), xq.data());
      for (int t = 1; t < n_tables; ++t) {
        const float got = tables[t]->vec_dot[type_slot(type)](n, wq.data(), xq.data());
        const std::string_view isa = tables[t]->isa;
        if (isa == "neon" || isa == "dotprod" || isa == "i8mm")
          ASSERT_EQ(f32_bits(got), f32_bits(want)) << dtype_name(type) << " n " << n << " on " << isa;
        else
          ASSERT_NEAR(got, want, double(n) * 0x1p-23 * mag) << dtype_name(type) << " n " << n << " on " << isa;
      }
    }
  }
}

// Every activation quantizer of every table writes the reference's bytes, on rows with the
// cases that have their own rules: ties of the largest magnitude (the first one wins, either
// sign), an all-zero block, values halfway between two quanta, a subnormal largest value, NaN
// and infinity, and a block whose largest value is negative.
TEST(CpuQuantize, ActivationQuantizersAreByteIdenticalAcrossIsas) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  const int64_t n = 256 * 8;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    std::vector<float> x = randn(static_cast<size_t>(n), seed, 20.0f);
    x[3] = 90.0f, x[200] = -90.0f;                         // block 0: tie, positive first
    x[256 + 7] = -77.0f, x[256 + 100] = 77.0f;             // block 1: tie, negative first
    for (int i = 512; i < 768; ++i) x[static_cast<size_t>(i)] = 0.0f;  // block 2: zeros
    for (int i = 768; i < 1024; ++i) x[static_cast<size_t>(i)] = (i % 7 - 3) * 0.5f;  // exact halves
    x[1024 + 9] = -1e-42f;                                 // block 4: subnormal max
    for (int i = 1025; i < 1024 + 256; ++i) x[static_cast<size_t>(i)] = (i % 2) ? 1e-43f : 0.0f;
    if (seed == 2) x[1280 + 5] = std::nanf("");            // block 5: NaN
    if (seed == 3) x[1536 + 5] = -INFINITY;                // block 6: infinity
    x[1792 + 255] = -1000.0f;                              // block 7: the largest value last
    for (DType act : {DType::Q8_0, DType::Q8_1, DType::Q8_K, DType::F16, DType::BF16}) {
      // The float types take any length: also one with a tail of 7 past the vectors.
      for (int64_t len : {n, act == DType::F16 || act == DType::BF16 ? n - 9 : n}) {
        std::vector<uint8_t> want(row_bytes(act, len));
        tables[0]->quantize[type_slot(act)](x.data(), want.data(), len);
        for (int t = 1; t < n_tables; ++t) {
          std::vector<uint8_t> got(want.size(), 0xA5);
          tables[t]->quantize[type_slot(act)](x.data(), got.data(), len);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(got[i], want[i]) << dtype_name(act) << " n " << len << " byte " << i << " seed " << seed << " on "
                                       << tables[t]->isa;
        }
      }
    }
  }
}

TEST(CpuMatmul, EveryTypeOnEveryIsaWithinItsBound) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  ThreadPool pool(2);
  const int64_t n_in = 512, n_out = 7, n_rows = 3;
  const std::vector<float> w = randn(static_cast<size_t>(n_in * n_out), 3, 0.05f);
  const std::vector<float> x = randn(static_cast<size_t>(n_in * n_rows), 4);
  std::vector<double> want(static_cast<size_t>(n_out * n_rows));
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t o = 0; o < n_out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < n_in; ++i) s += double(w[static_cast<size_t>(o * n_in + i)]) * x[static_cast<size_t>(t * n_in + i)];
      want[static_cast<size_t>(t * n_out + o)] = s;
    }
  for (const TypeBound& tb : kTypes) {
    std::vector<uint8_t> wq(row_bytes(tb.type, n_in) * n_out);
    for (int64_t o = 0; o < n_out; ++o)
      quantize_row(tb.type, w.data() + o * n_in, wq.data() + o * row_bytes(tb.type, n_in), n_in);
    Node wn = make_node(Op::kWeight, tb.type, {n_in, n_out, 1, 1});
    Node xn = make_node(Op::kInput, DType::F32, {n_in, n_rows, 1, 1});
    Node yn = make_node(Op::kMatmul, DType::F32, {n_out, n_rows, 1, 1});
    std::vector<uint8_t> work(op_work_size(yn, &wn, &xn));
    for (int t = 0; t < n_tables; ++t) {
      Guarded y(static_cast<size_t>(n_out * n_rows));
      OpArgs a;
      a.dst = {&yn, y.data()};
      a.src[0] = {&wn, wq.data()};
      a.src[1] = {&xn, const_cast<float*>(x.data())};
      op_matmul(OpContext{pool, *tables[t], work.data(), work.size()}, a);
      EXPECT_TRUE(y.intact()) << dtype_name(tb.type);
      const double e = nmse(y.data(), want.data(), want.size());
      EXPECT_LE(e, tb.matmul_nmse) << dtype_name(tb.type) << " on " << tables[t]->isa;
    }
  }
}

// The types whose GEMMs over repacked weights follow their row kernels' float order exactly.
const DType kBitExactGemmTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                    DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                                    DType::IQ4_NL, DType::IQ4_XS};

// Repacked weights (repack.h) through op_matmul's GEMM path give the same bits as the row
// kernels of the reference, for every ISA, batch size and the rows past the last 16-row group.
TEST(CpuMatmul, RepackedGemmIsBitIdenticalToTheRowKernels) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  ThreadPool pool(2);
  for (DType type : kBitExactGemmTypes) {
    const int64_t be = repack_block_elems(type);
    for (int64_t n_in : {be, be == 256 ? int64_t{768} : int64_t{320}}) {
      const int64_t n_out = 16 * 3 + 5;
      const std::vector<float> w = randn(static_cast<size_t>(n_in * n_out), 7, 0.1f);
      std::vector<uint8_t> wq(row_bytes(type, n_in) * n_out);
      for (int64_t o = 0; o < n_out; ++o)
        quantize_row(type, w.data() + o * n_in, wq.data() + o * row_bytes(type, n_in), n_in);
      RepackMap repacked;
      repacked.emplace(wq.data(), repack_weight_uncached(type, wq.data(), n_in, n_out));
      ASSERT_TRUE(repacked.begin()->second) << dtype_name(type);
      ASSERT_EQ(repacked.begin()->second->n_groups, 3);
      std::vector<uint8_t> row(row_bytes(type, n_in));
      for (int64_t o = 0; o < 48; ++o) {  // the layout loses nothing: every row comes back
        unrepack_row(*repacked.begin()->second, o, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), wq.data() + o * row_bytes(type, n_in), row.size())) << dtype_name(type) << " row " << o;
      }
      for (int64_t n_rows : {1, 3, 9, 16, 17, 37}) {  // 16, 37: whole AMX token tiles and a tail
        std::vector<float> x = randn(static_cast<size_t>(n_in * n_rows), 8, 2.0f);
        x[5] = 300.0f;  // an outlier: one block with many tiny quanta
        Node wn = make_node(Op::kWeight, type, {n_in, n_out, 1, 1});
        Node xn = make_node(Op::kInput, DType::F32, {n_in, n_rows, 1, 1});
        Node yn = make_node(Op::kMatmul, DType::F32, {n_out, n_rows, 1, 1});
        std::vector<uint8_t> work(op_work_size(yn, &wn, &xn));
        auto run = [&](const CpuKernels& k, const RepackMap* map) {
          Guarded y(static_cast<size_t>(n_out * n_rows));
          OpArgs a;
          a.dst = {&yn, y.data()};
          a.src[0] = {&wn, wq.data()};
          a.src[1] = {&xn, x.data()};
          op_matmul(OpContext{pool, k, work.data(), work.size(), map}, a);
          EXPECT_TRUE(y.intact());
          return std::vector<float>(y.data(), y.data() + n_out * n_rows);
        };
        const std::vector<float> want = run(*tables[0], nullptr);  // reference row kernels
        for (int t = 0; t < n_tables; ++t) {
          if (!tables[t]->gemm[type_slot(type)]) continue;
          const std::vector<float> got = run(*tables[t], &repacked);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i]))
                << dtype_name(type) << " n_in " << n_in << " rows " << n_rows << " element " << i << " on " << tables[t]->isa;
        }
      }
    }
  }
}

// Outputs of 4 MiB and more leave the AMX kernels by non-temporal stores (amx-common.h,
// kStreamBytes): every table's GEMM gives the reference row kernels' bits there, token tails
// included (on a machine without AMX this checks the other tables' large outputs alike).
TEST(CpuMatmul, StreamedLargeOutputsKeepTheirBits) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  ThreadPool pool(2);
  for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t n_in = repack_block_elems(type), n_out = 16 * 1030, n_rows = 64 + 5;  // 4.3 MiB of output
    const std::vector<float> w = randn(static_cast<size_t>(n_in * n_out), 21, 0.1f);
    std::vector<uint8_t> wq(row_bytes(type, n_in) * n_out);
    for (int64_t o = 0; o < n_out; ++o) quantize_row(type, w.data() + o * n_in, wq.data() + o * row_bytes(type, n_in), n_in);
    RepackMap repacked;
    repacked.emplace(wq.data(), repack_weight_uncached(type, wq.data(), n_in, n_out));
    std::vector<float> x = randn(static_cast<size_t>(n_in * n_rows), 22, 2.0f);
    Node wn = make_node(Op::kWeight, type, {n_in, n_out, 1, 1});
    Node xn = make_node(Op::kInput, DType::F32, {n_in, n_rows, 1, 1});
    Node yn = make_node(Op::kMatmul, DType::F32, {n_out, n_rows, 1, 1});
    std::vector<uint8_t> work(op_work_size(yn, &wn, &xn));
    auto run = [&](const CpuKernels& k, const RepackMap* map) {
      Guarded y(static_cast<size_t>(n_out * n_rows));
      OpArgs a;
      a.dst = {&yn, y.data()};
      a.src[0] = {&wn, wq.data()};
      a.src[1] = {&xn, x.data()};
      op_matmul(OpContext{pool, k, work.data(), work.size(), map}, a);
      EXPECT_TRUE(y.intact());
      return std::vector<float>(y.data(), y.data() + n_out * n_rows);
    };
    const std::vector<float> want = run(*tables[0], nullptr);  // reference row kernels
    for (int t = 1; t < n_tables; ++t) {
      const CpuKernels* k = tables[t];
      if (!k->gemm[type_slot(type)]) continue;
      const std::vector<float> got = run(*k, &repacked);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << dtype_name(type) << " element " << i << " on " << k->isa;
    }
  }
}

// F16 / BF16 weights in groups of 16 (repack.h) through op_matmul's GEMM path: the layout
// round-trips; every ISA's GEMM gives the reference GEMM's bits; each token's result does not
// depend on the batch; the rows past the last group come from the row kernels; and the values
// agree within float rounding with the reference row kernels and a float64 dot of the rounded
// operands (one fma chain of n_in terms: |error| <= n_in * 2^-24 * sum |products|).
TEST(CpuMatmul, FloatGemmIsBatchIndependentAndWithinRoundingOfTheRowKernels) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  ThreadPool pool(2);
  for (DType type : {DType::F16, DType::BF16}) {
    const DType act = activation_type(type);
    for (int64_t n_in : {32, 352}) {
      const int64_t n_out = 16 * 3 + 5, n_rep = 48;
      const size_t wrow = row_bytes(type, n_in);
      const std::vector<float> w = randn(static_cast<size_t>(n_in * n_out), 7, 0.1f);
      std::vector<uint8_t> wq(wrow * n_out);
      for (int64_t o = 0; o < n_out; ++o) quantize_row(type, w.data() + o * n_in, wq.data() + o * wrow, n_in);
      std::vector<float> wd(static_cast<size_t>(n_in * n_out));
      for (int64_t o = 0; o < n_out; ++o) dequantize_row(type, wq.data() + o * wrow, wd.data() + o * n_in, n_in);
      RepackMap repacked;
      repacked.emplace(wq.data(), repack_weight_uncached(type, wq.data(), n_in, n_out));
      ASSERT_TRUE(repacked.begin()->second) << dtype_name(type);
      ASSERT_EQ(repacked.begin()->second->n_groups, 3);
      std::vector<uint8_t> row(wrow);
      for (int64_t o = 0; o < n_rep; ++o) {
        unrepack_row(*repacked.begin()->second, o, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), wq.data() + o * wrow, wrow)) << dtype_name(type) << " row " << o;
      }
      for (int64_t n_rows : {1, 3, 9, 17}) {
        std::vector<float> x = randn(static_cast<size_t>(n_in * n_rows), 8, 2.0f);
        x[5] = 300.0f;
        auto run = [&](const CpuKernels& k, const RepackMap* map, const float* xs, int64_t rows) {
          Node wn = make_node(Op::kWeight, type, {n_in, n_out, 1, 1});
          Node xn = make_node(Op::kInput, DType::F32, {n_in, rows, 1, 1});
          Node yn = make_node(Op::kMatmul, DType::F32, {n_out, rows, 1, 1});
          std::vector<uint8_t> work(op_work_size(yn, &wn, &xn));
          Guarded y(static_cast<size_t>(n_out * rows));
          OpArgs a;
          a.dst = {&yn, y.data()};
          a.src[0] = {&wn, wq.data()};
          a.src[1] = {&xn, const_cast<float*>(xs)};
          op_matmul(OpContext{pool, k, work.data(), work.size(), map}, a);
          EXPECT_TRUE(y.intact());
          return std::vector<float>(y.data(), y.data() + n_out * rows);
        };
        // The float64 dot of the rounded operands, and the sum of |products| for the bound.
        std::vector<double> exact(static_cast<size_t>(n_out * n_rows)), mag(exact.size());
        std::vector<uint8_t> xq(row_bytes(act, n_in));
        for (int64_t t = 0; t < n_rows; ++t) {
          tables[0]->quantize[type_slot(act)](x.data() + t * n_in, xq.data(), n_in);
          const std::vector<double> xv = act_values(act, xq.data(), n_in);
          for (int64_t o = 0; o < n_out; ++o) {
            double s = 0, m = 0;
            for (int64_t i = 0; i < n_in; ++i) {
              const double p = double(wd[static_cast<size_t>(o * n_in + i)]) * xv[static_cast<size_t>(i)];
              s += p;
              m += std::fabs(p);
            }
            exact[static_cast<size_t>(t * n_out + o)] = s;
            mag[static_cast<size_t>(t * n_out + o)] = m;
          }
        }
        const std::vector<float> ref_rows = run(*tables[0], nullptr, x.data(), n_rows);
        const std::vector<float> ref_gemm = run(*tables[0], &repacked, x.data(), n_rows);
        std::vector<double> ref_rows_d(ref_rows.begin(), ref_rows.end());
        EXPECT_LE(nmse(ref_gemm.data(), ref_rows_d.data(), ref_rows_d.size()), 1e-10) << dtype_name(type);
        EXPECT_LE(nmse(ref_gemm.data(), exact.data(), exact.size()), 1e-10) << dtype_name(type);
        for (size_t i = 0; i < ref_gemm.size(); ++i)
          ASSERT_LE(std::fabs(ref_gemm[i] - exact[i]), double(n_in) * 0x1p-24 * mag[i]) << dtype_name(type) << " element " << i;
        for (int t = 0; t < n_tables; ++t) {
          const CpuKernels& k = *tables[t];
          if (!k.gemm[type_slot(type)]) continue;
          const std::vector<float> got = run(k, &repacked, x.data(), n_rows);
          const std::vector<float> rows = run(k, nullptr, x.data(), n_rows);  // this ISA's row kernels
          for (int64_t tok = 0; tok < n_rows; ++tok) {
            const std::vector<float> one = run(k, &repacked, x.data() + tok * n_in, 1);
            for (int64_t o = 0; o < n_out; ++o) {
              const size_t i = static_cast<size_t>(tok * n_out + o);
              const float want = o < n_rep ? ref_gemm[i] : rows[i];
              ASSERT_EQ(f32_bits(got[i]), f32_bits(want))
                  << dtype_name(type) << " n_in " << n_in << " rows " << n_rows << " token " << tok << " row " << o << " on " << k.isa;
              ASSERT_EQ(f32_bits(one[static_cast<size_t>(o)]), f32_bits(got[i]))
                  << dtype_name(type) << " alone vs batch " << n_rows << " token " << tok << " row " << o << " on " << k.isa;
            }
          }
        }
      }
    }
  }
}

// The F16 / BF16 GEMM kernels called directly over every group range and token count up to 19
// (each ISA's tilings: groups in 4s / 2s / 1s, token tiles and their tails) give the reference
// GEMM's bits, and write only their own outputs.
TEST(CpuMatmul, FloatGemmKernelsMatchTheReferenceOnEveryTiling) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (DType type : {DType::F16, DType::BF16}) {
    const int64_t n_in = 96, n_out = 16 * 9;
    const size_t wrow = row_bytes(type, n_in);
    const std::vector<float> w = randn(static_cast<size_t>(n_in * n_out), 11, 0.1f);
    std::vector<uint8_t> wq(wrow * n_out);
    for (int64_t o = 0; o < n_out; ++o) quantize_row(type, w.data() + o * n_in, wq.data() + o * wrow, n_in);
    const auto rw = repack_weight_uncached(type, wq.data(), n_in, n_out);
    ASSERT_TRUE(rw);
    const int64_t max_tok = 19;
    std::vector<float> x = randn(static_cast<size_t>(n_in * max_tok), 12, 2.0f);
    for (float& v : x) v = type == DType::F16 ? fp16_to_fp32(fp32_to_fp16(v)) : bf16_to_fp32(fp32_to_bf16(v));
    for (int64_t n_tok = 1; n_tok <= max_tok; ++n_tok) {
      for (auto [g0, g1] : {std::pair<int64_t, int64_t>{0, 9}, {1, 8}, {2, 5}, {3, 4}, {0, 6}}) {
        auto run = [&](GemmFn fn) {
          std::vector<float> y(static_cast<size_t>(n_out * n_tok), -1.0f);
          GemmArgs a;
          a.w = rw->data;
          a.block_bytes = rw->block_bytes;
          a.n_blocks = rw->n_blocks;
          a.g0 = g0;
          a.g1 = g1;
          a.x = reinterpret_cast<const uint8_t*>(x.data());
          a.x_row = static_cast<size_t>(n_in) * sizeof(float);
          a.n_tok = n_tok;
          a.y = y.data();
          a.y_stride = n_out;
          fn(a);
          return y;
        };
        const std::vector<float> want = run(tables[0]->gemm[type_slot(type)]);
        for (int t = 1; t < n_tables; ++t) {
          if (!tables[t]->gemm[type_slot(type)]) continue;
          const std::vector<float> got = run(tables[t]->gemm[type_slot(type)]);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << dtype_name(type) << " n_tok " << n_tok << " groups " << g0 << ".."
                                                           << g1 << " element " << i << " on " << tables[t]->isa;
        }
      }
    }
  }
}

// The quantized GEMM kernels called directly over every token count up to 41 (each ISA's
// token tiles: 8s, 4s, 2s and their tails, the SMMLA kernels' token pairs, the AMX kernels'
// tiles of 16 and what falls back to the narrower table) and several group ranges give the
// reference GEMM's bits, and write only their own outputs.
TEST(CpuMatmul, QuantizedGemmKernelsMatchTheReferenceOnEveryTiling) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (DType type : kBitExactGemmTypes) {
    const DType act = activation_type(type);
    const int64_t be = repack_block_elems(type), n_in = be == 256 ? 512 : 96, n_out = 16 * 5;
    const int64_t n_blocks = n_in / be;
    const size_t wrow = row_bytes(type, n_in), xrow = row_bytes(act, n_in);
    const std::vector<float> w = randn(static_cast<size_t>(n_in * n_out), 31, 0.1f);
    std::vector<uint8_t> wq(wrow * n_out);
    for (int64_t o = 0; o < n_out; ++o) quantize_row(type, w.data() + o * n_in, wq.data() + o * wrow, n_in);
    const auto rw = repack_weight_uncached(type, wq.data(), n_in, n_out);
    ASSERT_TRUE(rw) << dtype_name(type);
    const int64_t max_tok = 41;
    std::vector<float> x = randn(static_cast<size_t>(n_in * max_tok), 32, 2.0f);
    x[7] = 250.0f;  // an outlier: one block with many tiny quanta
    std::vector<uint8_t> xq(xrow * max_tok);
    for (int64_t t = 0; t < max_tok; ++t) tables[0]->quantize[type_slot(act)](x.data() + t * n_in, xq.data() + t * xrow, n_in);
    // What op_matmul gives the Q8_0-activation GEMMs: block sums, and the block scales of whole
    // 16-token tiles as f32 (GemmArgs::xd_tiles).
    std::vector<int32_t> xsum(static_cast<size_t>(max_tok * n_blocks));
    std::vector<float> xd(static_cast<size_t>(max_tok * n_blocks));
    if (act == DType::Q8_0)
      for (int64_t t = 0; t < max_tok; ++t)
        for (int64_t b = 0; b < n_blocks; ++b) {
          const auto& blk = reinterpret_cast<const BlockQ8_0*>(xq.data() + t * xrow)[b];
          int32_t sum = 0;
          for (int8_t q : blk.qs) sum += q;
          xsum[static_cast<size_t>(t * n_blocks + b)] = sum;
          if (t < max_tok / kGemmScaleTokens * kGemmScaleTokens)
            xd[static_cast<size_t>((t / kGemmScaleTokens) * n_blocks * kGemmScaleTokens + b * kGemmScaleTokens +
                                   t % kGemmScaleTokens)] = fp16_to_fp32(blk.d);
        }
    for (int64_t n_tok = 1; n_tok <= max_tok; ++n_tok) {
      for (auto [g0, g1] : {std::pair<int64_t, int64_t>{0, 5}, {1, 4}, {3, 4}}) {
        auto run = [&](GemmFn fn) {
          std::vector<float> y(static_cast<size_t>(n_out * n_tok), -1.0f);
          GemmArgs a;
          a.w = rw->data;
          a.block_bytes = rw->block_bytes;
          a.n_blocks = rw->n_blocks;
          a.g0 = g0;
          a.g1 = g1;
          a.x = xq.data();
          a.x_row = xrow;
          a.xsum = act == DType::Q8_0 ? xsum.data() : nullptr;
          a.xd_tiles = act == DType::Q8_0 ? xd.data() : nullptr;
          a.n_tok = n_tok;
          a.y = y.data();
          a.y_stride = n_out;
          fn(a);
          return y;
        };
        const std::vector<float> want = run(tables[0]->gemm[type_slot(type)]);
        for (int t = 1; t < n_tables; ++t) {
          if (!tables[t]->gemm[type_slot(type)]) continue;
          const std::vector<float> got = run(tables[t]->gemm[type_slot(type)]);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << dtype_name(type) << " n_tok " << n_tok << " groups " << g0 << ".."
                                                           << g1 << " element " << i << " on " << tables[t]->isa;
        }
      }
    }
  }
}

TEST(CpuGetRows, EveryTypeDequantizesTheChosenRows) {
  ThreadPool pool(2);
  const CpuKernels& k = cpu_kernels_ref();
  const int64_t ne0 = 256, n_rows = 5;
  const std::vector<float> w = randn(static_cast<size_t>(ne0 * n_rows), 5);
  const int32_t ids[4] = {4, 0, 4, 2};
  for (const TypeBound& tb : kTypes) {
    const size_t rb = row_bytes(tb.type, ne0);
    std::vector<uint8_t> wq(rb * n_rows);
    for (int64_t r = 0; r < n_rows; ++r) quantize_row(tb.type, w.data() + r * ne0, wq.data() + r * rb, ne0);
    Node tn = make_node(Op::kWeight, tb.type, {ne0, n_rows, 1, 1});
    Node in = make_node(Op::kInput, DType::I32, {4, 1, 1, 1});
    Node yn = make_node(Op::kGetRows, DType::F32, {ne0, 4, 1, 1});
    Guarded y(static_cast<size_t>(ne0 * 4));
    OpArgs a;
    a.dst = {&yn, y.data()};
    a.src[0] = {&tn, wq.data()};
    a.src[1] = {&in, const_cast<int32_t*>(ids)};
    op_get_rows(OpContext{pool, k, nullptr, 0}, a);
    EXPECT_TRUE(y.intact());
    std::vector<float> want(static_cast<size_t>(ne0));
    for (int r = 0; r < 4; ++r) {
      dequantize_row(tb.type, wq.data() + static_cast<size_t>(ids[r]) * rb, want.data(), ne0);
      EXPECT_EQ(std::memcmp(y.data() + r * ne0, want.data(), static_cast<size_t>(ne0) * 4), 0) << dtype_name(tb.type);
    }
  }
}

TEST(CpuElementwise, NormsAddMulSiluSwigluMatchNaive) {
  ThreadPool pool(2);
  const OpContext ctx{pool, cpu_kernels(), nullptr, 0};
  const int64_t ne0 = 96, rows = 37;
  const size_t n = static_cast<size_t>(ne0 * rows);
  const std::vector<float> x = randn(n, 6), b = randn(n, 7), wrow = randn(static_cast<size_t>(ne0), 8);
  const Shape full{ne0, rows, 1, 1}, one{ne0, 1, 1, 1};
  Node xn = make_node(Op::kInput, DType::F32, full), bn = make_node(Op::kInput, DType::F32, full);
  Node wn = make_node(Op::kWeight, DType::F32, one);
  auto run = [&](Op op, const Node& s1, const float* s1d, void (*fn)(const OpContext&, const OpArgs&)) {
    Node yn = make_node(op, DType::F32, full);
    yn.params.eps = 1e-5f;
    Guarded y(n);
    OpArgs a;
    a.dst = {&yn, y.data()};
    a.src[0] = {&xn, const_cast<float*>(x.data())};
    a.src[1] = {&s1, const_cast<float*>(s1d)};
    fn(ctx, a);
    EXPECT_TRUE(y.intact()) << op_name(op);
    return std::vector<float>(y.data(), y.data() + n);
  };
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  const auto norm = run(Op::kRmsNorm, bn, b.data(), op_rms_norm);
  const auto norm_mul = run(Op::kRmsNormMul, wn, wrow.data(), op_rms_norm_mul);
  const auto add_b = run(Op::kAdd, wn, wrow.data(), op_add);
  const auto mul_f = run(Op::kMul, bn, b.data(), op_mul);
  const auto si = run(Op::kSilu, bn, b.data(), op_silu);
  const auto sw = run(Op::kSwiglu, bn, b.data(), op_swiglu);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < ne0; ++i) ss += double(x[static_cast<size_t>(r * ne0 + i)]) * x[static_cast<size_t>(r * ne0 + i)];
    const double sc = 1.0 / std::sqrt(ss / ne0 + 1e-5);
    for (int64_t i = 0; i < ne0; ++i) {
      const size_t k = static_cast<size_t>(r * ne0 + i);
      const double xv = x[k];
      EXPECT_NEAR(norm[k], xv * sc, 1e-5);
      EXPECT_NEAR(norm_mul[k], xv * sc * wrow[static_cast<size_t>(i)], 1e-5);
      EXPECT_EQ(add_b[k], x[k] + wrow[static_cast<size_t>(i)]);
      EXPECT_EQ(mul_f[k], x[k] * b[k]);
      EXPECT_NEAR(si[k], silu(xv), 1e-6);
      EXPECT_NEAR(sw[k], silu(xv) * b[k], 1e-5);
    }
  }
}

// rms_norm is llama.cpp's formula to the bit (f32 squares summed in double in element order,
// the mean rounded to f32) for every row, whatever number of rows the op interleaves (8, 4, 2,
// 1 at a time, in chunks of either pool size). (A reordered double sum rarely shows after the
// rounding to f32; a float sum or a row mixed up with its neighbour does.)
TEST(CpuElementwise, RmsNormIsLlamaCppFormulaOnEveryRow) {
  const int64_t ne0 = 200;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const OpContext ctx{pool, cpu_kernels(), nullptr, 0};
    for (int64_t rows : {1, 2, 3, 7, 8, 9, 15, 37, 100}) {
      const size_t n = static_cast<size_t>(ne0 * rows);
      std::vector<float> x = randn(n, 31 + static_cast<uint32_t>(rows), 3.0f);
      for (size_t i = 0; i < n; i += 17) x[i] *= 1e-3f;  // squares across many binades
      Node xn = make_node(Op::kInput, DType::F32, {ne0, rows, 1, 1});
      Node yn = make_node(Op::kRmsNorm, DType::F32, {ne0, rows, 1, 1});
      yn.params.eps = 1e-6f;
      std::vector<float> y(n);
      OpArgs a;
      a.dst = {&yn, y.data()};
      a.src[0] = {&xn, x.data()};
      op_rms_norm(ctx, a);
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
          const float v = x[static_cast<size_t>(r * ne0 + i)];
          sum += static_cast<double>(v * v);
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(ne0)) + 1e-6f);
        for (int64_t i = 0; i < ne0; ++i) {
          const size_t k = static_cast<size_t>(r * ne0 + i);
          ASSERT_EQ(f32_bits(y[k]), f32_bits(x[k] * scale)) << "row " << r << " of " << rows << ", " << threads << " threads";
        }
      }
    }
  }
}

// gelu (tanh approximation, at f16 precision like llama.cpp's table), geglu = gelu * up exactly,
// scale, softcap: against the formulas in double.
TEST(CpuElementwise, GeluGegluScaleSoftcapMatchTheFormulas) {
  ThreadPool pool(2);
  const OpContext ctx{pool, cpu_kernels(), nullptr, 0};
  const int64_t ne0 = 64, rows = 33;
  const size_t n = static_cast<size_t>(ne0 * rows);
  std::vector<float> x = randn(n, 11, 4.0f);
  x[0] = -12.0f;  // the table's limits: 0 below -10, x above 10
  x[1] = 11.5f;
  x[2] = 0.0f;
  const std::vector<float> u = randn(n, 12);
  const Shape full{ne0, rows, 1, 1};
  Node xn = make_node(Op::kInput, DType::F32, full), un = make_node(Op::kInput, DType::F32, full);
  auto run = [&](Op op, float param, void (*fn)(const OpContext&, const OpArgs&)) {
    Node yn = make_node(op, DType::F32, full);
    yn.params.scale = param;
    Guarded y(n);
    OpArgs a;
    a.dst = {&yn, y.data()};
    a.src[0] = {&xn, x.data()};
    a.src[1] = {&un, const_cast<float*>(u.data())};
    fn(ctx, a);
    EXPECT_TRUE(y.intact()) << op_name(op);
    return std::vector<float>(y.data(), y.data() + n);
  };
  const auto ge = run(Op::kGelu, 0.0f, op_gelu);
  const auto gg = run(Op::kGeglu, 0.0f, op_geglu);
  const auto sc = run(Op::kScale, 0.125f, op_scale);
  const auto cap = run(Op::kSoftcap, 3.0f, op_softcap);
  auto gelu = [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * v * (1 + 0.044715 * v * v))); };
  for (size_t k = 0; k < n; ++k) {
    const double v = x[k];
    // f16 rounding of the input and the output: ~2^-11 relative, plus the slope times the input's rounding
    EXPECT_NEAR(ge[k], gelu(v), 2e-3 * (1 + std::fabs(v))) << v;
    EXPECT_EQ(gg[k], ge[k] * u[k]) << v;
    EXPECT_EQ(sc[k], x[k] * 0.125f);
    EXPECT_NEAR(cap[k], 3.0 * std::tanh(v / 3.0), 1e-6) << v;
    EXPECT_LE(std::fabs(cap[k]), 3.0f);
  }
  EXPECT_EQ(ge[0], 0.0f);
  EXPECT_EQ(ge[1], 11.5f);
  EXPECT_EQ(ge[2], 0.0f);
}

// exp_poly: within 2.5 ulp of the e^x over the whole f32 range that matters to
// silu and softmax, with the limits and the special values right.
TEST(CpuExp, ExpPolyIsWithinTwoAndAHalfUlp) {
  int64_t n = 0;
  for (float x = -103.0f; x < 88.7f; x = std::nextafter(x, 100.0f) + 1e-4f * std::fabs(x) + 1e-7f, ++n) {
    const double want = std::exp(static_cast<double>(x));
    const float got = exp_poly(x);
    if (want < 1.1754944e-38) {  // subnormal results: absolute
      EXPECT_NEAR(got, want, 3e-45) << x;
      continue;
    }
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
    ASSERT_LE(std::fabs(got - want), 2.5 * ulp) << "x " << x;
  }
  EXPECT_GT(n, 100000);
  EXPECT_EQ(exp_poly(0.0f), 1.0f);
  EXPECT_EQ(exp_poly(-INFINITY), 0.0f);
  EXPECT_EQ(exp_poly(INFINITY), INFINITY);
  EXPECT_EQ(exp_poly(-200.0f), 0.0f);
  EXPECT_EQ(exp_poly(100.0f), INFINITY);
  EXPECT_TRUE(std::isnan(exp_poly(NAN)));
}

// silu_row on every ISA is bit-identical to the reference, including the rows' tails (libm
// exp) and lanes out of the normal range (the scalar fallback).
TEST(CpuExp, SiluRowIsBitIdenticalAcrossIsas) {
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  std::vector<float> x = randn(1000, 9, 6.0f);
  x[3] = 95.0f;   // exp(-x) below the normal range
  x[17] = -95.0f; // exp(-x) overflows: silu = -0
  x[40] = 0.0f;
  for (int64_t n : {1000, 999, 16, 7}) {
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    tables[0]->silu_row(n, want.data(), x.data());
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[static_cast<size_t>(i)];
      EXPECT_NEAR(want[static_cast<size_t>(i)], v / (1 + std::exp(-v)), 1e-6 * std::max(1.0, std::fabs(v))) << i;
    }
    for (int t = 1; t < n_tables; ++t) {
      tables[t]->silu_row(n, got.data(), x.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(f32_bits(got[static_cast<size_t>(i)]), f32_bits(want[static_cast<size_t>(i)]))
            << "element " << i << " of " << n << " on " << tables[t]->isa;
    }
  }
}

TEST(CpuKvStore, WritesRowsAtPositionsInF16AndF32) {
  ThreadPool pool(1);
  const OpContext ctx{pool, cpu_kernels(), nullptr, 0};
  const int64_t ne0 = 8, n_ctx = 6;
  const std::vector<float> x = randn(static_cast<size_t>(ne0 * 2), 9);
  const int32_t pos[2] = {4, 1};
  for (DType t : {DType::F32, DType::F16}) {
    Node cache = make_node(Op::kKvStore, t, {ne0, n_ctx, 1, 1});
    Node xn = make_node(Op::kInput, DType::F32, {ne0, 2, 1, 1});
    Node pn = make_node(Op::kInput, DType::I32, {2, 1, 1, 1});
    Guarded mem(static_cast<size_t>(ne0 * n_ctx));  // f32-sized: enough for both
    std::memset(mem.data(), 0, static_cast<size_t>(ne0 * n_ctx) * 4);
    OpArgs a;
    a.dst = {&cache, mem.data()};
    a.src[0] = a.dst;
    a.src[1] = {&xn, const_cast<float*>(x.data())};
    a.src[2] = {&pn, const_cast<int32_t*>(pos)};
    op_kv_store(ctx, a);
    EXPECT_TRUE(mem.intact());
    for (int r = 0; r < 2; ++r)
      for (int64_t i = 0; i < ne0; ++i) {
        const float want = x[static_cast<size_t>(r * ne0 + i)];
        const float got = t == DType::F32 ? mem.data()[pos[r] * ne0 + i]
                                          : fp16_to_fp32(reinterpret_cast<uint16_t*>(mem.data())[pos[r] * ne0 + i]);
        EXPECT_EQ(got, t == DType::F32 ? want : fp16_to_fp32(fp32_to_fp16(want)));
      }
  }
}

}  // namespace
}  // namespace minfer::cpu

namespace minfer::cpu {
namespace {

// The mixture-of-experts ops against naive loops: top_k's order, the renormalised softmax
// weights, matmul_id equal to op_matmul on each selected expert's weight (bit for bit: the same
// vec_dot, on every ISA), moe_sum's weighted sum.
TEST(CpuMoe, TopKWeightsMatmulIdAndSumMatchNaive) {
  ThreadPool pool(2);
  const int64_t n_expert = 6, k = 2, n_tok = 5, n_in = 256, n_out = 40;  // 40: two groups of 16 and a tail
  std::vector<float> logits = randn(static_cast<size_t>(n_expert * n_tok), 21, 2.0f);
  logits[0] = logits[1] = 9.0f;  // a tie: the lower index first
  Node ln = make_node(Op::kInput, DType::F32, {n_expert, n_tok, 1, 1});
  Node idn = make_node(Op::kTopK, DType::I32, {k, n_tok, 1, 1});
  idn.params.top_k = static_cast<int32_t>(k);
  std::vector<int32_t> ids(static_cast<size_t>(k * n_tok) + 4, -9);
  const OpContext ctx0{pool, cpu_kernels(), nullptr, 0};
  OpArgs ta;
  ta.dst = {&idn, ids.data()};
  ta.src[0] = {&ln, logits.data()};
  op_top_k(ctx0, ta);
  EXPECT_EQ(ids[static_cast<size_t>(k * n_tok)], -9) << "overrun";
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  for (int64_t t = 0; t < n_tok; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(n_expert));
    for (int32_t e = 0; e < n_expert; ++e) order[static_cast<size_t>(e)] = e;
    const float* row = logits.data() + t * n_expert;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    for (int64_t j = 0; j < k; ++j) EXPECT_EQ(ids[static_cast<size_t>(t * k + j)], order[static_cast<size_t>(j)]);
  }

  Node wn = make_node(Op::kMoeWeights, DType::F32, {k, n_tok, 1, 1});
  wn.params.moe_norm = true;
  std::vector<float> wts(static_cast<size_t>(k * n_tok));
  OpArgs wa;
  wa.dst = {&wn, wts.data()};
  wa.src[0] = {&ln, logits.data()};
  wa.src[1] = {&idn, ids.data()};
  op_moe_weights(ctx0, wa);
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* row = logits.data() + t * n_expert;
    const double a = std::exp(double(row[ids[t * k]])), b = std::exp(double(row[ids[t * k + 1]]));
    EXPECT_NEAR(wts[static_cast<size_t>(t * k)], a / (a + b), 1e-6);
    EXPECT_NEAR(wts[static_cast<size_t>(t * k) + 1], b / (a + b), 1e-6);
  }

  // matmul_id: W [n_in, n_out, n_expert] in F32, Q8_0, Q4_0 (row kernels), x [n_in, 1, n_tok].
  const CpuKernels* tables[4];
  const int n_tables = cpu_kernel_variants(tables, 4);
  for (DType wt : {DType::F32, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    const std::vector<float> wf = randn(static_cast<size_t>(n_in * n_out * n_expert), 22);
    const size_t rb = row_bytes(wt, n_in);
    std::vector<uint8_t> w(rb * static_cast<size_t>(n_out * n_expert));
    for (int64_t r = 0; r < n_out * n_expert; ++r) quantize_row(wt, wf.data() + r * n_in, w.data() + static_cast<size_t>(r) * rb, n_in);
    const std::vector<float> x = randn(static_cast<size_t>(n_in * n_tok), 23);
    Node wnode = make_node(Op::kWeight, wt, {n_in, n_out, n_expert, 1});
    Node xnode = make_node(Op::kInput, DType::F32, {n_in, 1, n_tok, 1});
    Node out = make_node(Op::kMatmulId, DType::F32, {n_out, k, n_tok, 1});
    // Each expert's slice repacked as CpuBackend::prepare does: the GEMM path must give the
    // row path's bits.
    RepackMap repacked;
    for (int64_t e = 0; e < n_expert; ++e) {
      const uint8_t* slice = w.data() + static_cast<size_t>(e * n_out) * rb;
      if (auto r = repack_weight(wt, slice, n_in, n_out, false)) repacked.emplace(slice, std::move(r));
    }
    if (wt != DType::F32) {
      EXPECT_EQ(repacked.size(), static_cast<size_t>(n_expert)) << dtype_name(wt) << " repacks";
    }
    for (int ti = 0; ti < 2 * n_tables; ++ti) {
      const CpuKernels& kern = *tables[ti % n_tables];
      const bool use_repack = ti >= n_tables;
      if (use_repack && (repacked.empty() || !kern.gemm[type_slot(wt)])) continue;
      std::vector<uint8_t> work(op_work_size(out, &wnode, &xnode) + 64);
      std::vector<float> y(static_cast<size_t>(n_out * k * n_tok));
      OpArgs ma;
      ma.dst = {&out, y.data()};
      ma.src[0] = {&wnode, w.data()};
      ma.src[1] = {&xnode, const_cast<float*>(x.data())};
      ma.src[2] = {&idn, ids.data()};
      op_matmul_id(OpContext{pool, kern, work.data(), work.size(), use_repack ? &repacked : nullptr}, ma);
      // Each slot equals op_matmul of that expert's 2-D weight on that token's row.
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t j = 0; j < k; ++j) {
          const int32_t e = ids[static_cast<size_t>(t * k + j)];
          Node w2 = make_node(Op::kWeight, wt, {n_in, n_out, 1, 1});
          Node x2 = make_node(Op::kInput, DType::F32, {n_in, 1, 1, 1});
          Node o2 = make_node(Op::kMatmul, DType::F32, {n_out, 1, 1, 1});
          std::vector<uint8_t> work2(op_work_size(o2, &w2, &x2) + 64);
          std::vector<float> want(static_cast<size_t>(n_out));
          OpArgs a2;
          a2.dst = {&o2, want.data()};
          a2.src[0] = {&w2, w.data() + static_cast<size_t>(e) * static_cast<size_t>(n_out) * rb};
          a2.src[1] = {&x2, const_cast<float*>(x.data()) + t * n_in};
          op_matmul(OpContext{pool, kern, work2.data(), work2.size()}, a2);
          for (int64_t o = 0; o < n_out; ++o)
            ASSERT_EQ(f32_bits(y[static_cast<size_t>((t * k + j) * n_out + o)]), f32_bits(want[static_cast<size_t>(o)]))
                << dtype_name(wt) << " token " << t << " slot " << j << " row " << o << " on " << kern.isa
                << (use_repack ? " (repacked)" : "");
        }
    }
  }

  // moe_sum: e0 w0 + e1 w1, in order.
  const std::vector<float> ex = randn(static_cast<size_t>(n_out * k * n_tok), 24);
  Node en = make_node(Op::kMatmulId, DType::F32, {n_out, k, n_tok, 1});
  Node sn = make_node(Op::kMoeSum, DType::F32, {n_out, n_tok, 1, 1});
  std::vector<float> sum(static_cast<size_t>(n_out * n_tok));
  OpArgs sa;
  sa.dst = {&sn, sum.data()};
  sa.src[0] = {&en, const_cast<float*>(ex.data())};
  sa.src[1] = {&wn, wts.data()};
  op_moe_sum(ctx0, sa);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t i = 0; i < n_out; ++i) {
      const float want = ex[static_cast<size_t>((t * k) * n_out + i)] * wts[static_cast<size_t>(t * k)] +
                         ex[static_cast<size_t>((t * k + 1) * n_out + i)] * wts[static_cast<size_t>(t * k + 1)];
      EXPECT_EQ(sum[static_cast<size_t>(t * n_out + i)], want);
    }
}

}  // namespace
}  // namespace minfer::cpu
