// `minfer logits MODEL --tokens ID,ID,... --out FILE [--greedy N] [-t N] [-b N] [-c N]
//                [--kv-type f16|f32] [--dump-graph F.dot] [--dump-graph-json F.json] [--no-fuse]
//                [--dump-tensors DIR] [-v]`
//
// Writes float32 logits for every position, [n_tokens][n_vocab] row-major, to FILE. With
// --greedy N, prints {"greedy": [ids...]} on stdout: N argmax tokens after the given ones (the
// first maximum on ties; end-of-generation tokens do not stop it). Timings go to stderr.
// --dump-graph / --dump-graph-json write the graph of the prompt's first batch (after backend
// assignment, fusion and memory planning; JSON format in docs/graph.md). --dump-tensors DIR
// writes every node's result of decode call k (0 = the prompt, then one per greedy step) as
// DIR/k/<node name>.f32 with DIR/k/index.json, for op-by-op comparisons with llama.cpp
// (tests/oracle/llama: `llama-oracle dump`).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/graph-dump.h"
#include "cli/options.h"
#include "core/fp16.h"
#include "graph/scheduler.h"
#include "models/model.h"
#include "runtime/session.h"

namespace minfer::cli {
namespace {

Expected<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string cur;
  auto flush = [&]() -> Status {
    if (cur.empty()) return Status::ok();
    if (cur.size() > 10 || std::stoll(cur) > INT32_MAX) return make_error("--tokens: '{}' is out of range", cur);
    ids.push_back(static_cast<int32_t>(std::stoll(cur)));
    cur.clear();
    return Status::ok();
  };
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      cur += c;
    } else if (c == ',' || c == ' ' || c == '[' || c == ']' || c == '\n') {
      MINFER_TRY(flush());
    } else {
      return make_error("--tokens: unexpected character '{}' in '{}' (expected ids like 1,2,3)", c, s);
    }
  }
  MINFER_TRY(flush());
  if (ids.empty()) return make_error("--tokens: no token ids given");
  return ids;
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// --dump-tensors: each observed node (F32/F16) as DIR/<call>/<name>.f32 plus an index.json of
// {name: {"op", "type", "ne"}} per call, written when the call's first node of the next call or
// the dumper's end comes.
class TensorDumper {
 public:
  explicit TensorDumper(std::string dir) : dir_(std::move(dir)) {}
  ~TensorDumper() { flush_index(); }
  void next_call() {
    flush_index();
    ++call_;
  }
  void write(const Node& n, const void* data) {
    if (n.type != DType::F32 && n.type != DType::F16) return;
    const std::filesystem::path d = std::filesystem::path(dir_) / std::to_string(call_);
    std::filesystem::create_directories(d);
    const size_t count = static_cast<size_t>(n.n_elements());
    std::vector<float> v(count);
    if (n.type == DType::F32) std::memcpy(v.data(), data, count * 4);
    else
      for (size_t i = 0; i < count; ++i) v[i] = fp16_to_fp32(static_cast<const uint16_t*>(data)[i]);
    std::ofstream(d / (n.name + ".f32"), std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(count * 4));
    index_ += fmt::format("{}\"{}\": {{\"op\": \"{}\", \"type\": \"{}\", \"ne\": [{}]}}", index_.empty() ? "" : ", ",
                          n.name, op_name(n.op), dtype_name(n.type), fmt::join(n.ne, ", "));
  }

 private:
  void flush_index() {
    if (dir_.empty() || index_.empty()) return;
    std::ofstream(std::filesystem::path(dir_) / std::to_string(call_) / "index.json") << "{" << index_ << "}\n";
    index_.clear();
  }
  std::string dir_, index_;
  int call_ = 0;
};

}  // namespace

