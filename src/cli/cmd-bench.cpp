// `minfer bench MODEL [-p 512] [-n 128] [-d 0] [-r 3] [-t N] [-b 512] [-o md|json]`, like
// llama-bench.
//
// Two kinds of test, each repeated -r times after one warm-up run, with random token ids (fixed
// seed; a BOS first when the vocabulary adds one):
//   ppN  one prompt of N tokens in batches of -b (logits of the last token only): N / seconds
//   tgN  N single-token decode steps:                                              N / seconds
// Every repetition starts from a cache holding exactly the depth's tokens (-d; 0: empty): the
// depth is prefilled once, untimed, and each repetition cuts the cache back to it (or prefills
// it again where a sliding-window ring no longer holds it). -p, -n and -d take comma-separated
// lists ("-p 128,512 -d 0,4096"); 0 in -p or -n skips the kind. Output: a markdown table
// ("pp512 @ d4096"; "t/s" = mean ± sample standard deviation), or with -o json an array of
// objects with n_prompt, n_gen, n_depth, n_threads, n_batch, avg_ts, stddev_ts, samples_ts,
// model fields, and memory:
// rss_bytes (resident right after that test), peak_rss_bytes, model_file_bytes, kv_bytes, and
// load_seconds (from opening the file to the first decoded token: mapping, session, repacking,
// one decode step). With layers on a GPU (-ngl, --device) each object also has devices,
// n_gpu_layers and the device's cost per token of the test: submissions_per_token,
// dispatches_per_token, replayed_submissions_per_token (submissions of a command buffer recorded
// by an earlier step) and host_device_bytes_per_token (bytes copied host -> device and back). The table ends with a resident-memory line (after the last test, peak)
// against file + KV cache, and the load time.
//
// --parallel N (-np; default 1): N sequences decode together, as a server's slots or a verified
// draft do: ppP is N prompts of P tokens each (batched up to -b tokens per pass) and tgT is T
// steps of N tokens, one per sequence; t/s is the aggregate rate (all sequences' tokens per
// second). JSON adds n_parallel and step_ms (the mean milliseconds of one forward pass): a tg
// step of N tokens against the 1-token step says what a small batch costs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/process-memory.h"
#include "quantize/mix.h"
#include "models/model.h"
#include "runtime/context.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

Expected<std::vector<int>> parse_list(const std::string& flag, const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long x = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || x < 0 || x > (1 << 20))
      return make_error("{}: '{}' is not a token count in [0, {}]", flag, item, 1 << 20);
    v.push_back(static_cast<int>(x));
  }
  if (v.empty()) return make_error("{}: empty list", flag);
  return v;
}

struct TestResult {
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  std::vector<double> samples;  // tokens per second, one per repetition
  ProcessMemory mem;            // resident memory right after the test (peak: since start)
  BackendCounters device;       // the offload devices' work during the repetitions
  int64_t n_tokens = 0;         // tokens decoded during the repetitions
  int64_t n_steps = 0;          // forward passes during the repetitions
  double seconds = 0;           // their time
  double mean() const {
    double s = 0;
    for (double x : samples) s += x;
    return samples.empty() ? 0 : s / static_cast<double>(samples.size());
  }
  double stddev() const {
    if (samples.size() < 2) return 0;
    const double m = mean();
    double s = 0;
    for (double x : samples) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(samples.size() - 1));
  }
};

