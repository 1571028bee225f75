// `minfer chat-template (MODEL | --template FILE.jinja | --builtin NAME) --input CASE.json [--now DATE] [--mutable]`
// Prints exactly the prompt the chat template renders for CASE.json (no added newline);
// `--print-template` prints the template source instead (no --input needed).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/reader.h"
#include "runtime/chat-prompt.h"
#include "template/chat.h"

namespace minfer::cli {
namespace {

bool read_file(const std::string& path, std::string& out) {
  if (path == "-") {
    out.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

std::string token_text(const GgufFile& f, const char* id_key) {
  const GgufValue* id = f.find(id_key);
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (!id || !tokens || !tokens->as_array() || !id->as_int()) return "";
  const GgufArray& toks = *tokens->as_array();
  const int64_t i = *id->as_int();
  if (toks.elem_type() != GgufType::STRING || i < 0 || i >= static_cast<int64_t>(toks.size())) return "";
  return std::string(toks.string_at(static_cast<size_t>(i)));
}

}  // namespace

int cmd_chat_template(int argc, char** argv) {
  CLI::App app{"Render a chat template like transformers' apply_chat_template and print the prompt exactly "
               "(no added newline)",
               "minfer chat-template"};
  std::string model, template_path, builtin, input_path, now;
  bool mutable_lists = false, print_template = false;
  app.add_option("MODEL", model,
                 "GGUF model whose tokenizer.chat_template is used (when it has none: the built-in Gemma template "
                 "for gemma/gemma2/gemma3/gemma3n, ChatML otherwise)");
  app.add_option("--template", template_path, "a Jinja template file instead of a model's");
  app.add_option("--builtin", builtin, "a built-in template instead of a model's (" + jinja::builtin_template_names() + ")");
  app.add_option("--input", input_path,
                 "CASE.json: {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": bool, "
                 "\"bos_token\": ..., \"eos_token\": ..., extra kwargs...} ('-' reads stdin)");
  app.add_flag("--print-template", print_template, "print the template source that would be used instead of rendering");
  app.add_option("--now", now, "fixed date for strftime_now, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS "
                               "(default: the current local time)");
  app.add_flag("--mutable", mutable_lists,
               "allow list.append/dict.update... in templates (jinja2 SandboxedEnvironment); the default "
               "refuses them like transformers' ImmutableSandboxedEnvironment");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  if (int(!model.empty()) + int(!template_path.empty()) + int(!builtin.empty()) != 1)
    return fail("chat-template", "give one of MODEL, --template FILE.jinja or --builtin NAME");
  if (input_path.empty() && !print_template) return fail("chat-template", "--input CASE.json is required (or --print-template)");

  jinja::Value inputs = jinja::Value::none();
  if (!print_template) {
    std::string case_text;
    if (!read_file(input_path, case_text)) return fail("chat-template", "cannot read input '" + input_path + "'");
    auto in = jinja::chat_inputs_from_json(case_text);
    if (!in) return fail("chat-template", input_path + ": " + in.error().message);
    inputs = std::move(*in);
  }

  std::string source;
  if (!template_path.empty()) {
    if (!read_file(template_path, source)) return fail("chat-template", "cannot read template '" + template_path + "'");
  } else if (!builtin.empty()) {
    const jinja::BuiltinTemplate* b = jinja::find_builtin_template(builtin);
    if (!b) return fail("chat-template", "--builtin '" + builtin + "' is not a built-in template (" + jinja::builtin_template_names() + ")");
    source = b->source;
  } else {
    const std::string path = resolve_model(model);
    if (path.empty()) return 1;
    auto file = GgufFile::open(path);
    if (!file) return fail("chat-template", file.error().message);
    ChatTemplateChoice choice = choose_chat_template(*file);
    if (choice.fallback) std::fprintf(stderr, "minfer: %s\n", chat_template_notice(*file, choice).c_str());
    source = std::move(choice.source);
    // Like transformers' special_tokens_map: the model's BOS/EOS text unless the case sets them.
    if (!print_template) {
      if (std::string bos = token_text(*file, "tokenizer.ggml.bos_token_id"); !bos.empty())
        jinja::set_default_token(inputs, "bos_token", bos);
      if (std::string eos = token_text(*file, "tokenizer.ggml.eos_token_id"); !eos.empty())
        jinja::set_default_token(inputs, "eos_token", eos);
    }
  }
  if (print_template) {
    std::fwrite(source.data(), 1, source.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }

  jinja::RenderOptions opts;
  opts.immutable = !mutable_lists;
  if (!now.empty()) {
    auto tm = jinja::parse_now(now);
    if (!tm) return fail("chat-template", tm.error().message);
    opts.now = *tm;
  }
  auto out = jinja::render_chat(source, inputs, opts);
  if (!out) return fail("chat-template", out.error().message);
  std::fwrite(out->data(), 1, out->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace minfer::cli
