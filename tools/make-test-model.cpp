// minfer-make-test-model: writes a random-weight model in a real architecture's shapes and
// metadata, with a real tokenizer copied from another GGUF, so llama.cpp and minfer can load
// and run the same file. Used where real weights are out of reach (Qwen) and where a test needs
// a model of chosen dimensions (quantization mixes).
//
//   minfer-make-test-model --preset qwen2.5-0.5b --type F16 --out q.gguf
//       --vocab-from .deps/llama.cpp/models/ggml-vocab-qwen2.gguf
//   minfer-make-test-model --arch llama --vocab-from smollm2.gguf --out small.gguf
//       --n-embd 512 --n-layer 4 --n-head 8 --n-head-kv 4 --n-ff 1536
//
// Weights are deterministic: each tensor has its own xoshiro256** stream seeded from --seed and
// the tensor name, so a tensor's values do not depend on the others or on their order.
// Scales keep activations well-conditioned through any depth (see weight_init()).
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "quant/quant.h"
#include "test-model-rng.h"

namespace minfer {
namespace {

struct Hparams {
  std::string arch = "llama";  // llama | qwen2 | qwen3 | gemma2 | gemma3 | phi3 | qwen3moe
  int64_t n_embd = 256;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t n_ff = 512;
  int64_t head_dim = 0;  // 0 = n_embd / n_head
  int64_t n_ctx = 512;
  double rope_freq_base = 10000.0;
  double rms_eps = 1e-5;
  bool tied = false;
  // gemma2 / gemma3 only (0: the key is not written)
  int64_t n_swa = 0;          // attention.sliding_window
  int64_t swa_pattern = 0;    // attention.sliding_window_pattern
  double rope_base_swa = 0;   // rope.freq_base_swa
  double attn_softcap = 0;    // attn_logit_softcapping
  double final_softcap = 0;   // final_logit_softcapping
  // mixture of experts (llama, qwen3moe): 0 = a dense FFN
  int64_t n_expert = 0;       // expert_count
  int64_t n_expert_used = 0;  // expert_used_count
  int64_t n_ff_exp = 0;       // expert_feed_forward_length (0: n_ff)
};

struct Options {
  Hparams hp;
  std::string preset;
  std::string vocab_from;
  bool vocab_bytes = false;
  std::string out;
  std::string name;
  DType type = DType::F32;
  uint64_t seed = 42;
};

// Real shapes. A preset sets every field; flags given on the command line override it.
struct Preset {
  const char* name;
  Hparams hp;
};
const Preset kPresets[] = {
    {"tiny", Hparams{}},
    {"smollm2-135m", Hparams{"llama", 576, 30, 9, 3, 1536, 0, 8192, 100000.0, 1e-5, true}},
    {"qwen2.5-0.5b", Hparams{"qwen2", 896, 24, 14, 2, 4864, 0, 32768, 1000000.0, 1e-6, true}},
    {"qwen3-0.6b", Hparams{"qwen3", 1024, 28, 16, 8, 3072, 128, 40960, 1000000.0, 1e-6, true}},
    {"qwen2.5-1.5b", Hparams{"qwen2", 1536, 28, 12, 2, 8960, 0, 32768, 1000000.0, 1e-6, true}},
    {"qwen2.5-3b", Hparams{"qwen2", 2048, 36, 16, 2, 11008, 0, 32768, 1000000.0, 1e-6, true}},
    // Llama-3.1-8B without its long-context RoPE factors (give --vocab-from ggml-vocab-llama-bpe.gguf
    // for its 128256-token vocabulary).
    {"llama-3.1-8b", Hparams{"llama", 4096, 32, 32, 8, 14336, 0, 131072, 500000.0, 1e-5, false}},
    // Qwen3-30B-A3B's layer (2048 wide, 32/4 heads of 128, 128 experts of width 768, 8 used);
    // 48 layers in the real model: give --n-layer to fit memory.
    {"qwen3-30b-a3b", Hparams{"qwen3moe", 2048, 48, 32, 4, 6144, 128, 40960, 1000000.0, 1e-6, false, 0, 0, 0, 0, 0,
                              128, 8, 768}},
};

// ---- command-line options: each declared once; the table drives parsing and --help ----

Expected<int64_t> parse_i64(std::string_view flag, std::string_view v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi) {
    return make_error("{}: '{}' is not an integer in [{}, {}]", flag, v, lo, hi);
  }
  return x;
}

Expected<double> parse_f64(std::string_view flag, std::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(x) || x <= 0) {
    return make_error("{}: '{}' is not a positive number", flag, v);
  }
  return x;
}

