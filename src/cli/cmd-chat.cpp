// `minfer MODEL --cnv [options]` (or -cnv, -i, -if): the chat REPL. Each turn prefills
// only the new part of the rendered template (cmd-chat-conv.h), replies stream to stdout,
// everything else (banner, notices, command output, speeds) goes to stderr, so with piped
// stdin stdout carries exactly the replies, one per turn, each ending with a newline.
// Commands: /exit /quit /clear /regen /system TEXT /save FILE /load FILE /stats /help.
// Ctrl-C stops the current reply (during the prefill of a long message: undoes the turn),
// Ctrl-D (end of input) exits. A failed save makes the exit code 1. docs/chat.md has the details.
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
#include "cli/cmd-chat-conv.h"
#include "cli/cmd-chat-file.h"
#include "cli/cmd-chat-input.h"
#include "cli/commands.h"
#include "cli/main-setup.h"
#include "cli/notice.h"
#include "cli/prefill-line.h"
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
       std::string template_source, GenerateParams gp, int n_reserve, bool terminal, bool verbose, Style style)
      : s_(s), tok_(tok), file_(file), model_name_(std::move(model_name)), id_(model_identity(file)),
        template_source_(std::move(template_source)), gp_(std::move(gp)), n_reserve_(n_reserve), terminal_(terminal),
        verbose_(verbose), style_(style), conv_(s, tok, sampler, [this](const Messages& m, bool add_gen) {
          return render_chat_prompt(file_, tok_, m,
                                    {.add_generation_prompt = add_gen, .quiet = true, .template_source = template_source_});
        }) {}

  Conversation& conv() { return conv_; }

  void note(const std::string& msg) const { info(style_.dim() + msg + style_.reset()); }
  int n_failed_saves() const { return n_failed_saves_; }

  // Runs a turn (or a regen) and prints the reply; false on an error already reported.
  bool reply(const std::string* user) {
    g_interrupt = false;
    g_generating = true;
    bool ends_with_newline = true;
    PrefillLine prefill_line(true);
    conv_.set_on_prefill([&](int done, int total) {
      prefill_line.update(done, total);
      return !g_interrupt.load();
    });
    auto sink = [&](std::string_view t) {
      prefill_line.clear();
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
      if (!t.empty()) ends_with_newline = t.back() == '\n';
      return !g_interrupt.load();
    };
    auto st = user ? conv_.turn(*user, gp_, n_reserve_, sink) : conv_.regen(gp_, n_reserve_, sink);
    g_generating = false;
    prefill_line.clear();
    conv_.set_on_prefill({});
    if (st && st->prefill_cancelled) {
      note(user ? "[interrupted] while reading the message: it was not sent"
                : "[interrupted] while reading the prompt: the last reply is kept");
      return true;
    }
    if (!ends_with_newline) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!st) {
      std::fprintf(stderr, "minfer: %s\n", st.error().message.c_str());
      return false;
    }
    if (st->n_dropped_messages > 0)
      note(fmt::format("[context] dropped the {} oldest messages ({} tokens) to fit the context of {}; {}{}", st->n_dropped_messages,
                       st->n_dropped_tokens, s_.n_ctx(),
                       st->reprefilled ? "the cache was rebuilt"
                                       : "their cache rows were removed in place and the rest shifted",
                       session_path_.empty() ? "" : " (the session file keeps them)"));
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
    note(fmt::format("[stats] {} messages{}, context {}/{} tokens ({:.0f}%), KV cache {:.1f} MiB, {} turns",
                     conv_.messages().size(),
                     conv_.n_archived() ? fmt::format(" ({} older ones out of the context, kept in the session)", conv_.n_archived())
                                        : "",
                     s_.n_past(), s_.n_ctx(), 100.0 * s_.n_past() / s_.n_ctx(),
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
    const SessionHistory h{conv_.all_messages(), conv_.n_archived()};
    Status st = write_session(path, model_name_, id_, s_, h, conv_.kv_tokens(), conv_.kv_text());
    if (!st) {
      std::fprintf(stderr, "minfer: [session] %s\n", st.error().message.c_str());
      ++n_failed_saves_;
      return false;
    }
    if (!quiet)
      note(fmt::format("[session] saved {} messages to {} ({} cached tokens in {}.kv)", h.messages.size(), path,
                       conv_.kv_tokens().size(), path));
    return true;
  }

  // /load FILE: a file that is not a session, or one that cannot be resumed, leaves the
  // conversation as it was.
  bool load(const std::string& path) {
    auto h = read_session_history(path);
    if (!h) {
      std::fprintf(stderr, "minfer: [session] %s\n", h.error().message.c_str());
      return false;
    }
    const SessionHistory before{conv_.all_messages(), conv_.n_archived()};
    if (resume(path, *h)) return true;
    s_.clear();
    if (auto r = conv_.restore(before.messages, before.n_archived, {}, {}, /*n_reserve=*/0); !r)  // it fit before
      std::fprintf(stderr, "minfer: [session] %s\n", r.error().message.c_str());
    else
      note(fmt::format("[session] the conversation before /load is back ({} tokens prefilled)", r->n_prefilled));
    return false;
  }

  // Resumes the history read from FILE, with FILE.kv when it fits; a cache that cannot be used
  // falls back to re-rendering.
  bool resume(const std::string& path, const SessionHistory& history) {
    const std::string kv_path = path + ".kv";
    std::string problem;
    auto kv = read_kv_file(kv_path, id_, s_.context());
    if (!kv) {
      problem = kv.error().message;
    } else {
      // The cache holds the context window the session was saved with.
      const Messages& all = history.messages;
      const size_t i0 = !all.empty() && all[0].value("role", "") == "system" ? 1 : 0;
      Messages window = Messages::array();
      for (size_t i = 0; i < all.size(); ++i)
        if (i < i0 || i >= i0 + static_cast<size_t>(history.n_archived)) window.push_back(all[i]);
      auto rendered = render_chat_prompt(file_, tok_, window,
                                         {.add_generation_prompt = false, .quiet = true, .template_source = template_source_});
      // The cache may end before the history does (a turn whose end was not prefilled).
      if (!rendered) problem = rendered.error().message;
      else if (!rendered->starts_with(kv->text)) problem = fmt::format("'{}' holds another conversation than '{}'", kv_path, path);
    }
    if (problem.empty()) {
      if (Status st = s_.kv_import(kv->kv, static_cast<int>(kv->tokens.size())); !st) problem = st.error().message;
    }
    Expected<Conversation::Restored> r = Conversation::Restored{};
    if (problem.empty()) {
      r = conv_.restore(history.messages, history.n_archived, std::move(kv->tokens), std::move(kv->text), n_reserve_);
    } else {
      note(fmt::format("[session] {}; re-rendering the JSON history", problem));
      s_.clear();
      r = conv_.restore(history.messages, history.n_archived, {}, {}, n_reserve_);
    }
    if (!r) {
      std::fprintf(stderr, "minfer: [session] %s\n", r.error().message.c_str());
      s_.clear();
      (void)conv_.restore(Messages::array(), 0, {}, {}, 0);
      return false;
    }
    note(fmt::format("[session] resumed {} messages, {} tokens prefilled", history.messages.size(), r->n_prefilled));
    if (r->n_archived > 0)
      note(fmt::format("[context] the {} oldest messages do not fit the context of {} with room for a reply: they stay in "
                       "the session file but out of the context",
                       r->n_archived, s_.n_ctx()));
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
  std::string template_source_;  // "" = the model's
  GenerateParams gp_;
  int n_reserve_;
  bool terminal_, verbose_;
  Style style_;
  Conversation conv_;
  std::string session_path_;
  Totals totals_;
  int n_failed_saves_ = 0;
};

}  // namespace

