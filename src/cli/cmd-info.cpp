// `minfer info MODEL [--json [--no-vocab]] [--tensors] [-c N] [-b N] [--kv-type f16|f32] [--swa-full]`
#include <algorithm>
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "api/gguf-json.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/reader.h"
#include "models/model.h"
#include "runtime/chat-prompt.h"
#include "runtime/context.h"

namespace minfer::cli {
namespace {

using nlohmann::json;

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) { b /= 1024; ++u; }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.2f} K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

struct Summary {
  std::string arch, name;
  int64_t n_ctx_train = 0, n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0, n_head_kv = 0;
  int64_t head_dim_k = 0, head_dim_v = 0, n_vocab = 0;
  double rope_base = 0, rms_eps = 0;
  uint64_t n_params = 0, weight_bytes = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> types;  // name -> (tensors, bytes)
};

int64_t get_i(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) return 0;
  if (auto i = v->as_int()) return *i;
  if (const GgufArray* a = v->as_array(); a && !a->empty())  // per-layer arrays
    return a->int_at(0).value_or(0);
  return 0;
}

Summary summarize(const GgufFile& f) {
  Summary s;
  s.arch = f.get_string("general.architecture").has_value() ? *f.get_string("general.architecture") : "";
  s.name = f.get_string("general.name").has_value() ? *f.get_string("general.name") : "";
  const std::string a = s.arch + ".";
  s.n_ctx_train = get_i(f, a + "context_length");
  s.n_embd = get_i(f, a + "embedding_length");
  s.n_layer = get_i(f, a + "block_count");
  s.n_ff = get_i(f, a + "feed_forward_length");
  s.n_head = get_i(f, a + "attention.head_count");
  s.n_head_kv = f.find(a + "attention.head_count_kv") ? get_i(f, a + "attention.head_count_kv") : s.n_head;
  const int64_t hd = s.n_head > 0 ? s.n_embd / s.n_head : 0;
  s.head_dim_k = f.find(a + "attention.key_length") ? get_i(f, a + "attention.key_length") : hd;
  s.head_dim_v = f.find(a + "attention.value_length") ? get_i(f, a + "attention.value_length") : hd;
  if (const GgufValue* v = f.find(a + "rope.freq_base")) s.rope_base = v->as_float().value_or(0);
  if (const GgufValue* v = f.find(a + "attention.layer_norm_rms_epsilon")) s.rms_eps = v->as_float().value_or(0);
  if (const GgufValue* v = f.find("tokenizer.ggml.tokens"); v && v->as_array())
    s.n_vocab = static_cast<int64_t>(v->as_array()->size());
  for (const GgufTensor& t : f.tensors()) {
    s.n_params += static_cast<uint64_t>(t.n_elements());
    s.weight_bytes += t.n_bytes;
    auto& e = s.types[std::string(dtype_name(t.type))];
    e.first++;
    e.second += t.n_bytes;
  }
  return s;
}

std::string token_text(const GgufFile& f, int64_t id) {
  const GgufValue* v = f.find("tokenizer.ggml.tokens");
  const GgufArray* a = v ? v->as_array() : nullptr;
  if (!a || a->elem_type() != GgufType::STRING || id < 0 || id >= static_cast<int64_t>(a->size())) return "?";
  return std::string(a->string_at(static_cast<size_t>(id)));
}

}  // namespace

