#include "cli/main-options.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace minfer::cli {
namespace {

Expected<std::string> read_text_file(const std::string& path, std::string_view option) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("{}: cannot read '{}'", option, path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

Expected<std::optional<std::string>> MainOptions::command_line_prompt() const {
  const int n_given = (!prompt_words.empty() ? 1 : 0) + (!prompt.empty() ? 1 : 0) + (!prompt_file.empty() ? 1 : 0);
  if (n_given > 1) return make_error("give the prompt once: PROMPT words, -p TEXT or -f FILE");
  if (!prompt_file.empty()) {
    auto t = read_text_file(prompt_file, "-f");
    if (!t) return t.error();
    return std::optional<std::string>(std::move(*t));
  }
  if (!prompt.empty()) return std::optional<std::string>(prompt);
  if (prompt_words.empty()) return std::optional<std::string>();
  std::string joined;
  for (size_t i = 0; i < prompt_words.size(); ++i) joined += (i ? " " : "") + prompt_words[i];
  return std::optional<std::string>(joined);
}

Expected<std::string> MainOptions::system_message() const {
  if (!system.empty() && !system_file.empty()) return make_error("give the system message once: --system TEXT or -sysf FILE");
  if (!system_file.empty()) return read_text_file(system_file, "-sysf");
  return system;
}

Status MainOptions::check() const {
  if (auto kv = ctx.kv.dtype(); !kv) return kv.error();
  // Every range and format; token ids are checked against the vocabulary once it is loaded.
  if (auto p = sampling.to_params(INT32_MAX); !p) return p.error();
  return check_spec_options(spec);
}

std::optional<int> parse_main_options(int argc, char** argv, MainOptions& o) {
  CLI::App app{"Generate a reply to PROMPT through the model's chat template and stream it to stdout; with --cnv, "
               "chat (docs/chat.md)",
               "minfer"};
  set_usage(app, "minfer MODEL [PROMPT...] [OPTIONS]     (chat: minfer MODEL --cnv [OPTIONS])");
  std::string model_pos, model_opt, hf_repo;
  bool no_conversation = false, single_turn = false;
  app.add_option("MODEL", model_pos,
                 "GGUF path, a cached model name, hf:ORG/REPO[:QUANT] or ollama:MODEL[:TAG] (or give -m / -hf)");
  app.add_option("PROMPT", o.prompt_words, "prompt words (joined with spaces); read from stdin when there is no prompt");
  app.add_option("-m,--model", model_opt, "the model, as MODEL (then every positional word is the prompt)");
  app.add_option("--hf-repo", hf_repo, "(-hf) ORG/REPO[:QUANT]: the model from Hugging Face, as MODEL hf:ORG/REPO[:QUANT]");
  app.add_option("-p,--prompt", o.prompt, "the prompt (instead of PROMPT words); with --cnv, the first message");
  app.add_option("-f,--file", o.prompt_file, "read the prompt from a file");
  app.add_option("--system,--system-prompt", o.system, "(-sys) system message");
  app.add_option("--system-prompt-file", o.system_file, "(-sysf) read the system message from a file");
  add_context_options(app, o.ctx);
  add_log_options(app, o.log, "print the rendered prompt, the sampler chain and its seed; in chat, the [turn] lines too");
  add_template_options(app, o.tmpl);

  const char* chat = "Chat (--cnv)";
  app.add_flag("--cnv,--conversation,-i,--interactive,--interactive-first", o.chat,
               "chat: each line typed is a message (-cnv, -i and -if are llama.cpp's names)")
      ->group(chat);
  app.add_flag("--no-conversation", no_conversation, "(-no-cnv) one-shot: the default")->group(chat);
  app.add_flag("--single-turn", single_turn, "(-st) one-shot: the default")->group(chat);
  app.add_flag("--multiline-input", o.multiline, "(-mli) a message is every line up to an empty line")->group(chat);
  app.add_option("--color", o.color, "colors on the terminal: auto, on, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->group(chat);
  app.add_option("--session", o.session_file, "resume from and save to FILE (history JSON) and FILE.kv (KV cache)")->group(chat);

  const char* one_shot = "One-shot";
  app.add_flag("--no-template", o.no_template, "use the prompt as is, without the chat template")->group(one_shot);
  app.add_option("--dump-graph", o.dump_dot, "write the prompt's graph as Graphviz DOT, then exit")->group(one_shot);
  app.add_option("--dump-graph-json", o.dump_json, "write the prompt's graph as JSON (docs/graph.md), then exit")->group(one_shot);
  app.add_option("--ids-out", o.ids_out,
                 "write {\"prompt\": [ids], \"generated\": [ids]} as JSON to this file (for oracle comparisons)")
      ->group(one_shot);
  o.sampling.s.n_predict = 512;  // -n's default here (per reply); the table's -1 is until the context is full
  add_sampling_options(app, o.sampling, FieldSet::kAll);
  add_spec_options(app, o.spec);
  if (auto rc = parse_command_line(app, argc, argv)) return rc;
  if (Status st = finish_spec_options(o.spec); !st) {
    std::fprintf(stderr, "minfer: %s\n", st.error().message.c_str());
    return kUsageError;
  }

  auto usage = [&](const std::string& msg) {
    std::fprintf(stderr, "minfer: %s\nRun 'minfer MODEL --help' for the options.\n", msg.c_str());
    return std::optional<int>(kUsageError);
  };
  const int n_models = (!model_opt.empty() ? 1 : 0) + (!hf_repo.empty() ? 1 : 0);
  if (n_models > 1) return usage("give the model once: MODEL, -m MODEL or -hf REPO");
  if (n_models == 1) {
    o.model = !model_opt.empty() ? model_opt : "hf:" + hf_repo;
    if (!model_pos.empty()) o.prompt_words.insert(o.prompt_words.begin(), model_pos);  // `-m M hello` : all prompt
  } else {
    o.model = model_pos;
  }
  if (o.model.empty()) return usage("no MODEL given (a GGUF path, a cached name, hf:ORG/REPO or ollama:MODEL)");
  if ((!o.prompt_words.empty()) + (!o.prompt.empty()) + (!o.prompt_file.empty()) > 1)
    return usage("give the prompt once: PROMPT words, -p TEXT or -f FILE");
  if (!o.system.empty() && !o.system_file.empty()) return usage("give the system message once: --system TEXT or -sysf FILE");
  if (o.chat && (no_conversation || single_turn))
    return usage(fmt::format("{} asks for one-shot mode, --cnv for chat: give one", no_conversation ? "--no-conversation" : "--single-turn"));
  const auto refuse = [&](bool given, const char* name, const char* mode) {
    return given ? usage(fmt::format("{} is not an option of {}", name, mode)) : std::nullopt;
  };
  if (o.chat) {
    for (auto r : {refuse(o.no_template, "--no-template", "chat mode (the chat template frames every turn)"),
                   refuse(!o.dump_dot.empty(), "--dump-graph", "chat mode"),
                   refuse(!o.dump_json.empty(), "--dump-graph-json", "chat mode"),
                   refuse(!o.ids_out.empty(), "--ids-out", "chat mode")})
      if (r) return r;
  } else {
    for (auto r : {refuse(!o.session_file.empty(), "--session", "one-shot mode (add --cnv to chat)"),
                   refuse(o.multiline, "--multiline-input", "one-shot mode (add --cnv to chat)")})
      if (r) return r;
  }
  return std::nullopt;
}

}  // namespace minfer::cli
