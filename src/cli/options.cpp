#include "cli/options.h"

#include <charconv>
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

#include "backends/registry/registry.h"
#include "cli/notice.h"
#include "template/chat.h"
#include "template/template.h"

namespace minfer::cli {
namespace {

// llama.cpp's single-dash long spellings and the option they mean here. Only mapped when the
// command has that option; CLI11 would otherwise read "-ngl" as "-n gl".
struct Alias {
  std::string_view from, to;
};
constexpr Alias kAliases[] = {
    {"-ngl", "--gpu-layers"},      {"-dev", "--device"},             {"-fa", "--flash-attn"},          {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"},    {"-tb", "--threads-batch"},       {"-ub", "--ubatch-size"},
    {"-cnv", "--conversation"},    {"-no-cnv", "--no-conversation"}, {"-if", "--interactive-first"},
    {"-st", "--single-turn"},      {"-sys", "--system-prompt"},      {"-sysf", "--system-prompt-file"},
    {"-mli", "--multiline-input"}, {"-co", "--color"},               {"-np", "--parallel"},
    {"-jf", "--json-schema-file"}, {"-md", "--model-draft"},         {"-hf", "--hf-repo"},
    {"-hfr", "--hf-repo"},         {"-to", "--timeout"},             {"-cb", "--cont-batching"},
    {"-sps", "--slot-prompt-similarity"}, {"-rea", "--reasoning"},     {"-hff", "--hf-file"},
};

// Options whose value llama.cpp makes optional: given alone they mean `implied`.
struct OptionalValue {
  std::string_view name;
  std::vector<std::string_view> values;
  std::string_view implied;
};
const OptionalValue kOptionalValues[] = {
    {"--flash-attn", {"on", "off", "auto", "1", "0", "true", "false"}, "on"},
    {"--color", {"on", "off", "auto"}, "on"},
};

// llama.cpp options minfer knows and does not have, with why: refused with the reason rather
// than "unknown".
struct Unsupported {
  std::vector<std::string_view> names;
  std::string_view why;
};
const Unsupported kUnsupported[] = {
    {{"--lora", "--lora-scaled", "--control-vector", "--control-vector-scaled", "--control-vector-layer-range"},
     "LoRA adapters and control vectors are not supported"},
    {{"-mm", "--mmproj", "-mmu", "--mmproj-url", "--image", "--audio", "--video"},
     "multimodal projectors (vision, audio) are not supported"},
    {{"-ts", "--tensor-split", "-sm", "--split-mode", "-mg", "--main-gpu", "-ot", "--override-tensor", "-cmoe",
      "--cpu-moe", "-ncmoe", "--n-cpu-moe"},
     "per-tensor placement is not supported: whole layers go to GPUs with -ngl N and --device NAME[,NAME] (offloaded "
     "layers are divided equally between the devices)"},
    {{"--rpc"}, "RPC backends are not supported"},
    {{"--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx", "--yarn-ext-factor",
      "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast", "-gan", "--grp-attn-n", "-gaw", "--grp-attn-w"},
     "RoPE scaling overrides are not supported (the GGUF's own RoPE parameters are used)"},
    {{"--rerank", "--reranking"}, "reranking models (/rerank) are not supported yet"},
    {{"--numa"}, "NUMA placement is not supported"},
    {{"--override-kv"}, "metadata overrides are not supported"},
    {{"--prompt-cache", "--prompt-cache-all", "--prompt-cache-ro"}, "use --cnv --session FILE to keep a conversation's cache"},
    {{"--in-prefix", "--in-suffix", "--in-prefix-bos", "-sp", "--special", "-e", "--escape", "--keep"},
     "not supported (the model's chat template frames every turn and its special tokens)"},
};

const Unsupported* find_unsupported(std::string_view name) {
  for (const Unsupported& u : kUnsupported)
    for (std::string_view n : u.names)
      if (n == name) return &u;
  return nullptr;
}

bool has_option(const CLI::App& app, std::string_view name) {
  return app.get_option_no_throw(std::string(name)) != nullptr;
}

// Edits (insert, delete, substitute, swap two neighbours) from a to b: "--tmep" is one from "--temp".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// Every spelling the command takes: its long and short names, and the llama.cpp aliases that
// map to one of them.
std::vector<std::string> known_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_positional()) continue;
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  for (const Alias& a : kAliases)
    if (has_option(app, a.to)) names.emplace_back(a.from);
  return names;
}

std::string closest(const CLI::App& app, std::string_view name) {
  auto bare = [](std::string_view n) { return n.substr(std::min(n.find_first_not_of('-'), n.size())); };
  const std::string_view want = bare(name);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& n : known_names(app)) {
    const std::string_view have = bare(n);
    size_t d = edit_distance(want, have);
    // "--ctx" for "--ctx-size": a prefix of at least 3 letters is close.
    if (want.size() >= 3 && have.starts_with(want)) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  const size_t limit = want.size() <= 3 ? 1 : std::max<size_t>(2, want.size() / 3);
  return best_d <= limit ? best : std::string();
}

std::string command_name(const CLI::App& app) { return app.get_name().empty() ? "minfer" : app.get_name(); }

int usage_error(const CLI::App& app, const std::string& msg) {
  const std::string name = command_name(app);
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for the options.\n", name.c_str(), msg.c_str(),
               name == "minfer" ? "minfer MODEL" : name.c_str());
  return kUsageError;
}

