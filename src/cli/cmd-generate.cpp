// `minfer MODEL [PROMPT...] [options]`: one-shot generation. The prompt goes through the
// model's chat template (unless --no-template), the reply streams to stdout as it is generated
// (never half a UTF-8 character), and the load time, prompt and generation speeds go to stderr.
// Ctrl-C stops the prefill between batches or the reply between tokens: the speed lines are
// printed and the exit code is 130; a second Ctrl-C ends the process at once.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/graph-dump.h"
#include "cli/main-setup.h"
#include "cli/notice.h"
#include "cli/prefill-line.h"
#include "cli/trace-file.h"
#include "runtime/chat-prompt.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_sigint_one_shot(int) {
  if (g_stop.exchange(true)) _exit(130);  // the second Ctrl-C: now
}

}  // namespace

int run_generate(const MainOptions& o) {
  set_quiet(o.log.quiet);
  if (Status st = o.check(); !st) return usage_fail("", st.error().message);
  if (o.no_template && (!o.tmpl.chat_template.empty() || !o.tmpl.chat_template_file.empty()))
    return usage_fail("", "--no-template and a chat template option: give one");
  if (o.no_template && (!o.system.empty() || !o.system_file.empty()))
    return usage_fail("", "--system needs the chat template (drop --no-template)");
  auto template_source = o.tmpl.source();
  if (!template_source) return fail("", template_source.error().message);
  auto system = o.system_message();
  if (!system) return fail("", system.error().message);
  auto given = o.command_line_prompt();
  if (!given) return fail("", given.error().message);

  // The model first: a wrong name is reported before anything waits for a prompt on stdin.
  const std::string path = resolve_model(o.model);
  if (path.empty()) return 1;
  std::string prompt;
  if (*given) {
    prompt = std::move(**given);
  } else if (isatty(STDIN_FILENO)) {
    std::fprintf(stderr, "> ");
    std::getline(std::cin, prompt);
  } else {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  if (prompt.empty()) return fail("", "empty prompt (give PROMPT, -p TEXT, -f FILE or text on stdin)");

  auto run = prepare_main(o, path);
  if (!run) return fail("", run.error().message);
  const Model& model = *run->lm.model;
  const GgufFile& file = model.file();
  const Tokenizer& tok = *run->lm.tok;
  Session& s = *run->lm.session;
  Sampler& sampler = *run->sampler;
  SpecSetup* spec = run->spec.get();

  std::string text = prompt;
  if (!o.no_template) {
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    if (!system->empty()) msgs.push_back({{"role", "system"}, {"content", *system}});
    msgs.push_back({{"role", "user"}, {"content", prompt}});
    auto rendered = render_chat_prompt(file, tok, msgs, {.template_source = *template_source});
    if (!rendered) return fail("", rendered.error().message);
    text = *rendered;
  }
  // The template may already start with the BOS text; do not add a second BOS.
  bool add_bos = tok.add_bos();
  if (add_bos && tok.bos_id() >= 0 && text.starts_with(tok.token_text(tok.bos_id()))) add_bos = false;
  const std::vector<int32_t> ids = tok.encode(text, add_bos, /*parse_special=*/true);
  if (o.log.verbose) std::fprintf(stderr, "[prompt] %s\n", text.c_str());

  if (!o.dump_dot.empty() || !o.dump_json.empty()) {
    const int n = static_cast<int>(std::min<size_t>(ids.size(), static_cast<size_t>(s.n_batch())));
    if (Status st = dump_graphs(s, n, 1, o.dump_dot, o.dump_json); !st) return fail("", st.error().message);
    return 0;
  }

  GenerateParams gp;
  gp.n_predict = o.sampling.s.n_predict;
  gp.stop = o.sampling.s.stop;
  gp.ignore_eog = o.sampling.s.ignore_eos;
  if (Status gs = o.sampling.set_grammar(tok, gp); !gs) return fail("", gs.error().message);

  struct sigaction sa {};
  sa.sa_handler = on_sigint_one_shot;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);

  bool ends_with_newline = true;
  auto trace = TraceFile::from_env(s, tok);  // MINFER_TRACE=FILE
  if (trace) trace->start(model.hparams().name, prompt, static_cast<int>(ids.size()));
  GenerateHooks hooks = trace ? trace->hooks() : GenerateHooks{};
  PrefillLine prefill_line(static_cast<int>(ids.size()) > s.n_batch());
  hooks.on_prefill = [&](int done, int total) {
    prefill_line.update(done, total);
    return !g_stop.load();
  };
  std::string reply;
  auto st = generate(s, tok, sampler, ids, gp, [&](std::string_view t) {
    prefill_line.clear();
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
    if (!t.empty()) ends_with_newline = t.back() == '\n';
    if (trace) reply += t;
    return !g_stop.load();
  }, hooks, GenerateSpec{spec ? spec->speculator(0) : nullptr, {}});
  prefill_line.clear();
  if (!st) return fail("", st.error().message);
  const bool interrupted = g_stop.load();
  if (trace) {
    const bool stop = st->reason == StopReason::kEog || st->reason == StopReason::kStopString;
    if (Status ts = trace->finish(reply, stop ? "stop" : "length", st->n_gen); !ts) return fail("", ts.error().message);
  }
  if (!o.ids_out.empty()) {
    std::ofstream f(o.ids_out);
    f << nlohmann::json{{"prompt", ids}, {"generated", st->tokens}}.dump() << "\n";
    if (!f) return fail("", fmt::format("--ids-out: cannot write '{}'", o.ids_out));
  }
  if (!ends_with_newline && isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
  std::fflush(stdout);
  if (st->prefill_cancelled)
    info(fmt::format("[prompt] {} of {} tokens in {:.2f} s ({:.1f} tok/s), interrupted", st->n_prompt, ids.size(), st->prompt_s,
                     st->prompt_tps()));
  else
    info(fmt::format("[prompt] {} tokens in {:.2f} s ({:.1f} tok/s)", st->n_prompt, st->prompt_s, st->prompt_tps()));
  if (!st->prefill_cancelled)
    info(fmt::format("[generate] {} tokens in {:.2f} s ({:.1f} tok/s), stop: {}, cpu {:.3f} s", st->n_gen, st->gen_s, st->gen_tps(),
                     interrupted ? "interrupted" : stop_reason_name(st->reason), st->gen_cpu_s));
  if (spec) info(spec_summary(st->spec));
  if (spec && o.log.verbose) {
    const SpecStats& ss = st->spec;
    const int n_plain = st->n_passes - static_cast<int>(ss.n_steps);
    const double plain_s = st->gen_s - ss.verify_s - ss.draft_s;
    std::fprintf(stderr, "[spec] %lld verify passes of %.1f rows, %.2f ms each; drafting %.2f ms per pass; %d other passes, %.2f ms each (with sampling)\n",
                 static_cast<long long>(ss.n_steps), ss.n_steps ? static_cast<double>(ss.n_verify_rows) / ss.n_steps : 0.0,
                 ss.n_steps ? 1e3 * ss.verify_s / ss.n_steps : 0.0, st->n_passes ? 1e3 * ss.draft_s / st->n_passes : 0.0, n_plain,
                 n_plain > 0 ? 1e3 * plain_s / n_plain : 0.0);
  }
  return interrupted ? 130 : 0;
}

}  // namespace minfer::cli
