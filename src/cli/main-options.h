// The options of the main command, `minfer MODEL [PROMPT...]`, for one-shot generation and the
// chat REPL alike (--cnv, or llama.cpp's -cnv, -i, -if): declared once here, with llama.cpp's
// names beside ours (-p, -f, -sys, -sysf, -s, -r, -m, -hf ...). Options that only make sense in
// one mode are refused in the other by name.
//
//   MainOptions o;
//   if (auto rc = parse_main_options(argc, argv, o)) return *rc;   // --help: 0, usage errors: 2
//   return o.chat ? run_chat(o) : run_generate(o);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/sampling-options.h"
#include "cli/spec-options.h"
#include "core/status.h"

namespace minfer::cli {

struct MainOptions {
  std::string model;                      // MODEL, -m/--model, or hf:REPO from -hf/--hf-repo
  std::vector<std::string> prompt_words;  // PROMPT... (joined with single spaces)
  std::string prompt, prompt_file;        // -p/--prompt TEXT, -f/--file FILE
  std::string system, system_file;        // --system/-sys TEXT, -sysf FILE

  bool chat = false;  // --cnv, -cnv/--conversation, -i/--interactive, -if/--interactive-first
  // Chat only.
  bool multiline = false;
  std::string color = "auto";
  std::string session_file;
  // One-shot only.
  bool no_template = false;
  std::string dump_dot, dump_json, ids_out;

  ContextOptions ctx;
  SamplingOptions sampling;  // also -n (512 here), --stop, --ignore-eos: sampling.s
  SpecOptions spec;
  LogOptions log;
  TemplateOptions tmpl;

  // The prompt given on the command line (-p, PROMPT words or -f), or nullopt when none was.
  Expected<std::optional<std::string>> command_line_prompt() const;
  // The system message (--system or -sysf), "" when none.
  Expected<std::string> system_message() const;
  // The values that can be checked before a model is loaded: the KV type, the sampler's ranges,
  // speculative decoding's. An error here is a usage error.
  Status check() const;
};

// Parses the main command's arguments (argv[0] is the program). nullopt: run with `o` filled.
std::optional<int> parse_main_options(int argc, char** argv, MainOptions& o);

int run_generate(const MainOptions& o);  // cmd-generate.cpp
int run_chat(const MainOptions& o);      // cmd-chat.cpp

}  // namespace minfer::cli
