// `minfer --cnv MODEL [options]` (or `minfer MODEL --cnv`): the chat REPL. Each turn prefills
// only the new part of the rendered template (cmd-chat-conv.h), replies stream to stdout,
// everything else (banner, notices, command output, speeds) goes to stderr, so with piped
// stdin stdout carries exactly the replies, one per turn, each ending with a newline.
// Commands: /exit /quit /clear /regen /system TEXT /save FILE /load FILE /stats /help.
// Ctrl-C stops the current reply, Ctrl-D (end of input) exits. docs/chat.md has the details.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/chat-prompt.h"
#include "cli/cmd-chat.h"
#include "cli/cmd-chat-conv.h"
#include "cli/cmd-chat-file.h"
#include "cli/cmd-chat-input.h"
#include "cli/commands.h"
#include "cli/context-options.h"
#include "cli/sampling-options.h"
#include "cli/spec-options.h"
#include "core/thread-pool.h"
#include "runtime/generate.h"
#include "models/model.h"
#include "runtime/session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

std::atomic<bool> g_interrupt{false};   // Ctrl-C seen
std::atomic<bool> g_generating{false};  // a reply is streaming

extern "C" void on_sigint(int) {
  g_interrupt = true;
  if (!g_generating) {
    constexpr char kMsg[] = "\n(Ctrl-C stops a reply; /exit or Ctrl-D quits)\n";
    ssize_t n = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    (void)n;
  }
}

constexpr const char* kHelp =
    "commands:\n"
    "  /exit, /quit     leave (Ctrl-D too)\n"
    "  /clear           start over, keeping the system prompt\n"
    "  /regen           replace the last reply with a new one\n"
    "  /system TEXT     set the system prompt (/system alone removes it)\n"
    "  /save FILE       save the conversation (FILE as JSON, FILE.kv the KV cache)\n"
    "  /load FILE       load a saved conversation\n"
    "  /stats           tokens, context use, speeds\n"
    "  /help            this list\n"
    "input: one line is one message; end a line with '\\' to continue it; with -mli a message\n"
    "ends at an empty line. Ctrl-C stops the current reply.\n";

struct Style {
  bool on = false;
  std::string dim() const { return on ? "\033[2m" : ""; }
  std::string green() const { return on ? "\033[1;32m" : ""; }
  std::string reset() const { return on ? "\033[0m" : ""; }
};

struct Totals {
  int turns = 0;
  int64_t n_prefill = 0, n_gen = 0;
  double prefill_s = 0, gen_s = 0;
  TurnStats last;
  bool has_last = false;
};

class Repl {
 public:
  Repl(Session& s, const Tokenizer& tok, Sampler& sampler, const GgufFile& file, std::string model_name,
       GenerateParams gp, int n_reserve, bool terminal, bool verbose, Style style)
      : s_(s), tok_(tok), file_(file), model_name_(std::move(model_name)), id_(model_identity(file)), gp_(std::move(gp)),
        n_reserve_(n_reserve), terminal_(terminal), verbose_(verbose), style_(style),
        conv_(s, tok, sampler, [this](const Messages& m, bool add_gen) {
          return render_chat_prompt(file_, tok_, m, {.add_generation_prompt = add_gen, .quiet = true});
        }) {}

  Conversation& conv() { return conv_; }

  void note(const std::string& msg) const {
    std::fprintf(stderr, "%s%s%s\n", style_.dim().c_str(), msg.c_str(), style_.reset().c_str());
  }