// A number as CLI11 would read it after a short option: -n128, -t4, -c0.
bool is_number(std::string_view s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
  bool digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') digit = true;
    else if (s[i] != '.' && s[i] != 'e' && s[i] != 'E' && s[i] != '-' && s[i] != '+') return false;
  }
  return digit;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

class UsageFormatter : public CLI::Formatter {
 public:
  explicit UsageFormatter(std::string usage) : usage_(std::move(usage)) {}
  std::string make_usage(const CLI::App*, std::string) const override { return "Usage: " + usage_ + "\n"; }

 private:
  std::string usage_;
};

}  // namespace

void set_usage(CLI::App& app, std::string usage) { app.formatter(std::make_shared<UsageFormatter>(std::move(usage))); }

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  // One pass: llama.cpp's spellings mapped, options with an optional value given one, and
  // unknown flags refused by their own name (CLI11 would read "-ngl" as "-n gl"). The value of
  // an option that takes one is passed on as it is, whatever it looks like ("-p -hello").
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--") {  // the rest is positional
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    for (const Alias& al : kAliases)
      if (a == al.from && has_option(app, al.to)) a = al.to;
    const OptionalValue* ov = nullptr;
    for (const OptionalValue& v : kOptionalValues)
      if (a == v.name && has_option(app, v.name)) ov = &v;
    if (ov) {
      const bool next_is_value =
          i + 1 < args.size() && std::find(ov->values.begin(), ov->values.end(), args[i + 1]) != ov->values.end();
      out.push_back(a + "=" + (next_is_value ? args[++i] : std::string(ov->implied)));
      continue;
    }
    if (a.size() >= 2 && a[0] == '-' && (a[1] == '-' || is_letter(a[1]))) {
      std::string name;
      const CLI::Option* o = nullptr;
      if (a.starts_with("--")) {
        name = a.substr(0, a.find('='));
        o = app.get_option_no_throw(name);
      } else if (a.size() == 2) {
        o = app.get_option_no_throw(a);
      } else if (const CLI::Option* s = app.get_option_no_throw(a.substr(0, 2));
                 s && s->get_items_expected_max() > 0 && is_number(std::string_view(a).substr(2))) {
        out.push_back(a);  // -n128: a short option and its value
        continue;
      }
      if (!o) {
        if (name.empty()) name = a;
        if (const Unsupported* u = find_unsupported(name))
          return usage_error(app, fmt::format("'{}' is not supported: {}", name, u->why));
        const std::string hint = closest(app, name);
        return usage_error(app, hint.empty() ? fmt::format("unknown option '{}'", name)
                                             : fmt::format("unknown option '{}'; did you mean '{}'?", name, hint));
      }
      out.push_back(a);
      // Its value, taken as it is (CLI11 takes an option's required values unconditionally).
      if (a.find('=') == std::string::npos && o->get_items_expected_min() > 0 && i + 1 < args.size()) out.push_back(args[++i]);
      continue;
    }
    out.push_back(a);
  }
  // A repeated option takes its last value, as in llama.cpp (`-n 4 ... -n -1`); a repeatable one
  // (--stop) takes one value each time (`--stop a hi`: "hi" is the prompt).
  for (CLI::Option* o : app.get_options()) {
    if (o->get_positional()) continue;
    if (o->get_items_expected_max() <= 1) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    else o->allow_extra_args(false);
  }
  // CLI11's vector form takes the arguments in reverse order.
  std::reverse(out.begin(), out.end());
  try {
    app.parse(out);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return usage_error(app, e.what());
  }
  return std::nullopt;
}