int cmd_info(int argc, char** argv) {
  CLI::App app{"Show a GGUF model's architecture, hyperparameters, tokenizer, tensors and memory needs",
               "minfer info"};
  std::string model;
  bool as_json = false, tensors = false, no_vocab = false;
  int n_ctx = 4096;
  int n_batch = 512;
  bool swa_full = false;
  KvTypeOptions kv_opt;
  app.add_option("MODEL", model, "GGUF file (first part of a split model) or cached model name")->required();
  app.add_flag("--json", as_json, "print one JSON object (metadata in full, tensors, summary)");
  app.add_flag("--tensors", tensors, "list every tensor");
  app.add_flag("--no-vocab", no_vocab,
               "with --json: leave out the vocabulary arrays (tokens, scores, token types, merges); their "
               "types and lengths stay in metadata_types and vocab_lengths");
  add_ctx_size(app, n_ctx, "context size for the KV-cache memory estimate; 0 = the model's");
  add_kv_type(app, kv_opt);
  add_batch_size(app, n_batch, "batch size for the estimate (a sliding-window ring holds n_swa + n_batch rows)");
  add_swa_full_flag(app, swa_full);
  OffloadOptions offload_opt;
  add_offload_options(app, offload_opt);
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  auto offload = offload_opt.resolve();
  if (!offload) return fail("info", offload.error().message);
  auto kv_dtype = kv_opt.dtype();
  if (!kv_dtype) return usage_fail("info", kv_dtype.error().message);
  const std::string kv_type = kv_opt.name();
  if (no_vocab && !as_json) return usage_fail("info", "--no-vocab shapes the --json output; give --json too");
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  auto file = GgufFile::open(path);
  if (!file) {
    std::fprintf(stderr, "minfer: %s\n", file.error().message.c_str());
    return 1;
  }
  const GgufFile& f = *file;
  const Summary s = summarize(f);
  if (n_ctx == 0) n_ctx = context_for_model(0, s.n_ctx_train);
  const ChatTemplateChoice tmpl = choose_chat_template(f);  // the GGUF's template or the built-in fallback
  // The hyperparameters as minfer runs them (family defaults applied), or why it cannot.
  auto loaded = Model::load(path);
  const ModelHparams* hp = loaded ? &(*loaded)->hparams() : nullptr;
  int64_t n_swa_layers = 0;
  if (hp)
    for (int64_t il = 0; il < hp->n_layer; ++il) n_swa_layers += hp->is_swa(il) ? 1 : 0;
  // The cache as a context allocates it (Context::kv_footprint); a model that does not run
  // here: every layer n_ctx rows of the file's head sizes.
  auto footprint = [&](DType t) {
    Context::KvFootprint fp;
    if (hp) return Context::kv_footprint(*hp, static_cast<int>(n_ctx), n_batch, t, swa_full);
    fp.layers_full = s.n_layer;
    fp.bytes_full = static_cast<size_t>(s.n_layer) * static_cast<size_t>(n_ctx) *
                    (kv_row_bytes(t, s.n_head_kv * s.head_dim_k) + kv_row_bytes(t, s.n_head_kv * s.head_dim_v));
    return fp;
  };
  const Context::KvFootprint kvf = footprint(*kv_dtype);
  // What each cache type would take (llama.cpp's -ctk/-ctv choices that run here).
  std::vector<std::pair<std::string, uint64_t>> kv_by_type;
  const bool whole_blocks = s.head_dim_k % 32 == 0 && s.head_dim_v % 32 == 0;
  for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    if (dtype_info(t).block_elems > 1 && !whole_blocks) continue;  // a quantized cache needs heads of whole blocks
    const Context::KvFootprint ft = footprint(t);
    kv_by_type.emplace_back(std::string(kv_type_name(t)), ft.bytes_full + ft.bytes_swa);
  }
  const int swa_ring = kvf.rows_swa;
  const int64_t n_ring_layers = kvf.layers_swa;
  const uint64_t kv_bytes_full = kvf.bytes_full, kv_bytes_swa = kvf.bytes_swa;
  const uint64_t kv_bytes = kv_bytes_full + kv_bytes_swa;
  // Where -ngl / --device would put the layers (runtime/placement.h), and what each device holds:
  // the weights of its layers (the tied embedding too when it holds the output) and their cache.
  struct DeviceShare {
    std::string name, layers;
    uint64_t weights = 0, kv = 0;
  };
  std::vector<DeviceShare> shares;
  std::string host_layers;
  if (hp && !offload->devices.empty()) {
    const LayerPlacement lp{.n_layer = hp->n_layer, .n_gpu_layers = offload->n_gpu_layers,
                            .n_devices = static_cast<int>(offload->devices.size())};
    const bool tied = std::none_of(f.tensors().begin(), f.tensors().end(),
                                   [](const GgufTensor& t) { return t.name == "output.weight"; });
    auto range = [](int64_t a, int64_t b) { return a == b ? fmt::format("layer {}", a) : fmt::format("layers {}..{}", a, b); };
    const size_t row = kv_row_bytes(*kv_dtype, hp->n_embd_k()) + kv_row_bytes(*kv_dtype, hp->n_embd_v());
    for (int d = 0; d < lp.n_devices; ++d) {
      DeviceShare sh{offload->devices[static_cast<size_t>(d)], "", 0, 0};
      int64_t lo = -1, hi = -1;
      for (int64_t il = 0; il < hp->n_layer; ++il)
        if (lp.device_of_layer(il) == d) {
          if (lo < 0) lo = il;
          hi = il;
          const int64_t rows = swa_ring > 0 && hp->is_swa(il) ? swa_ring : n_ctx;
          sh.kv += static_cast<uint64_t>(rows) * row;
        }
      const bool out = lp.device_of_layer(hp->n_layer) == d;
      sh.layers = (lo >= 0 ? range(lo, hi) : "") + (out ? (lo >= 0 ? " and the output" : "the output") : "");
      for (const GgufTensor& t : f.tensors()) {
        const bool embd = t.name == "token_embd.weight";
        if ((embd && tied && out) || (!embd && lp.device_of(t.name) == d)) sh.weights += t.n_bytes;
      }
      shares.push_back(sh);
    }
    const int64_t n_host = hp->n_layer - lp.n_offloaded();
    host_layers = (n_host > 0 ? range(0, n_host - 1) : std::string("the input layer")) +
                  (lp.output_offloaded() ? "" : " and the output");
  }

  if (as_json) {
    json j;
    j["file"] = path;
    j["version"] = f.version();
    j["alignment"] = f.alignment();
    json parts = json::array();
    for (const GgufPart& p : f.parts())
      parts.push_back({{"path", p.path}, {"size", p.file_size}, {"n_tensors", p.n_tensors},
                       {"data_offset", p.data_offset}});
    j["parts"] = parts;
    json md = json::object(), md_types = json::object(), vocab_lengths = json::object();
    for (const GgufKV& kv : f.metadata()) {
      std::string type(gguf_type_name(kv.value.type()));
      const GgufArray* a = kv.value.as_array();
      if (a) type += fmt::format("[{}]", gguf_type_name(a->elem_type()));
      md_types[kv.key] = type;
      const bool vocab_array = a && (kv.key == "tokenizer.ggml.tokens" || kv.key == "tokenizer.ggml.scores" ||
                                     kv.key == "tokenizer.ggml.token_type" || kv.key == "tokenizer.ggml.merges");
      if (no_vocab && vocab_array) {
        vocab_lengths[kv.key] = a->size();
        continue;
      }
      md[kv.key] = api::gguf_value_json(kv.value);
    }
    j["metadata"] = md;
    j["metadata_types"] = md_types;
    if (no_vocab) j["vocab_lengths"] = vocab_lengths;
    json ts = json::array();
    for (const GgufTensor& t : f.tensors())
      ts.push_back({{"name", t.name}, {"type", std::string(dtype_name(t.type))}, {"shape", t.shape},
                    {"offset", t.offset}, {"part", t.part}, {"n_bytes", t.n_bytes},
                    {"data_offset", f.parts()[t.part].data_offset + t.offset}});
    j["tensors"] = ts;
    json types = json::object();
    for (const auto& [name, e] : s.types) types[name] = {{"n_tensors", e.first}, {"n_bytes", e.second}};
    j["summary"] = {{"architecture", s.arch}, {"name", s.name}, {"n_params", s.n_params},
                    {"n_vocab", s.n_vocab}, {"n_ctx_train", s.n_ctx_train}, {"n_embd", s.n_embd},
                    {"n_layer", s.n_layer}, {"n_ff", s.n_ff}, {"n_head", s.n_head},
                    {"n_head_kv", s.n_head_kv}, {"head_dim_k", s.head_dim_k},
                    {"head_dim_v", s.head_dim_v}, {"types", types},
                    {"chat_template", tmpl.fallback == nullptr},
                    {"runs", hp != nullptr}, {"load_error", hp ? json(nullptr) : json(loaded.error().message)},
                    {"sliding_window", hp ? hp->n_swa : 0}, {"n_swa_layers", n_swa_layers},
                    {"n_expert", hp ? hp->n_expert : 0}, {"n_expert_used", hp ? hp->n_expert_used : 0},
                    {"chat_template_fallback", tmpl.fallback ? json(std::string(tmpl.fallback->name)) : json(nullptr)}};
    j["memory"] = {{"n_ctx", n_ctx}, {"kv_type", kv_type}, {"weights_bytes", s.weight_bytes},
                   {"kv_bytes", kv_bytes}, {"total_bytes", s.weight_bytes + kv_bytes},
                   {"n_batch", n_batch}, {"swa_full", swa_full},
                   {"kv_layers_full", kvf.layers_full}, {"kv_bytes_full_layers", kv_bytes_full},
                   {"kv_layers_swa", n_ring_layers}, {"kv_rows_swa", swa_ring}, {"kv_bytes_swa_layers", kv_bytes_swa}};
    json by_type = json::object();
    for (const auto& [name, bytes] : kv_by_type) by_type[name] = bytes;
    j["memory"]["kv_bytes_by_type"] = by_type;
    if (!shares.empty()) {
      json devs = json::array();
      for (const DeviceShare& sh : shares)
        devs.push_back({{"device", sh.name}, {"layers", sh.layers}, {"weights_bytes", sh.weights}, {"kv_bytes", sh.kv}});
      j["offload"] = {{"n_gpu_layers", offload->n_gpu_layers}, {"devices", devs}, {"cpu", host_layers}};
    }
    std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }

  std::string out;
  auto line = [&out](std::string_view k, const std::string& v) { out += fmt::format("{:<16} {}\n", k, v); };
  line("file", fmt::format("{} (GGUF v{}, {})", path, f.version(), human_bytes(static_cast<double>(f.total_file_size()))));
  if (f.parts().size() > 1)
    for (size_t i = 0; i < f.parts().size(); ++i)
      line(i == 0 ? "parts" : "", fmt::format("{}: {} ({}, {} tensors)", i + 1, f.parts()[i].path,
                                              human_bytes(static_cast<double>(f.parts()[i].file_size)), f.parts()[i].n_tensors));
  line("architecture", s.arch.empty() ? "(missing general.architecture)" : s.arch);
  if (!s.name.empty()) line("name", s.name);
  line("parameters", fmt::format("{} ({})", human_count(static_cast<double>(s.n_params)), s.n_params));
  line("context", fmt::format("{} (trained)", s.n_ctx_train));
  line("layers", fmt::format("{}  embd {}  ff {}", s.n_layer, s.n_embd, s.n_ff));
  line("attention", fmt::format("{} heads, {} KV heads, head dim {} (k) / {} (v)", s.n_head,
                                s.n_head_kv, s.head_dim_k, s.head_dim_v));
  line("rope", fmt::format("freq base {}", static_cast<float>(s.rope_base)));
  line("rms norm eps", fmt::format("{}", static_cast<float>(s.rms_eps)));
  if (hp && hp->n_swa > 0)
    line("sliding window",
         fmt::format("{} positions on {} of {} layers (their RoPE base {}); {}", hp->n_swa, n_swa_layers, hp->n_layer,
                     hp->rope_freq_base_swa,
                     swa_ring > 0 ? fmt::format("their KV cache is a ring of {} rows (n_swa + n_batch)", swa_ring)
                                  : std::string(swa_full ? "their KV cache holds the whole context (--swa-full)"
                                                         : "their KV cache holds the whole context (no longer than the ring)")));
  if (hp && (hp->attn_softcap > 0 || hp->final_softcap > 0))
    line("soft-capping", fmt::format("attention {}, final logits {}", hp->attn_softcap, hp->final_softcap));
  if (hp && hp->n_expert > 0)
    line("experts", fmt::format("{} per layer, {} used per token, width {}", hp->n_expert, hp->n_expert_used, hp->n_ff_exp));
  if (!hp) line("runs here", fmt::format("no: {}", loaded.error().message));
  {
    std::string tok = f.get_string("tokenizer.ggml.model").has_value() ? *f.get_string("tokenizer.ggml.model") : "(none)";
    if (auto pre = f.get_string("tokenizer.ggml.pre")) tok += fmt::format(" (pre {})", *pre);
    tok += fmt::format(", {} tokens", s.n_vocab);
    if (const GgufValue* m = f.find("tokenizer.ggml.merges"); m && m->as_array())
      tok += fmt::format(", {} merges", m->as_array()->size());
    line("tokenizer", tok);
    std::string special;
    for (const char* k : {"bos", "eos", "eot", "eom", "unknown", "padding", "sep"}) {
      const GgufValue* v = f.find(fmt::format("tokenizer.ggml.{}_token_id", k));
      if (!v) continue;
      const int64_t id = v->as_int().value_or(-1);
      special += fmt::format("{}{}={} '{}'", special.empty() ? "" : ", ", k, id, token_text(f, id));
    }
    if (!special.empty()) line("special tokens", special);
    if (const GgufValue* v = f.find("tokenizer.ggml.add_bos_token"))
      line("add bos", v->as_bool().value_or(false) ? "yes" : "no");
  }
  if (!tmpl.fallback)
    line("chat template", fmt::format("present ({} bytes)", tmpl.source.size()));
  else
    line("chat template", fmt::format("absent (the built-in {} template will be used)", tmpl.fallback->title));
  std::string types;
  for (const auto& [name, e] : s.types)
    types += fmt::format("{}{}: {} tensors, {}", types.empty() ? "" : "; ", name, e.first,
                         human_bytes(static_cast<double>(e.second)));
  line("tensor types", types);
  line("tensors", fmt::format("{} ({})", f.tensors().size(), human_bytes(static_cast<double>(s.weight_bytes))));
  line("memory", fmt::format("weights {} + KV cache {} (ctx {}, {}) = {}", human_bytes(static_cast<double>(s.weight_bytes)),
                             human_bytes(static_cast<double>(kv_bytes)), n_ctx, kv_type,
                             human_bytes(static_cast<double>(s.weight_bytes + kv_bytes))));
  std::string per_type;
  for (const auto& [name, bytes] : kv_by_type)
    per_type += fmt::format("{}{} {}", per_type.empty() ? "" : ", ", name, human_bytes(static_cast<double>(bytes)));
  line("KV per type", fmt::format("{} (ctx {}; --kv-type)", per_type, n_ctx));
  for (const DeviceShare& sh : shares)
    line("offload", fmt::format("{} on {}: weights {} + KV cache {}", sh.layers, sh.name,
                                human_bytes(static_cast<double>(sh.weights)), human_bytes(static_cast<double>(sh.kv))));
  if (!shares.empty()) line("", fmt::format("{} on the CPU", host_layers));
  if (n_ring_layers > 0)
    line("KV cache", fmt::format("{} on {} full-attention layers ({} rows) + {} on {} sliding-window layers ({} rows)",
                                 human_bytes(static_cast<double>(kv_bytes_full)), kvf.layers_full, n_ctx,
                                 human_bytes(static_cast<double>(kv_bytes_swa)), n_ring_layers, swa_ring));
  if (tensors) {
    out += fmt::format("\n{:<40} {:<7} {:<24} {:>12} {:>12}\n", "tensor", "type", "shape", "offset", "bytes");
    for (const GgufTensor& t : f.tensors()) {
      std::string shape;
      for (size_t i = 0; i < t.shape.size(); ++i) shape += fmt::format("{}{}", i ? " x " : "", t.shape[i]);
      out += fmt::format("{:<40} {:<7} {:<24} {:>#12x} {:>12}\n", t.name, dtype_name(t.type), shape,
                         t.offset, t.n_bytes);
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace minfer::cli