struct Flag {
  const char* name;
  const char* arg;  // nullptr for a switch
  const char* help;
  // Applies the value (empty for a switch) to the options.
  std::function<Status(Options&, std::string_view)> set;
};

// A flag that sets an integer hyperparameter (the preset is applied first, so it overrides).
Flag int_flag(const char* name, const char* help, int64_t Hparams::*field, int64_t lo, int64_t hi) {
  return {name, "N", help, [=](Options& o, std::string_view v) -> Status {
            auto x = parse_i64(name, v, lo, hi);
            if (!x) return x.error();
            o.hp.*field = *x;
            return Status::ok();
          }};
}

std::vector<Flag> make_flags() {
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  return {
      {"--preset", "NAME", "tiny | smollm2-135m | qwen2.5-0.5b | qwen3-0.6b | qwen2.5-1.5b | qwen2.5-3b | llama-3.1-8b | qwen3-30b-a3b (other flags override)",
       [](Options& o, std::string_view v) -> Status {
         o.preset = v;
         return Status::ok();
       }},
      {"--arch", "ARCH", "llama | qwen2 | qwen3 | gemma2 | gemma3 | phi3 | qwen3moe (default llama, or the preset's)",
       [](Options& o, std::string_view v) -> Status {
         if (v != "llama" && v != "qwen2" && v != "qwen3" && v != "gemma2" && v != "gemma3" && v != "phi3" &&
             v != "qwen3moe") {
           return make_error("--arch: unknown architecture '{}' (llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen3moe)", v);
         }
         o.hp.arch = v;
         return Status::ok();
       }},
      {"--vocab-from", "FILE", "GGUF whose tokenizer.* keys are copied (this or --vocab-bytes); n_vocab follows it",
       [](Options& o, std::string_view v) -> Status {
         o.vocab_from = v;
         return Status::ok();
       }},
      {"--vocab-bytes", nullptr, "a vocabulary of our own instead: SentencePiece with <unk> <s> </s> and the "
                                 "256 byte tokens (n_vocab 259), so no tokenizer file is needed (viz samples)",
       [](Options& o, std::string_view) -> Status {
         o.vocab_bytes = true;
         return Status::ok();
       }},
      int_flag("--n-embd", "embedding_length", &Hparams::n_embd, 1, kMaxDim),
      int_flag("--n-layer", "block_count", &Hparams::n_layer, 1, 4096),
      int_flag("--n-head", "attention.head_count", &Hparams::n_head, 1, 4096),
      int_flag("--n-head-kv", "attention.head_count_kv", &Hparams::n_head_kv, 1, 4096),
      int_flag("--n-ff", "feed_forward_length", &Hparams::n_ff, 1, kMaxDim),
      int_flag("--head-dim", "attention.key_length = value_length (default n_embd / n_head)",
               &Hparams::head_dim, 2, 4096),
      int_flag("--ctx", "context_length", &Hparams::n_ctx, 1, int64_t{1} << 24),
      {"--rope-base", "F", "rope.freq_base",
       [](Options& o, std::string_view v) -> Status {
         auto x = parse_f64("--rope-base", v);
         if (!x) return x.error();
         o.hp.rope_freq_base = *x;
         return Status::ok();
       }},
      {"--rms-eps", "F", "attention.layer_norm_rms_epsilon",
       [](Options& o, std::string_view v) -> Status {
         auto x = parse_f64("--rms-eps", v);
         if (!x) return x.error();
         o.hp.rms_eps = *x;
         return Status::ok();
       }},
      int_flag("--swa", "attention.sliding_window (gemma2, gemma3)", &Hparams::n_swa, 1, int64_t{1} << 24),
      int_flag("--swa-pattern", "attention.sliding_window_pattern: every P-th layer global (gemma2, gemma3)",
               &Hparams::swa_pattern, 1, 4096),
      {"--rope-base-swa", "F", "rope.freq_base_swa (gemma3)",
       [](Options& o, std::string_view v) -> Status {
         auto x = parse_f64("--rope-base-swa", v);
         if (!x) return x.error();
         o.hp.rope_base_swa = *x;
         return Status::ok();
       }},
      {"--attn-softcap", "F", "attn_logit_softcapping (gemma2)",
       [](Options& o, std::string_view v) -> Status {
         auto x = parse_f64("--attn-softcap", v);
         if (!x) return x.error();
         o.hp.attn_softcap = *x;
         return Status::ok();
       }},
      {"--final-softcap", "F", "final_logit_softcapping (gemma2, gemma3)",
       [](Options& o, std::string_view v) -> Status {
         auto x = parse_f64("--final-softcap", v);
         if (!x) return x.error();
         o.hp.final_softcap = *x;
         return Status::ok();
       }},
      int_flag("--n-expert", "expert_count (llama: Mixtral-style; qwen3moe)", &Hparams::n_expert, 1, 4096),
      int_flag("--n-expert-used", "expert_used_count", &Hparams::n_expert_used, 1, 4096),
      int_flag("--n-ff-exp", "expert_feed_forward_length (default n_ff)", &Hparams::n_ff_exp, 1, kMaxDim),
      {"--tied", nullptr, "no output.weight: the output projection reuses token_embd",
       [](Options& o, std::string_view) -> Status {
         o.hp.tied = true;
         return Status::ok();
       }},
      {"--untied", nullptr, "write output.weight (undoes a preset's tying)",
       [](Options& o, std::string_view) -> Status {
         o.hp.tied = false;
         return Status::ok();
       }},
      {"--type", "T", "F32 | F16 | BF16 for 2-D weights (1-D norms and biases stay F32)",
       [](Options& o, std::string_view v) -> Status {
         auto t = dtype_from_name(v);
         if (!t || (*t != DType::F32 && *t != DType::F16 && *t != DType::BF16)) {
           return make_error("--type: '{}' is not one of F32, F16, BF16", v);
         }
         o.type = *t;
         return Status::ok();
       }},
      {"--seed", "N", "PRNG seed (default 42)",
       [](Options& o, std::string_view v) -> Status {
         const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), o.seed);
         if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
           return make_error("--seed: '{}' is not an unsigned 64-bit integer", v);
         }
         return Status::ok();
       }},
      {"--name", "S", "general.name (default: derived from the shapes)",
       [](Options& o, std::string_view v) -> Status {
         o.name = v;
         return Status::ok();
       }},
      {"--out", "FILE", "output GGUF path (required)",
       [](Options& o, std::string_view v) -> Status {
         o.out = v;
         return Status::ok();
       }},
  };
}