std::string human_params(uint64_t n) {
  if (n >= 1000000000ULL) return fmt::format("{:.2f} B", static_cast<double>(n) / 1e9);
  return fmt::format("{:.2f} M", static_cast<double>(n) / 1e6);
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Prompt-processing and generation speed (like llama-bench)", "minfer bench"};
  std::string model, p_list = "512", n_list = "128", d_list = "0", out = "md";
  ContextOptions co;
  int reps = 3, n_parallel = 1;
  app.add_option("MODEL", model, "GGUF path or model name in the cache")->required();
  app.add_option("-p,--n-prompt", p_list, "prompt lengths (comma-separated; 0 = none)")->capture_default_str();
  app.add_option("-n,--n-gen", n_list, "generation lengths (comma-separated; 0 = none)")->capture_default_str();
  app.add_option("-d,--n-depth", d_list, "tokens already in the cache before each test (comma-separated)")->capture_default_str();
  app.add_option("-r,--repetitions", reps, "repetitions of each test")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--parallel", n_parallel, "sequences decoding together, -np (aggregate t/s)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  add_threads(app, co.n_threads);
  add_batch_size(app, co.n_batch);
  add_kv_type(app, co.kv);
  add_swa_full_flag(app, co.swa_full);
  add_offload_options(app, co.offload);
  add_compat_options(app, co.compat);
  app.add_option("-o,--output", out, "output format")->capture_default_str()->check(CLI::IsMember({"md", "json"}));
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  auto kv = co.kv.dtype();
  if (!kv) return usage_fail("bench", kv.error().message);
  co.compat.warn(co.n_threads);
  auto offload = co.offload.resolve();
  if (!offload) return fail("bench", offload.error().message);
  auto pp = parse_list("-p", p_list);
  if (!pp) return fail("bench", pp.error().message);
  auto tg = parse_list("-n", n_list);
  if (!tg) return fail("bench", tg.error().message);
  auto depths = parse_list("-d", d_list);
  if (!depths) return fail("bench", depths.error().message);
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  using Clock = std::chrono::steady_clock;
  const auto t_load = Clock::now();  // load_seconds: from here to the first decoded token
  auto m = Model::load(path);
  if (!m) return fail("bench", m.error().message);
  auto tok = Tokenizer::from_gguf((*m)->file());
  if (!tok) return fail("bench", tok.error().message);

  int max_len = 1;
  for (int x : *pp) max_len = std::max(max_len, x);
  for (int x : *tg) max_len = std::max(max_len, x);
  int max_depth = 0;
  for (int x : *depths) max_depth = std::max(max_depth, x);
  max_len += max_depth;
  ContextParams cp;
  cp.n_seq = n_parallel;
  cp.n_ctx_seq = max_len;
  cp.n_batch = co.n_batch;
  cp.n_threads = co.n_threads;
  cp.kv_type = *kv;
  cp.swa_full = co.swa_full;
  cp.offload = *offload;
  if (static_cast<int64_t>(max_len) > (*m)->hparams().n_ctx_train && (*m)->hparams().n_ctx_train > 0)
    return fail("bench", fmt::format("a test of {} tokens exceeds the model's context of {}", max_len, (*m)->hparams().n_ctx_train));
  auto c = Context::create(*m, cp);
  if (!c) return fail("bench", c.error().message);
  Context& ctx = **c;
  const int n_seq = n_parallel;

  std::mt19937 rng(1234);
  const int n_vocab = ctx.n_vocab();
  // n random ids, a BOS first when they open the sequence (depth 0) and the vocabulary adds one.
  auto random_tokens = [&](std::mt19937& gen, int n, int depth) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = static_cast<int32_t>(gen() % static_cast<uint32_t>(n_vocab));
    if (depth == 0 && tok->add_bos() && tok->bos_id() >= 0 && n > 0) t[0] = tok->bos_id();
    return t;
  };
  // Each sequence's tokens appended in passes of at most -b tokens (sequence after sequence),
  // the last token of each flagged for logits; returns the number of passes.
  Batch batch;
  auto decode_prompts = [&](const std::vector<std::vector<int32_t>>& prompts) -> Expected<int> {
    int n_passes = 0;
    batch.clear();
    auto flush = [&]() -> Status {
      if (batch.size() == 0) return Status::ok();
      auto r = ctx.decode(batch);
      batch.clear();
      ++n_passes;
      return r ? Status::ok() : Status(r.error());
    };
    for (int sq = 0; sq < n_seq; ++sq) {
      const std::vector<int32_t>& t = prompts[static_cast<size_t>(sq)];
      const int p0 = ctx.seq_len(sq);
      for (size_t i = 0; i < t.size(); ++i) {
        batch.add(t[i], p0 + static_cast<int>(i), sq, i + 1 == t.size());
        if (batch.size() == ctx.n_batch()) MINFER_TRY(flush());
      }
    }
    MINFER_TRY(flush());
    return n_passes;
  };
  // Every cache holding exactly `depth` tokens: cut back to it when they hold them, else
  // prefilled (untimed) with the depth's own random tokens, the same for every test at that depth.
  int filled_depth = -1;
  auto to_depth = [&](int depth) -> Status {
    bool keep = depth > 0 && filled_depth == depth;
    for (int sq = 0; keep && sq < n_seq; ++sq) keep = ctx.seq_len(sq) >= depth && ctx.can_keep(sq, depth);
    if (keep) {
      for (int sq = 0; sq < n_seq; ++sq) MINFER_TRY(ctx.seq_rm(sq, depth, -1));
      return Status::ok();
    }
    for (int sq = 0; sq < n_seq; ++sq) ctx.seq_clear(sq);
    filled_depth = -1;
    if (depth == 0) return Status::ok();
    std::mt19937 drng(static_cast<uint32_t>(depth));
    const std::vector<int32_t> t = random_tokens(drng, depth, 0);
    auto r = decode_prompts(std::vector<std::vector<int32_t>>(static_cast<size_t>(n_seq), t));
    if (!r) return r.error();
    filled_depth = depth;
    return Status::ok();
  };
  struct Timed {
    double seconds = 0;
    int n_passes = 0;
  };
  auto run_pp = [&](int n, int depth) -> Expected<Timed> {
    MINFER_TRY(to_depth(depth));
    std::vector<std::vector<int32_t>> prompts;
    for (int sq = 0; sq < n_seq; ++sq) prompts.push_back(random_tokens(rng, n, depth));
    const auto t0 = Clock::now();
    auto r = decode_prompts(prompts);
    if (!r) return r.error();
    return Timed{std::chrono::duration<double>(Clock::now() - t0).count(), *r};
  };
  auto run_tg = [&](int n, int depth) -> Expected<Timed> {
    MINFER_TRY(to_depth(depth));
    std::vector<std::vector<int32_t>> ids;
    for (int sq = 0; sq < n_seq; ++sq) ids.push_back(random_tokens(rng, n, depth));
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      batch.clear();
      for (int sq = 0; sq < n_seq; ++sq) batch.add(ids[static_cast<size_t>(sq)][static_cast<size_t>(i)], ctx.seq_len(sq), sq, true);
      auto r = ctx.decode(batch);
      if (!r) return r.error();
    }
    return Timed{std::chrono::duration<double>(Clock::now() - t0).count(), n};
  };

  // Warm-up (pages the weights in, repacks them, builds the graphs). The first token ends the
  // load time: the file mapped, the session made, the weights ready and one decode step.
  if (auto w = run_tg(1, 0); !w) return fail("bench", w.error().message);
  const double load_seconds = std::chrono::duration<double>(Clock::now() - t_load).count();
  if (auto w = run_pp(std::min(max_len, 32), 0); !w) return fail("bench", w.error().message);

  std::vector<TestResult> results;
  auto measure = [&](bool prompt, int n, int depth) -> Status {
    TestResult r;
    (prompt ? r.n_prompt : r.n_gen) = n;
    r.n_depth = depth;
    for (int i = 0; i < reps; ++i) {
      // The depth's prefill is not the test's: counted from after it.
      if (Status st = to_depth(depth); !st) return st;
      const BackendCounters c0 = ctx.device_counters();
      auto timed = prompt ? run_pp(n, depth) : run_tg(n, depth);
      if (!timed) return timed.error();
      const BackendCounters c1 = ctx.device_counters();
      r.device.submissions += c1.submissions - c0.submissions;
      r.device.dispatches += c1.dispatches - c0.dispatches;
      r.device.replayed += c1.replayed - c0.replayed;
      r.device.bytes_to_device += c1.bytes_to_device - c0.bytes_to_device;
      r.device.bytes_to_host += c1.bytes_to_host - c0.bytes_to_host;
      r.n_tokens += static_cast<int64_t>(n) * n_seq;
      r.n_steps += timed->n_passes;
      r.seconds += timed->seconds;
      r.samples.push_back(static_cast<double>(n) * n_seq / timed->seconds);
    }
    r.mem = process_memory();
    results.push_back(std::move(r));
    return Status::ok();
  };
  for (int depth : *depths) {  // llama-bench's order: every test at one depth, then the next depth
    for (int n : *pp)
      if (n > 0)
        if (Status st = measure(true, n, depth); !st) return fail("bench", st.error().message);
    for (int n : *tg)
      if (n > 0)
        if (Status st = measure(false, n, depth); !st) return fail("bench", st.error().message);
  }

  const GgufFile& f = (*m)->file();
  uint64_t n_params = 0, size = 0;
  for (const GgufTensor& t : f.tensors()) {
    n_params += static_cast<uint64_t>(t.n_elements());
    size += t.n_bytes;
  }
  std::string ftype = "?";
  if (auto ft = f.get_int("general.file_type"))
    if (auto name = file_type_name_of(*ft)) ftype = std::string(*name);
  auto arch_s = f.get_string("general.architecture");
  const std::string arch = arch_s ? *arch_s : "?";
  const std::string model_type = fmt::format("{} {} {}", arch, human_params(n_params), ftype);
  if (out == "json") {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const TestResult& r : results) {
      const double per = 1.0 / static_cast<double>(std::max<int64_t>(1, r.n_tokens));
      arr.push_back({{"model_filename", path}, {"model_type", model_type}, {"model_size", size},
                     {"model_n_params", n_params}, {"backend", "CPU"}, {"n_threads", ctx.n_threads()},
                     {"n_batch", ctx.n_batch()}, {"n_parallel", n_seq}, {"type_kv", co.kv.name()}, {"n_prompt", r.n_prompt}, {"n_gen", r.n_gen}, {"n_depth", r.n_depth},
                     {"avg_ts", r.mean()}, {"stddev_ts", r.stddev()}, {"samples_ts", r.samples},
                     {"step_ms", r.seconds * 1000.0 / static_cast<double>(std::max<int64_t>(1, r.n_steps))},
                     {"model_file_bytes", f.total_file_size()}, {"kv_bytes", ctx.kv_bytes()},
                     {"rss_bytes", r.mem.rss}, {"peak_rss_bytes", r.mem.peak_rss}, {"load_seconds", load_seconds}});
      if (!offload->devices.empty()) {
        nlohmann::ordered_json& o = arr.back();
        o["backend"] = "Vulkan";
        o["devices"] = offload->devices;
        o["n_gpu_layers"] = offload->n_gpu_layers == kAllLayers ? 99 : offload->n_gpu_layers;
        o["submissions_per_token"] = static_cast<double>(r.device.submissions) * per;
        o["dispatches_per_token"] = static_cast<double>(r.device.dispatches) * per;
        o["replayed_submissions_per_token"] = static_cast<double>(r.device.replayed) * per;
        o["host_device_bytes_per_token"] = static_cast<double>(r.device.bytes_to_device + r.device.bytes_to_host) * per;
        o["host_to_device_bytes_per_token"] = static_cast<double>(r.device.bytes_to_device) * per;
        o["device_to_host_bytes_per_token"] = static_cast<double>(r.device.bytes_to_host) * per;
      }
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  // llama-bench's columns: type_k and type_v appear when the cache is not f16.
  const std::string kv_name = co.kv.name();
  const bool kv_cols = kv_name != "f16";
  std::printf("| model | size | params | backend | threads |%s test | t/s |\n", kv_cols ? " type_k | type_v |" : "");
  std::printf("| --- | ---: | ---: | --- | ---: |%s ---: | ---: |\n", kv_cols ? " ---: | ---: |" : "");
  const std::string kv_cells = kv_cols ? fmt::format(" {} | {} |", kv_name, kv_name) : "";
  for (const TestResult& r : results) {
    std::string test = r.n_prompt > 0 ? fmt::format("pp{}", r.n_prompt) : fmt::format("tg{}", r.n_gen);
    if (n_seq > 1) test += fmt::format(" x{}", n_seq);
    if (r.n_depth > 0) test += fmt::format(" @ d{}", r.n_depth);
    std::printf("| %s | %.2f MiB | %s | %s | %d |%s %s | %.2f ± %.2f |\n", model_type.c_str(),
                static_cast<double>(size) / (1024.0 * 1024.0), human_params(n_params).c_str(),
                offload->devices.empty() ? "CPU" : "Vulkan", ctx.n_threads(),
                kv_cells.c_str(), test.c_str(), r.mean(), r.stddev());
  }
  if (!results.empty()) {
    const double mib = 1024.0 * 1024.0;
    const ProcessMemory& mem = results.back().mem;
    const double base = static_cast<double>(f.total_file_size() + ctx.kv_bytes());
    std::printf("\nresident memory after the last test %.1f MiB (peak %.1f MiB); model file %.1f MiB + KV cache %.1f MiB "
                "(x%.2f, peak x%.2f)\n",
                static_cast<double>(mem.rss) / mib, static_cast<double>(mem.peak_rss) / mib,
                static_cast<double>(f.total_file_size()) / mib, static_cast<double>(ctx.kv_bytes()) / mib,
                static_cast<double>(mem.rss) / base, static_cast<double>(mem.peak_rss) / base);
  }
  std::printf("load %.2f s (file to first token)\n", load_seconds);
  return 0;
}

}  // namespace minfer::cli