int run_chat(const MainOptions& o) {
  set_quiet(o.log.quiet);
  if (Status st = o.check(); !st) return usage_fail("", st.error().message);
  std::string template_label;
  auto template_source = o.tmpl.source(&template_label);
  if (!template_source) return fail("", template_source.error().message);
  auto system = o.system_message();
  if (!system) return fail("", system.error().message);
  auto first = o.command_line_prompt();  // sent as the first message (llama-cli -cnv -p)
  if (!first) return fail("", first.error().message);

  const bool terminal = isatty(STDIN_FILENO) != 0;
  Style style;
  const char* term = std::getenv("TERM");
  style.on = o.color == "on" || (o.color == "auto" && isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) && !std::getenv("NO_COLOR") &&
                                 !(term && std::string_view(term) == "dumb"));

  // A session file that exists must be one: anything else is refused before it could be
  // overwritten by the first turn's save.
  std::optional<SessionHistory> resumed;
  if (!o.session_file.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(o.session_file, ec)) {
      auto h = read_session_history(o.session_file);
      if (!h)
        return fail("", fmt::format("[session] {}; not using it (it would be overwritten): give another --session "
                                    "FILE or move this one away",
                                    h.error().message));
      resumed = std::move(*h);
    }
  }

  const std::string path = resolve_model(o.model);
  if (path.empty()) return 1;
  auto run = prepare_main(o, path);
  if (!run) return fail("", run.error().message);
  const Model& model = *run->lm.model;
  const GgufFile& file = model.file();
  const Tokenizer& tok = *run->lm.tok;
  Session& s = *run->lm.session;
  if (!template_source->empty()) {
    info("[template] " + template_label);
  } else if (const ChatTemplateChoice tmpl = choose_chat_template(file); tmpl.fallback) {
    info("[template] " + chat_template_notice(file, tmpl));
  }

  GenerateParams gp;
  gp.n_predict = o.sampling.s.n_predict;
  gp.stop = o.sampling.s.stop;
  gp.ignore_eog = o.sampling.s.ignore_eos;
  if (Status gs = o.sampling.set_grammar(tok, gp); !gs) return fail("", gs.error().message);
  // Room kept for a reply (and the end-of-turn tokens) when deciding whether a turn fits.
  const int n_reserve = (o.sampling.s.n_predict >= 0 ? std::min(o.sampling.s.n_predict, s.n_ctx() / 2) : s.n_ctx() / 4) + 8;
  Repl repl(s, tok, *run->sampler, file, model.hparams().name, *template_source, gp, n_reserve, terminal, o.log.verbose, style);
  if (!system->empty()) repl.conv().set_system(*system);
  if (run->spec) repl.conv().set_speculator(run->spec->speculator(0));

  if (!o.session_file.empty()) {
    if (resumed) {
      // A session that cannot be resumed here is left alone (the first turn would overwrite it).
      if (!repl.resume(o.session_file, *resumed))
        return fail("", fmt::format("[session] cannot resume '{}' (above); not using it: give another --session FILE, "
                                    "or the options it needs",
                                    o.session_file));
      if (!system->empty() && repl.conv().system() != *system)
        repl.note("[session] the session's own system prompt is kept (--system ignored; /system changes it)");
    } else {
      repl.note(fmt::format("[session] '{}' does not exist yet; it is written after each turn", o.session_file));
    }
    repl.set_session(o.session_file);
  }

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);

  if (terminal)
    repl.note(fmt::format("[chat] /help lists the commands; Ctrl-C stops a reply, Ctrl-D or /exit quits{}",
                          ChatInput::has_line_editing() ? "" : " (no line editing in this build)"));
  if (*first && !first->value().empty()) repl.reply(&first->value());
  // \001 ... \002 mark the escapes as zero-width for libedit; a visible character must follow
  // the last one (libedit drops a trailing marked sequence).
  ChatInput in(o.multiline, terminal, style.on ? "\001" + style.green() + "\002>\001" + style.reset() + "\002 " : "> ",
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
  if (repl.n_failed_saves() > 0) {
    std::fprintf(stderr, "minfer: [session] %d save%s failed (see above)\n", repl.n_failed_saves(),
                 repl.n_failed_saves() == 1 ? "" : "s");
    return 1;
  }
  return 0;
}

}  // namespace minfer::cli