  // Runs a turn (or a regen) and prints the reply; false on an error already reported.
  bool reply(const std::string* user) {
    g_interrupt = false;
    g_generating = true;
    bool ends_with_newline = true;
    auto sink = [&](std::string_view t) {
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
      if (!t.empty()) ends_with_newline = t.back() == '\n';
      return !g_interrupt.load();
    };
    auto st = user ? conv_.turn(*user, gp_, n_reserve_, sink) : conv_.regen(gp_, n_reserve_, sink);
    g_generating = false;
    if (!ends_with_newline) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!st) {
      std::fprintf(stderr, "minfer: %s\n", st.error().message.c_str());
      return false;
    }
    if (st->n_dropped_messages > 0)
      note(fmt::format("[context] dropped the {} oldest messages ({} tokens) to fit the context of {}; {}", st->n_dropped_messages,
                       st->n_dropped_tokens, s_.n_ctx(),
                       st->reprefilled ? "the cache was rebuilt"
                                       : "their cache rows were removed in place and the rest shifted"));
    if (st->gen.reason == StopReason::kCancelled) note("[interrupted]");
    if (st->gen.reason == StopReason::kContextFull) note("[context] the context is full; the reply was cut");
    if (!terminal_ || verbose_)
      note(fmt::format("[turn] prefill {} tokens ({}) in {:.2f} s ({:.1f} tok/s), reply {} tokens in {:.2f} s ({:.1f} tok/s), "
                       "stop: {}, end of turn {} tokens, context {}/{}",
                       st->n_prefill, st->incremental ? "incremental" : "full render", st->gen.prompt_s, st->gen.prompt_tps(),
                       st->gen.n_gen, st->gen.gen_s, st->gen.gen_tps(), stop_reason_name(st->gen.reason), st->n_close,
                       s_.n_past(), s_.n_ctx()));
    if ((!terminal_ || verbose_) && conv_.speculator()) note(spec_summary(st->gen.spec));
    totals_.turns++;
    totals_.n_prefill += st->n_prefill + st->n_close;
    totals_.n_gen += st->gen.n_gen;
    totals_.prefill_s += st->gen.prompt_s;
    totals_.gen_s += st->gen.gen_s;
    totals_.last = std::move(*st);
    totals_.has_last = true;
    autosave();
    return true;
  }

  void stats() const {
    note(fmt::format("[stats] {} messages, context {}/{} tokens ({:.0f}%), KV cache {:.1f} MiB, {} turns",
                     conv_.messages().size(), s_.n_past(), s_.n_ctx(), 100.0 * s_.n_past() / s_.n_ctx(),
                     static_cast<double>(s_.kv_bytes()) / (1 << 20), totals_.turns));
    if (totals_.has_last) {
      const TurnStats& t = totals_.last;
      note(fmt::format("[stats] last turn: prefill {} tokens ({}) {:.1f} tok/s, reply {} tokens {:.1f} tok/s, stop: {}",
                       t.n_prefill, t.incremental ? "incremental" : "full render", t.gen.prompt_tps(), t.gen.n_gen,
                       t.gen.gen_tps(), stop_reason_name(t.gen.reason)));
    }
    note(fmt::format("[stats] total: {} tokens prefilled, {} generated ({:.1f} tok/s)", totals_.n_prefill, totals_.n_gen,
                     totals_.gen_s > 0 ? static_cast<double>(totals_.n_gen) / totals_.gen_s : 0.0));
    if (conv_.speculator()) note(spec_summary(conv_.speculator()->stats(), "[stats] speculative:"));
  }

  bool save(const std::string& path, bool quiet) {
    Status st = write_session(path, model_name_, id_, s_, conv_.messages(), conv_.kv_tokens(), conv_.kv_text());
    if (!st) {
      std::fprintf(stderr, "minfer: [session] %s\n", st.error().message.c_str());
      return false;
    }
    if (!quiet)
      note(fmt::format("[session] saved {} messages to {} ({} cached tokens in {}.kv)", conv_.messages().size(), path,
                       conv_.kv_tokens().size(), path));
    return true;
  }

  // Resumes from FILE (+ FILE.kv); a cache that cannot be used falls back to re-rendering.
  bool load(const std::string& path) {
    auto msgs = read_session_messages(path);
    if (!msgs) {
      std::fprintf(stderr, "minfer: [session] %s\n", msgs.error().message.c_str());
      return false;
    }
    const std::string kv_path = path + ".kv";
    std::string problem;
    auto kv = read_kv_file(kv_path, id_, s_);
    if (!kv) {
      problem = kv.error().message;
    } else {
      auto rendered = render_chat_prompt(file_, tok_, *msgs, {.add_generation_prompt = false, .quiet = true});
      if (!rendered) problem = rendered.error().message;
      else if (*rendered != kv->text) problem = fmt::format("'{}' holds another conversation than '{}'", kv_path, path);
    }
    Expected<int> n = 0;
    if (problem.empty()) {
      if (Status st = s_.kv_import(kv->kv, static_cast<int>(kv->tokens.size())); !st) problem = st.error().message;
    }
    if (problem.empty()) {
      n = conv_.restore(*msgs, std::move(kv->tokens), std::move(kv->text));
    } else {
      note(fmt::format("[session] {}; re-rendering the JSON history", problem));
      s_.clear();
      n = conv_.restore(*msgs, {}, {});
    }
    if (!n) {
      std::fprintf(stderr, "minfer: [session] %s\n", n.error().message.c_str());
      s_.clear();
      (void)conv_.restore(Messages::array(), {}, {});
      return false;
    }
    note(fmt::format("[session] resumed {} messages, {} tokens prefilled", conv_.messages().size(), *n));
    return true;
  }

  void set_session(std::string path) { session_path_ = std::move(path); }
  void autosave() {
    if (!session_path_.empty()) save(session_path_, true);
  }

  // A command line; false = leave.
  bool command(const std::string& line) {
    const size_t sp = line.find_first_of(" \t");
    const std::string cmd = line.substr(0, sp);
    std::string arg = sp == std::string::npos ? "" : line.substr(sp + 1);
    while (!arg.empty() && (arg.back() == ' ' || arg.back() == '\t')) arg.pop_back();
    while (!arg.empty() && (arg.front() == ' ' || arg.front() == '\t')) arg.erase(arg.begin());
    if (cmd == "/exit" || cmd == "/quit") return false;
    if (cmd == "/help") {
      std::fputs(kHelp, stderr);
    } else if (cmd == "/clear") {
      if (Status st = conv_.clear(); !st) std::fprintf(stderr, "minfer: %s\n", st.error().message.c_str());
      totals_.has_last = false;
      note(fmt::format("[chat] cleared{}", conv_.system().empty() ? "" : " (the system prompt is kept)"));
      autosave();
    } else if (cmd == "/regen") {
      reply(nullptr);
    } else if (cmd == "/system") {
      conv_.set_system(arg);
      note(arg.empty() ? "[chat] system prompt removed" : "[chat] system prompt set");
      autosave();
    } else if (cmd == "/save") {
      if (arg.empty()) note("usage: /save FILE");
      else save(arg, false);
    } else if (cmd == "/load") {
      if (arg.empty()) note("usage: /load FILE");
      else load(arg);
    } else if (cmd == "/stats") {
      stats();
    } else {
      note(fmt::format("unknown command '{}'; /help lists the commands (a message starting with '/' needs a leading space)", cmd));
    }
    return true;
  }

 private:
  Session& s_;
  const Tokenizer& tok_;
  const GgufFile& file_;
  std::string model_name_;
  ModelIdentity id_;
  GenerateParams gp_;
  int n_reserve_;
  bool terminal_, verbose_;
  Style style_;
  Conversation conv_;
  std::string session_path_;
  Totals totals_;
};

}  // namespace