CLI::Option* add_ctx_size(CLI::App& app, int& n_ctx, const std::string& help) {
  return app.add_option("-c,--ctx-size", n_ctx,
                        help.empty() ? "context size (KV cache positions), capped at the model's; 0 = the model's" : help)
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
}

Expected<uint64_t> parse_memory_size(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || !(v > 0))
    return make_error("'{}' is not a memory size (bytes, or a number with K, M, G or T: 12G, 1536M)", text);
  std::string unit(p, end);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (unit.size() == 3 && unit.ends_with("IB")) unit.resize(1);
  else if (unit.size() == 2 && unit.back() == 'B') unit.resize(1);
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"", 1.0}, {"B", 1.0}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}, {"T", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name) {
      const double bytes = v * scale;
      if (bytes < 1 || bytes > 1.8e19) return make_error("'{}' is out of range as a memory size", text);
      return static_cast<uint64_t>(bytes);
    }
  return make_error("'{}': unknown unit '{}' (K, M, G or T; binary: 1G = 1024M)", text, std::string(p, end));
}

int context_for_model(int n_ctx, int64_t n_ctx_train) {
  if (n_ctx_train <= 0) return n_ctx > 0 ? n_ctx : 4096;
  if (n_ctx <= 0) return static_cast<int>(std::min<int64_t>(n_ctx_train, 1 << 24));
  return static_cast<int>(std::min<int64_t>(n_ctx, n_ctx_train));
}

CLI::Option* add_threads(CLI::App& app, int& n_threads) {
  return app.add_option("-t,--threads", n_threads, "compute threads; 0 = all hardware threads")->check(CLI::Range(0, 1024));
}

CLI::Option* add_batch_size(CLI::App& app, int& n_batch, const std::string& help) {
  auto* b = app.add_option("-b,--batch-size", n_batch,
                           help.empty() ? "most prompt tokens in one graph (llama.cpp's -ub, its physical batch)" : help)
                ->capture_default_str()
                ->check(CLI::Range(1, 1 << 20));
  // llama.cpp's -ub is what minfer's -b means; with both (`-b 2048 -ub 512`, a common pair)
  // -ub wins: its callback runs after -b's, as it is declared after it.
  app.add_option_function<int>("--ubatch-size", [&n_batch](const int& v) { n_batch = v; },
                               "(-ub) the same as -b here; wins over -b when both are given")
      ->check(CLI::Range(1, 1 << 20));
  return b;
}

