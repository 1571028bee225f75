#include "quantize/quantize-model.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "core/thread-pool.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "quant/quant.h"

namespace minfer {
namespace {

// Architecture-prefixed integer hyperparameter, e.g. "llama.block_count".
int arch_int(const GgufFile& f, const std::string& arch, const char* key, int def) {
  if (const GgufValue* v = f.find(arch + "." + key))
    if (auto i = v->as_int()) return static_cast<int>(*i);
  return def;
}

}  // namespace

Expected<QuantizeReport> quantize_model(const std::string& in_path, const std::string& out_path,
                                        const QuantizeOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto in = GgufFile::open(in_path);
  if (!in) return in.error();
  const GgufFile& f = *in;

  for (const GgufTensor& t : f.tensors())
    if (!can_dequantize(t.type))
      return make_error("quantize: '{}': tensor '{}' has type {}, which minfer cannot read",
                        in_path, t.name, dtype_name(t.type));

  const std::string arch = f.get_string("general.architecture").has_value()
                               ? *f.get_string("general.architecture")
                               : std::string("llama");
  ModelFacts facts;
  facts.n_layer = arch_int(f, arch, "block_count", 0);
  facts.n_head = arch_int(f, arch, "attention.head_count", 1);
  facts.n_head_kv = arch_int(f, arch, "attention.head_count_kv", facts.n_head);
  facts.has_output = f.find_tensor("output.weight") != nullptr;
  MixPlanner planner(opt.file_type, facts, opt.pure);

  GgufWriter w;
  w.set_alignment(f.alignment());
  for (const GgufKV& kv : f.metadata()) {
    if (kv.key.starts_with("split.") || kv.key == "general.alignment") continue;
    w.add(kv.key, kv.value);
  }
  w.add_u32("general.quantization_version", 2);
  if (!opt.copy) w.add_u32("general.file_type", static_cast<uint32_t>(opt.file_type));

  auto pool = std::make_shared<ThreadPool>(opt.n_threads);
  auto report = std::make_shared<QuantizeReport>();
  report->n_tensors = f.tensors().size();
  const size_t n_tensors = f.tensors().size();
  for (size_t ti = 0; ti < n_tensors; ++ti) {
    const GgufTensor& t = f.tensors()[ti];
    const DType out_type = opt.copy ? t.type : planner.choose(t.name, t.shape);
    const bool same = out_type == t.type;
    auto is_float = [](DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; };
    if (!same && !is_float(t.type) && !is_float(out_type) && !opt.allow_requantize)
      return make_error("quantize: '{}': tensor '{}' is already quantized ({}); converting it to {} loses quality twice "
                        "(start from an F32/F16/BF16 file, or pass --allow-requantize)",
                        in_path, t.name, dtype_name(t.type), dtype_name(out_type));
    report->in_bytes += t.n_bytes;
    report->out_bytes += row_bytes(out_type, t.shape.empty() ? 1 : t.shape[0]) * t.n_rows();
    if (!same) {
      report->n_quantized++;
      report->n_elements += static_cast<uint64_t>(t.n_elements());
    }
    auto produce = [&t, out_type, same, pool, ti, n_tensors, &opt](uint8_t* dst, size_t n) -> Status {
      if (same) {
        std::memcpy(dst, t.data, n);
      } else {
        const int64_t ne0 = t.shape.empty() ? 1 : t.shape[0];
        const size_t in_row = row_bytes(t.type, ne0);
        const size_t out_row = row_bytes(out_type, ne0);
        const int64_t n_rows = t.n_rows();
        pool->parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
          std::vector<float> row(static_cast<size_t>(ne0));  // [ne0] one row in F32
          for (int64_t r = r0; r < r1; ++r) {
            dequantize_row(t.type, t.data + r * in_row, row.data(), ne0);
            quantize_row(out_type, row.data(), dst + r * out_row, ne0);
          }
        });
      }
      if (opt.on_tensor) opt.on_tensor(ti, n_tensors, t.name, dtype_name(out_type));
      return Status::ok();
    };
    w.add_tensor(t.name, out_type, t.shape, produce);
  }

  if (opt.split_max_tensors > 0) {
    std::string prefix = out_path;
    if (prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
    auto paths = w.write_split(prefix, {opt.split_max_tensors, 0});
    if (!paths) return paths.error();
  } else {
    MINFER_TRY(w.write(out_path));
  }
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return *report;
}

}  // namespace minfer