void print_help(const std::vector<Flag>& flags) {
  std::printf("usage: minfer-make-test-model --vocab-from FILE.gguf --out FILE.gguf [options]\n");
  for (const Flag& f : flags) {
    const std::string lhs = std::string(f.name) + (f.arg ? std::string(" ") + f.arg : "");
    std::printf("  %-20s %s\n", lhs.c_str(), f.help);
  }
}

// Two passes: the preset first (it sets every field), then every other flag in order.
Expected<Options> parse_options(int argc, char** argv, const std::vector<Flag>& flags) {
  Options o;
  auto find = [&](std::string_view name) -> const Flag* {
    for (const Flag& f : flags) {
      if (name == f.name) return &f;
    }
    return nullptr;
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      const Flag* f = find(a);
      if (!f) return make_error("unknown argument '{}' (see --help)", a);
      std::string_view v;
      if (f->arg) {
        if (i + 1 >= argc) return make_error("{} needs a value ({})", a, f->arg);
        v = argv[++i];
      }
      const bool is_preset = a == "--preset";
      if ((pass == 0) != is_preset) continue;
      MINFER_TRY(f->set(o, v));
      if (is_preset) {
        const Preset* p = nullptr;
        for (const Preset& q : kPresets) {
          if (o.preset == q.name) p = &q;
        }
        if (!p) return make_error("--preset: unknown preset '{}' (tiny, smollm2-135m, qwen2.5-0.5b, qwen3-0.6b, qwen2.5-1.5b, qwen2.5-3b, llama-3.1-8b, qwen3-30b-a3b)", v);
        o.hp = p->hp;
      }
    }
  }
  return o;
}

