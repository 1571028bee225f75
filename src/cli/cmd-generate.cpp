// `minfer MODEL [PROMPT...] [options]`: one-shot generation. The prompt goes through the
// model's chat template (unless --no-template), the reply streams to stdout as it is generated
// (never half a UTF-8 character), and the prompt and generation speeds go to stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/chat-prompt.h"
#include "cli/commands.h"
#include "cli/context-options.h"
#include "cli/graph-dump.h"
#include "cli/sampling-options.h"
#include "cli/spec-options.h"
#include "cli/trace-file.h"
#include "core/thread-pool.h"
#include "runtime/generate.h"
#include "models/model.h"
#include "runtime/session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  return {std::istreambuf_iterator<char>(f), {}};
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  CLI::App app{"Generate a reply to PROMPT (through the model's chat template) and stream it to stdout",
               "minfer MODEL"};
  std::string model, prompt_file, system, kv = "f16", dump_dot, dump_json;
  std::vector<std::string> prompt_words, stops;
  int n_predict = 512, n_ctx = 4096, n_threads = 0, n_batch = 512;
  bool no_template = false, ignore_eos = false, verbose = false;
  SamplingOptions so;
  SpecOptions spo;
  app.add_option("MODEL", model, "GGUF path or the name of a model in the cache")->required();
  app.add_option("PROMPT", prompt_words, "prompt words (joined with spaces); read from stdin when absent");
  app.add_option("-f,--file", prompt_file, "read the prompt from a file");
  app.add_option("-n,--n-predict", n_predict, "most tokens to generate; -1 = until the context is full")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  app.add_option("--stop", stops, "stop string (repeatable); the reply is cut before it");
  app.add_option("--system", system, "system message");
  app.add_flag("--no-template", no_template, "use the prompt as is, without the chat template");
  app.add_flag("--ignore-eos", ignore_eos, "do not stop at end-of-generation tokens");
  app.add_option("-c,--ctx-size", n_ctx, "context size (KV cache positions), capped at the model's")
      ->capture_default_str()->check(CLI::Range(1, 1 << 24));
  app.add_option("-t,--threads", n_threads, "threads (default: all)")->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", n_batch, "most prompt tokens per graph")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--kv-type", kv, "KV cache element type")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
  app.add_option("--dump-graph", dump_dot, "write the prompt's graph as Graphviz DOT, then exit");
  app.add_option("--dump-graph-json", dump_json, "write the prompt's graph as JSON (docs/graph.md), then exit");
  app.add_flag("-v,--verbose", verbose, "print the rendered prompt and sampler chain to stderr");
  std::string ids_out;
  app.add_option("--ids-out", ids_out, "write {\"prompt\": [ids], \"generated\": [ids]} as JSON to this file (for oracle comparisons)");
  bool swa_full = false;
  add_swa_full_flag(app, swa_full);
  add_sampling_options(app, so);
  add_spec_options(app, spo);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  // The model first: a wrong name is reported before anything waits for a prompt on stdin.
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  std::string prompt;
  if (!prompt_file.empty()) {
    bool ok = false;
    prompt = read_file(prompt_file, &ok);
    if (!ok) return fail("", fmt::format("cannot read prompt file '{}'", prompt_file));
  } else if (!prompt_words.empty()) {
    for (size_t i = 0; i < prompt_words.size(); ++i) prompt += (i ? " " : "") + prompt_words[i];
  } else if (isatty(STDIN_FILENO)) {
    std::fprintf(stderr, "> ");
    std::getline(std::cin, prompt);
  } else {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  if (prompt.empty()) return fail("", "empty prompt (give PROMPT, -f FILE or text on stdin)");

  auto m = Model::load(path);
  if (!m) return fail("", m.error().message);
  const GgufFile& file = (*m)->file();
  auto tok = Tokenizer::from_gguf(file);
  if (!tok) return fail("", tok.error().message);
  auto sp = so.to_params(tok->n_vocab());
  if (!sp) return fail("", sp.error().message);

  std::string text = prompt;
  if (!no_template) {
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    if (!system.empty()) msgs.push_back({{"role", "system"}, {"content", system}});
    msgs.push_back({{"role", "user"}, {"content", prompt}});
    auto rendered = render_chat_prompt(file, *tok, msgs);
    if (!rendered) return fail("", rendered.error().message);
    text = *rendered;
  } else if (!system.empty()) {
    return fail("", "--system needs the chat template (drop --no-template)");
  }
  // The template may already start with the BOS text; do not add a second BOS.
  bool add_bos = tok->add_bos();
  if (add_bos && tok->bos_id() >= 0 && text.starts_with(tok->token_text(tok->bos_id()))) add_bos = false;
  const std::vector<int32_t> ids = tok->encode(text, add_bos, /*parse_special=*/true);
  if (verbose) std::fprintf(stderr, "[prompt] %s\n", text.c_str());

  SessionParams p;
  const int64_t n_train = (*m)->hparams().n_ctx_train;
  p.n_ctx = n_train > 0 ? static_cast<int>(std::min<int64_t>(n_ctx, n_train)) : n_ctx;
  p.n_batch = n_batch;
  p.n_threads = n_threads > 0 ? n_threads : hardware_threads();
  p.kv_type = kv == "f32" ? DType::F32 : DType::F16;
  p.swa_full = swa_full;
  auto session = Session::create(*m, p);
  if (!session) return fail("", session.error().message);
  Session& s = **session;

  if (!dump_dot.empty() || !dump_json.empty()) {
    const int n = static_cast<int>(std::min<size_t>(ids.size(), static_cast<size_t>(s.n_batch())));
    if (Status st = dump_graphs(s, n, 1, dump_dot, dump_json); !st) return fail("", st.error().message);
    return 0;
  }

  auto sampler = Sampler::create(*sp, tok->n_vocab());
  if (!sampler) return fail("", sampler.error().message);
  ContextParams draft_cp = s.context().params();
  draft_cp.n_ctx_seq = s.n_ctx();
  auto spec = SpecSetup::create(spo, *tok, draft_cp);
  if (!spec) return fail("", spec.error().message);
  if (*spec) std::fprintf(stderr, "%s\n", (*spec)->describe().c_str());
  if (verbose) std::fprintf(stderr, "[sampler] %s\n", sampler->describe().c_str());
  std::fprintf(stderr, "[model] %s: %s, %d threads, ctx %d, %s KV\n", (*m)->hparams().name.c_str(),
               (*m)->hparams().arch.c_str(), p.n_threads, s.n_ctx(), kv.c_str());

  GenerateParams gp;
  gp.n_predict = n_predict;
  gp.stop = stops;
  gp.ignore_eog = ignore_eos;
  if (Status gs = so.set_grammar(*tok, gp); !gs) return fail("", gs.error().message);
  bool ends_with_newline = true;
  auto trace = TraceFile::from_env(s, *tok);  // MINFER_TRACE=FILE
  if (trace) trace->start((*m)->hparams().name, prompt, static_cast<int>(ids.size()));
  std::string reply;
  auto st = generate(s, *tok, *sampler, ids, gp, [&](std::string_view t) {
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
    if (!t.empty()) ends_with_newline = t.back() == '\n';
    if (trace) reply += t;
    return true;
  }, trace ? trace->hooks() : GenerateHooks{}, GenerateSpec{*spec ? (*spec)->speculator(0) : nullptr, {}});
  if (!st) return fail("", st.error().message);
  if (trace) {
    const bool stop = st->reason == StopReason::kEog || st->reason == StopReason::kStopString;
    if (Status ts = trace->finish(reply, stop ? "stop" : "length", st->n_gen); !ts) return fail("", ts.error().message);
  }
  if (!ids_out.empty()) {
    std::ofstream f(ids_out);
    f << nlohmann::json{{"prompt", ids}, {"generated", st->tokens}}.dump() << "\n";
    if (!f) return fail("", fmt::format("--ids-out: cannot write '{}'", ids_out));
  }
  if (!ends_with_newline && isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "[prompt] %d tokens in %.2f s (%.1f tok/s)\n", st->n_prompt, st->prompt_s, st->prompt_tps());
  std::fprintf(stderr, "[generate] %d tokens in %.2f s (%.1f tok/s), stop: %s\n", st->n_gen, st->gen_s,
               st->gen_tps(), stop_reason_name(st->reason));
  if (*spec) std::fprintf(stderr, "%s\n", spec_summary(st->spec).c_str());
  if (*spec && verbose) {
    const SpecStats& ss = st->spec;
    const int n_plain = st->n_passes - static_cast<int>(ss.n_steps);
    const double plain_s = st->gen_s - ss.verify_s - ss.draft_s;
    std::fprintf(stderr, "[spec] %lld verify passes of %.1f rows, %.2f ms each; drafting %.2f ms per pass; %d other passes, %.2f ms each (with sampling)\n",
                 static_cast<long long>(ss.n_steps), ss.n_steps ? static_cast<double>(ss.n_verify_rows) / ss.n_steps : 0.0,
                 ss.n_steps ? 1e3 * ss.verify_s / ss.n_steps : 0.0, st->n_passes ? 1e3 * ss.draft_s / st->n_passes : 0.0, n_plain,
                 n_plain > 0 ? 1e3 * plain_s / n_plain : 0.0);
  }
  return 0;
}

}  // namespace minfer::cli