namespace {

// Cache types llama.cpp names; the ones minfer stores.
constexpr std::string_view kKvKnown[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"};
constexpr DType kKvStored[] = {DType::F16, DType::F32, DType::Q8_0, DType::Q4_0};  // kv_type_supported's

Expected<DType> kv_dtype(const std::string& flag, const std::string& name) {
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (DType t : kKvStored)
    if (kv_type_name(t) == lower) return t;
  const bool known = std::find(std::begin(kKvKnown), std::end(kKvKnown), lower) != std::end(kKvKnown);
  return make_error("{} {}: {}; the KV cache types here are f16, f32, q8_0 and q4_0", flag, name,
                    known ? "not supported yet" : "not a cache type");
}

}  // namespace

Expected<DType> KvTypeOptions::dtype() const {
  DType t = DType::F16;
  if (!both.empty()) {
    auto d = kv_dtype("--kv-type", both);
    if (!d) return d;
    t = *d;
  }
  std::optional<DType> tk, tv;
  if (!k.empty()) {
    auto d = kv_dtype("--cache-type-k", k);
    if (!d) return d;
    tk = *d;
  }
  if (!v.empty()) {
    auto d = kv_dtype("--cache-type-v", v);
    if (!d) return d;
    tv = *d;
  }
  if (!both.empty() && ((tk && *tk != t) || (tv && *tv != t)))
    return make_error("--kv-type {} disagrees with -ctk/-ctv; give one of them", both);
  // One type for both caches: a K type alone would leave V at f16.
  const DType want_k = tk ? *tk : t, want_v = tv ? *tv : t;
  if (want_k != want_v)
    return make_error("-ctk {} and -ctv {}: K and V caches of different types are not supported; give both the same, or --kv-type",
                      k.empty() ? "f16" : k, v.empty() ? "f16" : v);
  return want_k;
}

std::string KvTypeOptions::name() const {
  auto d = dtype();
  return std::string(d ? kv_type_name(*d) : "f16");
}

void add_kv_type(CLI::App& app, KvTypeOptions& o) {
  std::string types;
  for (DType t : kKvStored) types += (types.empty() ? "" : ", ") + std::string(kv_type_name(t));
  app.add_option("--kv-type", o.both, "KV cache element type of K and V (" + types + "; default f16)");
  app.add_option("--cache-type-k", o.k, "(-ctk) K cache type; must equal the V cache type");
  app.add_option("--cache-type-v", o.v, "(-ctv) V cache type; must equal the K cache type");
}

void add_swa_full_flag(CLI::App& app, bool& swa_full) {
  app.add_flag("--swa-full", swa_full,
               "sliding-window layers keep the whole context in their KV cache (default: only the window, "
               "a ring of n_swa + n_batch rows; full caches let any prefix be reused or rolled back)");
}

void add_offload_options(CLI::App& app, OffloadOptions& o) {
  const char* g = "GPU";
  app.add_option("--gpu-layers,--n-gpu-layers", o.n_gpu_layers,
                 "(-ngl) N|all: the last N layers run on the GPU (all, or N past the layer count: the output layer "
                 "too); without --device the first hardware GPU (--list-devices)")
      ->group(g);
  app.add_option("--device", o.devices,
                 "(-dev) NAME[,NAME]|none: the GPUs for -ngl (--list-devices names; a software device runs only when "
                 "named here); alone: every layer on them")
      ->group(g);
}

Expected<Offload> OffloadOptions::resolve() const {
  Offload off;
  if (n_gpu_layers.empty()) {
    off.n_gpu_layers = devices.empty() || devices == "none" ? 0 : kAllLayers;
  } else if (n_gpu_layers == "all" || n_gpu_layers == "auto" || n_gpu_layers == "-1") {
    off.n_gpu_layers = kAllLayers;
  } else {
    int n = -1;
    const auto [p, ec] = std::from_chars(n_gpu_layers.data(), n_gpu_layers.data() + n_gpu_layers.size(), n);
    if (ec != std::errc() || p != n_gpu_layers.data() + n_gpu_layers.size() || n < 0)
      return make_error("-ngl {}: give a number of layers (0 or more) or all", n_gpu_layers);
    off.n_gpu_layers = n;
  }
  auto devs = select_devices(devices);
  if (!devs) return devs.error();
  if (off.n_gpu_layers == 0 || devices == "none") return Offload{};
  if (devs->empty()) {
    const std::string_view note = device_support_note();
    std::string why = note.empty() ? "no GPU here" : std::string(note);
    for (const DeviceInfo& d : list_devices())
      if (d.software) why += fmt::format("; {} ({}) is a software device: name it with --device to use it", d.name, d.description);
    warning(fmt::format("-ngl {}: {}; every layer runs on the CPU", n_gpu_layers, why));
    return Offload{};
  }
  for (const DeviceInfo& d : *devs) off.devices.push_back(d.name);
  return off;
}

void add_compat_options(CLI::App& app, CompatOptions& o) {
  const char* g = "llama.cpp compatibility";
  app.add_option("--flash-attn", o.flash_attn, "(-fa) [on|off|auto] accepted; attention is always one fused kernel here")
      ->check(CLI::IsMember({"on", "off", "auto", "1", "0", "true", "false"}))
      ->group(g);
  app.add_flag("--no-mmap", o.no_mmap, "accepted; weights are read through mmap and repacked, the mapped pages released")
      ->group(g);
  app.add_flag("--mlock", o.mlock_memory, "lock the process's memory (weights, cache) in RAM")->group(g);
  app.add_option("--threads-batch", o.threads_batch, "(-tb) accepted; one thread pool (-t) runs prefill and decode")
      ->check(CLI::Range(0, 1024))
      ->group(g);
}

void CompatOptions::warn(int n_threads) const {
  if (flash_attn == "off" || flash_attn == "0" || flash_attn == "false") warning("-fa off: attention is always one fused kernel here; the flag changes nothing");
  if (no_mmap)
    warning("--no-mmap: weights are read through mmap once and kept as a repacked copy (the mapped pages are released); "
            "the flag changes nothing");
  if (threads_batch && *threads_batch != n_threads && *threads_batch != 0)
    warning(fmt::format("-tb {}: one thread pool runs prefill and decode; it has the -t threads", *threads_batch));
}

void CompatOptions::mlock() const {
  if (!mlock_memory) return;
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
    warning(fmt::format("--mlock: cannot lock the process's memory: {} (raise `ulimit -l` or run with CAP_IPC_LOCK)",
                        std::strerror(errno)));
}

void add_context_options(CLI::App& app, ContextOptions& o, const std::string& ctx_help) {
  add_ctx_size(app, o.n_ctx, ctx_help);
  add_batch_size(app, o.n_batch);
  add_threads(app, o.n_threads);
  add_kv_type(app, o.kv);
  add_swa_full_flag(app, o.swa_full);
  add_offload_options(app, o.offload);
  add_compat_options(app, o.compat);
}

void add_log_options(CLI::App& app, LogOptions& o, const std::string& verbose_help) {
  app.add_flag("-v,--verbose", o.verbose, verbose_help);
  app.add_flag("-q,--quiet,--log-disable", o.quiet, "print nothing on stderr but errors and warnings");
}

void add_template_options(CLI::App& app, TemplateOptions& o) {
  const char* g = "Chat template";
  auto* t = app.add_option("--chat-template", o.chat_template,
                           "Jinja chat template to use instead of the model's, or a built-in one by name (" +
                               jinja::builtin_template_names() + ")")
                ->group(g);
  app.add_option("--chat-template-file", o.chat_template_file, "file with the Jinja chat template to use instead of the model's")
      ->excludes(t)
      ->group(g);
  app.add_flag("--jinja", o.jinja, "accepted: chat templates are always rendered by minfer's Jinja engine")->group(g);
}

Expected<std::string> TemplateOptions::source(std::string* label) const {
  std::string src;
  if (!chat_template_file.empty()) {
    std::ifstream in(chat_template_file, std::ios::binary);
    if (!in) return make_error("--chat-template-file: cannot read '{}'", chat_template_file);
    src.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (src.empty()) return make_error("--chat-template-file: '{}' is empty", chat_template_file);
    if (label) *label = fmt::format("the template in {}", chat_template_file);
  } else if (chat_template.empty()) {
    return std::string();
  } else if (const jinja::BuiltinTemplate* b = jinja::find_builtin_template(chat_template)) {
    if (label) *label = fmt::format("the built-in {} template (--chat-template {})", b->title, b->name);
    return std::string(b->source);
  } else if (chat_template.find('{') == std::string::npos) {
    return make_error("--chat-template '{}' is neither Jinja text nor a built-in name ({})", chat_template,
                      jinja::builtin_template_names());
  } else {
    src = chat_template;
    if (label) *label = "the template given with --chat-template";
  }
  if (auto t = jinja::Template::parse(src); !t) return make_error("chat template: {}", t.error().message);
  return src;
}

}  // namespace minfer::cli