Status validate(const Options& o) {
  const Hparams& hp = o.hp;
  if (o.out.empty()) return make_error("--out is required");
  if (o.vocab_from.empty() == !o.vocab_bytes) {
    return make_error("give one of --vocab-from FILE (a GGUF with tokenizer.* keys) and --vocab-bytes");
  }
  if (o.preset != "" && o.preset != "tiny") {
    for (const Preset& p : kPresets) {
      if (o.preset == p.name && hp.arch != p.hp.arch) {
        return make_error("--arch {} contradicts --preset {} (architecture {})", hp.arch, o.preset, p.hp.arch);
      }
    }
  }
  if (hp.head_dim == 0 && hp.n_embd % hp.n_head != 0) {
    return make_error("n_embd {} is not a multiple of n_head {}; give --head-dim", hp.n_embd, hp.n_head);
  }
  if (hp.n_head % hp.n_head_kv != 0) {
    return make_error("n_head {} is not a multiple of n_head_kv {}", hp.n_head, hp.n_head_kv);
  }
  const int64_t hd = hp.head_dim ? hp.head_dim : hp.n_embd / hp.n_head;
  if (hd % 2 != 0) return make_error("head dimension {} is odd; RoPE rotates pairs", hd);
  const bool gemma = hp.arch == "gemma2" || hp.arch == "gemma3";
  if (!gemma && (hp.n_swa || hp.swa_pattern || hp.rope_base_swa || hp.attn_softcap || hp.final_softcap))
    return make_error("--swa, --swa-pattern, --rope-base-swa and the soft-caps are for gemma2 / gemma3, not {}", hp.arch);
  if (gemma && !hp.tied) return make_error("{} ties its output to the embeddings: give --tied", hp.arch);
  const bool moe_arch = hp.arch == "llama" || hp.arch == "qwen3moe";
  if ((hp.n_expert || hp.n_expert_used || hp.n_ff_exp) && !moe_arch)
    return make_error("--n-expert, --n-expert-used and --n-ff-exp are for llama and qwen3moe, not {}", hp.arch);
  if ((hp.n_expert == 0) != (hp.n_expert_used == 0) || hp.n_expert_used > hp.n_expert)
    return make_error("--n-expert {} and --n-expert-used {}: give both, used <= count", hp.n_expert, hp.n_expert_used);
  if (hp.arch == "qwen3moe" && hp.n_expert == 0) return make_error("qwen3moe needs --n-expert and --n-expert-used");
  if (hp.arch == "llama" && hp.n_ff_exp && hp.n_ff_exp != hp.n_ff)
    return make_error("--n-ff-exp {} != --n-ff {}: a Mixtral-style llama's experts are feed_forward_length wide",
                      hp.n_ff_exp, hp.n_ff);
  if (hp.arch == "phi3" && hd * hp.n_head != hp.n_embd)
    return make_error("phi3: n_head {} x head dim {} must equal n_embd {} (its fused attn_qkv)", hp.n_head, hd, hp.n_embd);
  return Status::ok();
}

// ---- tensors ----

// How a tensor's values are drawn: normal(mean, std).
struct Init {
  double mean = 0.0;
  double std = 1.0;
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // GGUF order: shape[0] = ne[0] = fan-in of a projection
  bool is_matrix = false;      // 2-D weight: stored as --type; 1-D stays F32
  Init init;
};