int cmd_chat(int argc, char** argv) {
  // --cnv may stand anywhere; -mli is llama.cpp's spelling of --multiline-input.
  std::vector<char*> args;
  std::string mli = "--multiline-input";
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--cnv") == 0) continue;
    args.push_back(i > 0 && std::strcmp(argv[i], "-mli") == 0 ? mli.data() : argv[i]);
  }
  CLI::App app{"Chat with a model: each line you type is a message, the reply streams to stdout", "minfer --cnv MODEL"};
  std::string model, system, kv = "f16", color = "auto", session_file;
  std::vector<std::string> stops;
  int n_predict = 512, n_ctx = 4096, n_threads = 0, n_batch = 512;
  bool multiline = false, verbose = false;
  SamplingOptions so;
  SpecOptions spo;
  app.add_option("MODEL", model, "GGUF path or the name of a model in the cache")->required();
  app.add_option("-n,--n-predict", n_predict, "most tokens per reply; -1 = until the context is full")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  app.add_option("--stop", stops, "stop string (repeatable); the reply is cut before it");
  app.add_option("--system", system, "system message");
  app.add_flag("--multiline-input", multiline, "(-mli) a message is every line up to an empty line");
  app.add_option("--color", color, "colors on the terminal")->capture_default_str()->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--session", session_file, "resume from and save to FILE (history JSON) and FILE.kv (KV cache)");
  app.add_option("-c,--ctx-size", n_ctx, "context size (KV cache positions), capped at the model's")
      ->capture_default_str()->check(CLI::Range(16, 1 << 24));
  app.add_option("-t,--threads", n_threads, "threads (default: all)")->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", n_batch, "most prompt tokens per graph")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--kv-type", kv, "KV cache element type")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
  app.add_flag("-v,--verbose", verbose, "per-turn prefill and speed lines on a terminal too");
  bool swa_full = false;
  add_swa_full_flag(app, swa_full);
  add_sampling_options(app, so);
  add_spec_options(app, spo);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const bool terminal = isatty(STDIN_FILENO) != 0;
  Style style;
  const char* term = std::getenv("TERM");
  style.on = color == "on" || (color == "auto" && isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) && !std::getenv("NO_COLOR") &&
                               !(term && std::string_view(term) == "dumb"));

  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  auto m = Model::load(path);
  if (!m) return fail("", m.error().message);
  const GgufFile& file = (*m)->file();
  auto tok = Tokenizer::from_gguf(file);
  if (!tok) return fail("", tok.error().message);
  auto sp = so.to_params(tok->n_vocab());
  if (!sp) return fail("", sp.error().message);
  auto sampler = Sampler::create(*sp, tok->n_vocab());
  if (!sampler) return fail("", sampler.error().message);

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
  ContextParams draft_cp = s.context().params();
  draft_cp.n_ctx_seq = s.n_ctx();
  auto spec = SpecSetup::create(spo, *tok, draft_cp);
  if (!spec) return fail("", spec.error().message);

  const ChatTemplateChoice tmpl = choose_chat_template(file);
  std::fprintf(stderr, "[model] %s: %s, %d threads, ctx %d, %s KV\n", (*m)->hparams().name.c_str(),
               (*m)->hparams().arch.c_str(), p.n_threads, s.n_ctx(), kv.c_str());
  if (tmpl.fallback) std::fprintf(stderr, "[template] %s\n", chat_template_notice(file, tmpl).c_str());
  if (verbose) std::fprintf(stderr, "[sampler] %s\n", sampler->describe().c_str());
  if (*spec) std::fprintf(stderr, "%s\n", (*spec)->describe().c_str());

  GenerateParams gp;
  gp.n_predict = n_predict;
  gp.stop = stops;
  if (Status gs = so.set_grammar(*tok, gp); !gs) return fail("", gs.error().message);
  // Room kept for a reply (and the end-of-turn tokens) when deciding whether a turn fits.
  const int n_reserve = (n_predict >= 0 ? std::min(n_predict, s.n_ctx() / 2) : s.n_ctx() / 4) + 8;
  Repl repl(s, *tok, *sampler, file, (*m)->hparams().name, gp, n_reserve, terminal, verbose, style);
  if (!system.empty()) repl.conv().set_system(system);
  if (*spec) repl.conv().set_speculator((*spec)->speculator(0));

  if (!session_file.empty()) {
    if (std::filesystem::exists(session_file)) {
      if (repl.load(session_file) && !system.empty() && repl.conv().system() != system)
        repl.note("[session] the session's own system prompt is kept (--system ignored; /system changes it)");
    } else {
      repl.note(fmt::format("[session] '{}' does not exist yet; it is written after each turn", session_file));
    }
    repl.set_session(session_file);
  }

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);

  if (terminal)
    repl.note(fmt::format("[chat] /help lists the commands; Ctrl-C stops a reply, Ctrl-D or /exit quits{}",
                          ChatInput::has_line_editing() ? "" : " (no line editing in this build)"));
  // \001 ... \002 mark the escapes as zero-width for libedit; a visible character must follow
  // the last one (libedit drops a trailing marked sequence).
  ChatInput in(multiline, terminal, style.on ? "\001" + style.green() + "\002>\001" + style.reset() + "\002 " : "> ",
               [] { return g_interrupt.exchange(false); });
  while (auto msg = in.read_message()) {
    g_interrupt = false;
    if (!msg->empty() && (*msg)[0] == '/') {
      if (!repl.command(*msg)) break;
      continue;
    }
    if (msg->find_first_not_of(" \t\n") == std::string::npos) continue;  // nothing to send
    repl.reply(&*msg);
  }
  if (terminal) std::fputc('\n', stderr);
  return 0;
}

}  // namespace minfer::cli