int cmd_logits(int argc, char** argv) {
  CLI::App app{"Write the logits of every position of a token sequence (and greedy continuations)",
               "minfer logits"};
  std::string model, tokens, out, dump_dot, dump_json, dump_tensors;
  KvTypeOptions kv;
  OffloadOptions offload;
  int greedy = 0, n_threads = 0, n_batch = 512, n_ctx = 0;
  bool no_fuse = false, verbose = false;
  app.add_option("MODEL", model, "GGUF path or model name in the cache")->required();
  app.add_option("--tokens", tokens, "token ids, comma-separated")->required();
  app.add_option("--out", out, "float32 logits file [n_tokens][n_vocab]");
  app.add_option("--greedy", greedy, "print {\"greedy\": [ids]} for N argmax steps")->check(CLI::Range(0, 1 << 20));
  add_threads(app, n_threads);
  add_batch_size(app, n_batch);
  add_ctx_size(app, n_ctx, "KV cache positions (default 0: the tokens plus --greedy)");
  add_kv_type(app, kv);
  add_offload_options(app, offload);
  app.add_option("--dump-graph", dump_dot, "write the prompt graph as Graphviz DOT");
  app.add_option("--dump-graph-json", dump_json, "write the prompt graph as JSON (docs/graph.md)");
  app.add_option("--dump-tensors", dump_tensors,
                 "write every node's result of each decode call as DIR/<call>/<name>.f32 (slow; for debugging)");
  app.add_flag("--no-fuse", no_fuse, "skip the fusion pass");
  app.add_flag("-v,--verbose", verbose, "name each backend and what it chose (the CPU's kernel table) on stderr");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  auto kv_type = kv.dtype();
  if (!kv_type) return usage_fail("logits", kv_type.error().message);
  auto off = offload.resolve();
  if (!off) return fail("logits", off.error().message);
  if (out.empty() && greedy == 0 && dump_dot.empty() && dump_json.empty() && dump_tensors.empty())
    return usage_fail("logits", "nothing to do: give --out, --greedy, --dump-tensors or a --dump-graph option");
  auto ids = parse_ids(tokens);
  if (!ids) return fail("logits", ids.error().message);
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  auto m = Model::load(path);
  if (!m) return fail("logits", m.error().message);

  const int n = static_cast<int>(ids->size());
  SessionParams sp;
  sp.n_ctx = n_ctx > 0 ? n_ctx : n + std::max(greedy - 1, 0);
  sp.n_batch = n_batch;
  sp.n_threads = n_threads;
  sp.kv_type = *kv_type;
  sp.fuse = !no_fuse;
  sp.offload = *off;
  if (sp.n_ctx < n + std::max(greedy - 1, 0))
    return fail("logits", fmt::format("-c {} is too small for {} tokens plus {} greedy steps", sp.n_ctx, n, greedy));
  auto s = Session::create(*m, sp);
  if (!s) return fail("logits", s.error().message);
  Session& session = **s;
  if (verbose)
    for (const std::string& d : session.context().backend_descriptions()) std::fprintf(stderr, "[backend] %s\n", d.c_str());
  if (const std::string where = session.context().placement(); !where.empty() && verbose)
    std::fprintf(stderr, "[offload] %s\n", where.c_str());

  if (!dump_dot.empty() || !dump_json.empty()) {
    const int first = std::min(n, session.n_batch());
    if (Status st = dump_graphs(session, first, first, dump_dot, dump_json); !st) return fail("logits", st.error().message);
  }

  TensorDumper dumper(dump_tensors);
  if (!dump_tensors.empty()) session.set_observer([&](const Node& nd, const void* d) { dumper.write(nd, d); });

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto logits = session.decode(*ids, n);  // every position
  if (!logits) return fail("logits", logits.error().message);
  const double prompt_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const size_t n_vocab = static_cast<size_t>(session.n_vocab());
  if (!out.empty()) {
    std::FILE* f = std::fopen(out.c_str(), "wb");
    if (!f) return fail("logits", fmt::format("cannot open '{}' for writing", out));
    const size_t wrote = std::fwrite(logits->data(), sizeof(float), logits->size(), f);
    if (std::fclose(f) != 0 || wrote != logits->size()) return fail("logits", fmt::format("short write to '{}'", out));
  }
  std::fprintf(stderr, "logits: %d tokens in %.1f ms (%.1f tok/s, %d threads, batch %d)\n", n, prompt_s * 1e3,
               n / prompt_s, session.n_threads(), session.n_batch());

  if (greedy > 0) {
    std::vector<int32_t> gen;
    int32_t next = argmax(logits->subspan(static_cast<size_t>(n - 1) * n_vocab, n_vocab));
    gen.push_back(next);
    const auto t1 = Clock::now();
    for (int i = 1; i < greedy; ++i) {
      dumper.next_call();
      auto l = session.decode({&next, 1}, 1);
      if (!l) return fail("logits", l.error().message);
      next = argmax(*l);
      gen.push_back(next);
    }
    const double gen_s = std::chrono::duration<double>(Clock::now() - t1).count();
    std::string js = "{\"greedy\": [";
    for (size_t i = 0; i < gen.size(); ++i) js += fmt::format("{}{}", i ? ", " : "", gen[i]);
    std::printf("%s]}\n", js.c_str());
    if (greedy > 1)
      std::fprintf(stderr, "greedy: %d decode steps in %.1f ms (%.2f tok/s)\n", greedy - 1, gen_s * 1e3,
                   (greedy - 1) / gen_s);
  }
  return 0;
}

}  // namespace minfer::cli