// Scales (why): every projection y = W x gets std 1/sqrt(fan_in), so an input of unit RMS (the
// RMS-normed residual) yields outputs of unit scale; attention scores q.k/sqrt(d) are then
// ~N(0, 1), neither uniform nor one-hot. Norm weights are 1 + N(0, 0.1^2): near identity but
// not exactly, so a kernel that ignores them is caught. The logits get std ~2 (output std
// 2/sqrt(n_embd)) so softmax is peaked enough for greedy decoding to be meaningful. A tied
// model reads its embedding with that same scale, which also keeps the residual stream
// (embedding plus O(1) layer outputs) well-conditioned; an untied one uses unit embeddings.
std::vector<TensorSpec> tensor_specs(const Hparams& hp, int64_t n_vocab) {
  const int64_t hd = hp.head_dim ? hp.head_dim : hp.n_embd / hp.n_head;
  const int64_t n_q = hd * hp.n_head;
  const int64_t n_kv = hd * hp.n_head_kv;
  auto proj = [](std::string name, int64_t fan_in, int64_t n_out) {
    return TensorSpec{std::move(name), {fan_in, n_out}, true, {0.0, 1.0 / std::sqrt(double(fan_in))}};
  };
  auto norm = [](std::string name, int64_t n) { return TensorSpec{std::move(name), {n}, false, {1.0, 0.1}}; };
  auto bias = [](std::string name, int64_t n) { return TensorSpec{std::move(name), {n}, false, {0.0, 0.1}}; };
  const double out_std = 2.0 / std::sqrt(double(hp.n_embd));

  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {hp.n_embd, n_vocab}, true, {0.0, hp.tied ? out_std : 1.0}});
  const bool gemma = hp.arch == "gemma2" || hp.arch == "gemma3";
  for (int64_t i = 0; i < hp.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    t.push_back(norm(b + "attn_norm.weight", hp.n_embd));
    if (hp.arch == "phi3") {  // Q, K, V rows in one tensor
      t.push_back(proj(b + "attn_qkv.weight", hp.n_embd, n_q + 2 * n_kv));
    } else {
      t.push_back(proj(b + "attn_q.weight", hp.n_embd, n_q));
      t.push_back(proj(b + "attn_k.weight", hp.n_embd, n_kv));
      t.push_back(proj(b + "attn_v.weight", hp.n_embd, n_kv));
    }
    if (hp.arch == "qwen2") {
      t.push_back(bias(b + "attn_q.bias", n_q));
      t.push_back(bias(b + "attn_k.bias", n_kv));
      t.push_back(bias(b + "attn_v.bias", n_kv));
    }
    if (hp.arch == "qwen3" || hp.arch == "gemma3" || hp.arch == "qwen3moe") {
      t.push_back(norm(b + "attn_q_norm.weight", hd));
      t.push_back(norm(b + "attn_k_norm.weight", hd));
    }
    t.push_back(proj(b + "attn_output.weight", n_q, hp.n_embd));
    if (gemma) t.push_back(norm(b + "post_attention_norm.weight", hp.n_embd));
    t.push_back(norm(b + "ffn_norm.weight", hp.n_embd));
    if (hp.arch == "phi3") {  // gate rows, then up rows
      t.push_back(proj(b + "ffn_up.weight", hp.n_embd, 2 * hp.n_ff));
    } else if (hp.n_expert) {  // router (stays F32, as llama-quantize keeps it) and 3-D experts
      const int64_t f = hp.n_ff_exp ? hp.n_ff_exp : hp.n_ff;
      TensorSpec router = proj(b + "ffn_gate_inp.weight", hp.n_embd, hp.n_expert);
      router.is_matrix = false;
      t.push_back(router);
      auto experts = [&](const char* name, int64_t fan_in, int64_t n_out) {
        TensorSpec e = proj(b + name, fan_in, n_out);
        e.shape.push_back(hp.n_expert);
        t.push_back(e);
      };
      experts("ffn_gate_exps.weight", hp.n_embd, f);
      experts("ffn_up_exps.weight", hp.n_embd, f);
      experts("ffn_down_exps.weight", f, hp.n_embd);
    } else {
      t.push_back(proj(b + "ffn_gate.weight", hp.n_embd, hp.n_ff));
      t.push_back(proj(b + "ffn_up.weight", hp.n_embd, hp.n_ff));
    }
    if (!hp.n_expert) t.push_back(proj(b + "ffn_down.weight", hp.n_ff, hp.n_embd));
    if (gemma) t.push_back(norm(b + "post_ffw_norm.weight", hp.n_embd));
  }
  t.push_back(norm("output_norm.weight", hp.n_embd));
  if (!hp.tied) t.push_back({"output.weight", {hp.n_embd, n_vocab}, true, {0.0, out_std}});
  return t;
}

