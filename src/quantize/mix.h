// Per-tensor type choice for `minfer quantize`: the usual mixes of the llama.cpp file types
// (Q4_K_M etc.). A pure function of the tensor's name, shape and position among its kind, so it
// is unit-tested without any file.
//
//   auto ft = file_type_from_name("Q4_K_M");          // FileType{...}
//   MixPlanner plan(*ft, model_facts);
//   DType t = plan.choose("blk.3.ffn_down.weight", {4864, 896});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace minfer {

// The target file types (llama_ftype values, written to general.file_type).
#define MINFER_FILE_TYPES(X)       \
  X(F32, 0, F32)                   \
  X(F16, 1, F16)                   \
  X(Q4_0, 2, Q4_0)                 \
  X(Q4_1, 3, Q4_1)                 \
  X(Q8_0, 7, Q8_0)                 \
  X(Q5_0, 8, Q5_0)                 \
  X(Q5_1, 9, Q5_1)                 \
  X(Q2_K, 10, Q2_K)                \
  X(Q3_K_S, 11, Q3_K)              \
  X(Q3_K_M, 12, Q3_K)              \
  X(Q3_K_L, 13, Q3_K)              \
  X(Q4_K_S, 14, Q4_K)              \
  X(Q4_K_M, 15, Q4_K)              \
  X(Q5_K_S, 16, Q5_K)              \
  X(Q5_K_M, 17, Q5_K)              \
  X(Q6_K, 18, Q6_K)                \
  X(IQ4_NL, 25, IQ4_NL)            \
  X(IQ4_XS, 30, IQ4_XS)            \
  X(BF16, 32, BF16)

enum class FileType : uint32_t {
#define MINFER_X(name, id, base) name = id,
  MINFER_FILE_TYPES(MINFER_X)
#undef MINFER_X
};

std::string_view file_type_name(FileType t);
// The name of a GGUF general.file_type value, or nullopt for one not listed above.
std::optional<std::string_view> file_type_name_of(int64_t id);
DType file_type_base(FileType t);  // the type most 2-D tensors get
// Accepts the names above plus the aliases Q3_K (= Q3_K_M), Q4_K (= Q4_K_M), Q5_K (= Q5_K_M).
std::optional<FileType> file_type_from_name(std::string_view name);
std::string file_type_names();  // "F16, BF16, Q4_0, ..." for help and errors

struct ModelFacts {
  int n_layer = 0;         // block_count
  int n_head = 1;
  int n_head_kv = 1;
  bool has_output = true;  // false: token_embd doubles as the output projection
};

class MixPlanner {
 public:
  MixPlanner(FileType ft, ModelFacts facts, bool pure = false)
      : ft_(ft), facts_(facts), pure_(pure) {}

  // Type for the next tensor; call in file order (attn_v / ffn_down are counted per call).
  // shape in GGUF order. Tensors that are not quantized (1-D, non-weights) keep F32.
  DType choose(std::string_view name, const std::vector<int64_t>& shape);

 private:
  DType choose_mixed(std::string_view name, int layer) ;
  FileType ft_;
  ModelFacts facts_;
  bool pure_;
  int i_attn_v_ = 0;
  int i_ffn_down_ = 0;
};

// Whether a tensor of this name and shape is a quantizable weight matrix.
bool is_quantizable(std::string_view name, const std::vector<int64_t>& shape);

}  // namespace minfer
