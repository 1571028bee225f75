#include "quantize/mix.h"

#include <charconv>

namespace minfer {
namespace {

struct FileTypeInfo {
  FileType type;
  std::string_view name;
  DType base;
};

constexpr FileTypeInfo kFileTypes[] = {
#define MINFER_X(name, id, base) {FileType::name, #name, DType::base},
    MINFER_FILE_TYPES(MINFER_X)
#undef MINFER_X
};

const FileTypeInfo& info(FileType t) {
  for (const auto& i : kFileTypes)
    if (i.type == t) return i;
  return kFileTypes[0];
}

// Layers that get more bits in the _M mixes: the first and last eighth, and every third
// layer in between, where quantization error was found to hurt most.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// "blk.12.ffn_down.weight" -> 12; -1 when the name has no block index.
int layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  const char* b = name.data() + 4;
  int v = -1;
  auto r = std::from_chars(b, name.data() + name.size(), v);
  return r.ec == std::errc() ? v : -1;
}

bool has(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

// When a row is not a whole number of 256-blocks, fall back to a 32-block type of similar size.
DType fallback_for_row(DType t, int64_t ne0) {
  if (ne0 % dtype_info(t).block_elems == 0) return t;
  DType f;
  switch (t) {
    case DType::Q2_K: case DType::Q3_K: case DType::IQ4_XS: f = DType::IQ4_NL; break;
    case DType::Q4_K: f = DType::Q5_0; break;
    case DType::Q5_K: f = DType::Q5_1; break;
    case DType::Q6_K: f = DType::Q8_0; break;
    default: f = DType::F16; break;
  }
  if (ne0 % dtype_info(f).block_elems != 0) f = DType::F16;
  return f;
}

}  // namespace

std::string_view file_type_name(FileType t) { return info(t).name; }

std::optional<std::string_view> file_type_name_of(int64_t id) {
  for (const auto& i : kFileTypes)
    if (static_cast<int64_t>(i.type) == id) return i.name;
  return std::nullopt;
}
DType file_type_base(FileType t) { return info(t).base; }

std::optional<FileType> file_type_from_name(std::string_view name) {
  if (name == "Q3_K") return FileType::Q3_K_M;
  if (name == "Q4_K") return FileType::Q4_K_M;
  if (name == "Q5_K") return FileType::Q5_K_M;
  for (const auto& i : kFileTypes)
    if (i.name == name) return i.type;
  return std::nullopt;
}

std::string file_type_names() {
  std::string s;
  for (const auto& i : kFileTypes) {
    if (i.type == FileType::F32) continue;
    if (!s.empty()) s += ", ";
    s += i.name;
  }
  return s;
}

bool is_quantizable(std::string_view name, const std::vector<int64_t>& shape) {
  if (shape.size() < 2 || !name.ends_with("weight")) return false;
  int64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  if (rows <= 1) return false;
  // MoE router and 2-D norm-like helpers stay in full precision.
  return !has(name, "ffn_gate_inp") && !has(name, "_norm");
}

DType MixPlanner::choose(std::string_view name, const std::vector<int64_t>& shape) {
  if (!is_quantizable(name, shape)) return DType::F32;
  const DType base = file_type_base(ft_);
  DType t = base;
  if (!pure_ && dtype_info(base).block_elems > 1) t = choose_mixed(name, layer_of(name));
  return fallback_for_row(t, shape[0]);
}

DType MixPlanner::choose_mixed(std::string_view name, int layer) {
  const FileType ft = ft_;
  const DType base = file_type_base(ft);
  const int n_layer = facts_.n_layer > 0 ? facts_.n_layer : 1;
  const int n_gqa = facts_.n_head_kv > 0 ? facts_.n_head / facts_.n_head_kv : 1;

  const bool is_output = name == "output.weight" || (!facts_.has_output && name == "token_embd.weight");
  if (is_output) return base == DType::Q8_0 ? DType::Q8_0 : DType::Q6_K;

  if (has(name, "attn_v.weight")) {
    const int i = i_attn_v_++;
    switch (ft) {
      case FileType::Q2_K: return n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
      case FileType::Q3_K_M: return i < 2 ? DType::Q5_K : DType::Q4_K;
      case FileType::Q3_K_L: return DType::Q5_K;
      case FileType::IQ4_NL: case FileType::IQ4_XS: return n_gqa >= 4 ? DType::Q5_K : base;
      case FileType::Q4_K_M: case FileType::Q5_K_M:
        return use_more_bits(i, n_layer) ? DType::Q6_K : base;
      case FileType::Q4_K_S: return i < 4 ? DType::Q5_K : base;
      default: return base;
    }
  }
  if (has(name, "ffn_down")) {
    const int i = layer >= 0 ? layer : i_ffn_down_;
    ++i_ffn_down_;
    switch (ft) {
      case FileType::Q2_K: return DType::Q3_K;
      case FileType::Q3_K_M: return i < n_layer / 16 ? DType::Q5_K : DType::Q4_K;
      case FileType::Q3_K_L: return DType::Q5_K;
      case FileType::Q4_K_M: case FileType::Q5_K_M:
        return use_more_bits(i, n_layer) ? DType::Q6_K : base;
      case FileType::Q4_K_S: return i < n_layer / 8 ? DType::Q5_K : base;
      default: return base;
    }
  }
  if (has(name, "attn_output.weight")) {
    switch (ft) {
      case FileType::Q2_K: return DType::Q3_K;
      case FileType::Q3_K_M: return DType::Q4_K;
      case FileType::Q3_K_L: return DType::Q5_K;
      default: return base;
    }
  }
  if (has(name, "attn_qkv.weight")) {
    switch (ft) {
      case FileType::Q3_K_M: case FileType::Q3_K_L: return DType::Q4_K;
      case FileType::Q4_K_M: return DType::Q5_K;
      case FileType::Q5_K_M: return DType::Q6_K;
      default: return base;
    }
  }
  return base;
}

}  // namespace minfer