// Fills dst with the tensor's values, row by row, converted to `type`.
Status fill_tensor(const TensorSpec& spec, DType type, uint64_t seed, uint8_t* dst, size_t n_bytes) {
  const int64_t ne0 = spec.shape[0];
  int64_t n_rows = 1;
  for (size_t d = 1; d < spec.shape.size(); ++d) n_rows *= spec.shape[d];
  const size_t rb = row_bytes(type, ne0);
  MINFER_ASSERT(rb * static_cast<size_t>(n_rows) == n_bytes);
  TestModelRng rng(seed, spec.name);
  std::vector<float> row(static_cast<size_t>(ne0));  // [ne0]
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& x : row) x = static_cast<float>(spec.init.mean + spec.init.std * rng.normal());
    uint8_t* out = dst + static_cast<size_t>(r) * rb;
    if (type == DType::F32) std::memcpy(out, row.data(), rb);
    else quantize_row(type, row.data(), out, ne0);
  }
  return Status::ok();
}

uint32_t file_type_of(DType t) {  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32
  return t == DType::F16 ? 1 : t == DType::BF16 ? 32 : 0;
}

// --vocab-bytes: SentencePiece ("llama") with byte fallback: <unk> <s> </s>, then <0x00>..<0xFF>
// (token type BYTE), so any text encodes as its UTF-8 bytes.
std::vector<GgufKV> byte_vocab() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // llama_token_type: UNKNOWN 2, CONTROL 3, BYTE 6
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  std::vector<GgufKV> kvs;
  kvs.push_back({"tokenizer.ggml.model", GgufValue::make_string("llama")});
  kvs.push_back({"tokenizer.ggml.scores", GgufValue(GgufValue::Storage(GgufArray::of(std::vector<float>(tokens.size(), 0.0f))))});
  kvs.push_back({"tokenizer.ggml.token_type", GgufValue(GgufValue::Storage(GgufArray::of(types)))});
  kvs.push_back({"tokenizer.ggml.tokens", GgufValue(GgufValue::Storage(GgufArray::strings(tokens)))});
  kvs.push_back({"tokenizer.ggml.bos_token_id", GgufValue(GgufValue::Storage(uint32_t{1}))});
  kvs.push_back({"tokenizer.ggml.eos_token_id", GgufValue(GgufValue::Storage(uint32_t{2}))});
  kvs.push_back({"tokenizer.ggml.unknown_token_id", GgufValue(GgufValue::Storage(uint32_t{0}))});
  return kvs;
}

Status run(const Options& o) {
  const Hparams& hp = o.hp;
  std::vector<GgufKV> tokenizer_kvs;  // tokenizer.* keys, copied or --vocab-bytes
  if (o.vocab_bytes) {
    tokenizer_kvs = byte_vocab();
  } else {
    auto vocab = GgufFile::open(o.vocab_from);
    if (!vocab) return vocab.error();
    for (const GgufKV& kv : vocab->metadata())
      if (kv.key.starts_with("tokenizer.")) tokenizer_kvs.push_back(kv);
  }
  int64_t n_vocab = 0;
  for (const GgufKV& kv : tokenizer_kvs)
    if (const GgufArray* a = kv.key == "tokenizer.ggml.tokens" ? kv.value.as_array() : nullptr) n_vocab = a->size();
  if (n_vocab == 0) return make_error("--vocab-from {}: no tokenizer.ggml.tokens, or an empty one", o.vocab_from);

  const int64_t hd = hp.head_dim ? hp.head_dim : hp.n_embd / hp.n_head;
  const std::string& a = hp.arch;
  const std::string name = !o.name.empty() ? o.name
                                           : fmt::format("minfer-test-{}-{}x{}-{}", a, hp.n_layer, hp.n_embd,
                                                         o.preset.empty() ? "custom" : o.preset);
  GgufWriter w;
  w.add_string("general.architecture", a);
  w.add_string("general.name", name);
  w.add_u32("general.file_type", file_type_of(o.type));
  w.add_u32(a + ".vocab_size", static_cast<uint32_t>(n_vocab));
  w.add_u32(a + ".context_length", static_cast<uint32_t>(hp.n_ctx));
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(hp.n_embd));
  w.add_u32(a + ".block_count", static_cast<uint32_t>(hp.n_layer));
  w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(hp.n_ff));
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(hp.n_head));
  w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(hp.n_head_kv));
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(hp.rms_eps));
  w.add_f32(a + ".rope.freq_base", static_cast<float>(hp.rope_freq_base));
  w.add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(hd));
  if (hp.n_expert) {
    w.add_u32(a + ".expert_count", static_cast<uint32_t>(hp.n_expert));
    w.add_u32(a + ".expert_used_count", static_cast<uint32_t>(hp.n_expert_used));
    if (a == "qwen3moe")  // always written: readers' defaults differ when it is absent
      w.add_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(hp.n_ff_exp ? hp.n_ff_exp : hp.n_ff));
  }
  if (a == "qwen3" || a == "qwen3moe" || a == "gemma2" || a == "gemma3" || hd * hp.n_head != hp.n_embd) {
    w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w.add_u32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  }
  if (hp.n_swa) w.add_u32(a + ".attention.sliding_window", static_cast<uint32_t>(hp.n_swa));
  if (hp.swa_pattern) w.add_u32(a + ".attention.sliding_window_pattern", static_cast<uint32_t>(hp.swa_pattern));
  if (hp.rope_base_swa) w.add_f32(a + ".rope.freq_base_swa", static_cast<float>(hp.rope_base_swa));
  if (hp.attn_softcap) w.add_f32(a + ".attn_logit_softcapping", static_cast<float>(hp.attn_softcap));
  if (hp.final_softcap) w.add_f32(a + ".final_logit_softcapping", static_cast<float>(hp.final_softcap));
  for (const GgufKV& kv : tokenizer_kvs) w.add(kv.key, kv.value);
  const size_t n_copied = tokenizer_kvs.size();

  const std::vector<TensorSpec> specs = tensor_specs(hp, n_vocab);
  int64_t n_params = 0;
  for (const TensorSpec& s : specs) {
    const DType t = s.is_matrix ? o.type : DType::F32;
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    n_params += n;
    const uint64_t seed = o.seed;
    w.add_tensor(s.name, t, s.shape, [s, t, seed](uint8_t* dst, size_t n_bytes) {
      return fill_tensor(s, t, seed, dst, n_bytes);
    });
  }
  MINFER_TRY(w.write(o.out));
  std::printf("{\"out\":\"%s\",\"arch\":\"%s\",\"n_vocab\":%lld,\"n_params\":%lld,\"n_tensors\":%zu,"
              "\"tokenizer_keys\":%zu}\n",
              o.out.c_str(), a.c_str(), static_cast<long long>(n_vocab), static_cast<long long>(n_params),
              specs.size(), n_copied);
  return Status::ok();
}

}  // namespace
}  // namespace minfer

int main(int argc, char** argv) {
  using namespace minfer;
  const std::vector<Flag> flags = make_flags();
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "-h" || std::string_view(argv[i]) == "--help") {
      print_help(flags);
      return 0;
    }
  }
  auto o = parse_options(argc, argv, flags);
  Status s = o ? validate(*o) : Status(o.error());
  if (s) s = run(*o);
  if (!s) {
    std::fprintf(stderr, "minfer-make-test-model: %s\n", s.error().message.c_str());
    return 1;
  }
  return 0;
}
