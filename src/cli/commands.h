// Entry points of the minfer subcommands. Each takes the arguments after its name
// (args[0] is "minfer <cmd>" for messages) and returns the process exit code.
#pragma once

#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::cli {

int cmd_info(int argc, char** argv);
int cmd_list_devices();                         // cmd-devices.cpp: --list-devices
int cmd_quantize(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);        // cmd-tokenize.cpp
int cmd_detokenize(int argc, char** argv);      // cmd-tokenize.cpp
int cmd_chat_template(int argc, char** argv);   // cmd-chat-template.cpp
int cmd_logits(int argc, char** argv);          // cmd-logits.cpp
int cmd_perplexity(int argc, char** argv);      // cmd-perplexity.cpp
int cmd_bench(int argc, char** argv);           // cmd-bench.cpp
int cmd_serve(int argc, char** argv);           // cmd-serve.cpp
int cmd_download(int argc, char** argv);        // cmd-models.cpp
int cmd_list(int argc, char** argv);            // cmd-models.cpp
int cmd_rm(int argc, char** argv);              // cmd-models.cpp
int cmd_viz(int argc, char** argv);             // cmd-viz.cpp
int cmd_grammar(int argc, char** argv);         // cmd-grammar.cpp

// Exit codes (docs/cli.md): 1 when a command could not do its job (a model that is missing or
// not GGUF, a file that cannot be read or parsed, a value that depends on the model, a context
// overflow, a failed save); kUsageError when the command line itself is wrong, found before any
// work starts (an unknown flag, a value out of range or not one of those listed, a missing or
// conflicting argument).
inline constexpr int kUsageError = 2;

// Prints "minfer CMD: MSG" ("minfer: MSG" when CMD is empty) on stderr and returns 1, the exit
// code of a command that could not do its job: `return fail("bench", "no model given");`.
inline int fail(std::string_view cmd, const std::string& msg) {
  if (cmd.empty()) std::fprintf(stderr, "minfer: %s\n", msg.c_str());
  else std::fprintf(stderr, "minfer %.*s: %s\n", int(cmd.size()), cmd.data(), msg.c_str());
  return 1;
}
// The same message for a command line that is wrong; returns kUsageError.
inline int usage_fail(std::string_view cmd, const std::string& msg) {
  fail(cmd, msg);
  return kUsageError;
}

// Resolves MODEL through hub::resolve_model_ref (a path, a name in $MINFER_MODEL_DIR,
// hf:ORG/REPO[:QUANT], ollama:MODEL[:TAG]; downloads what no cache has, progress on stderr).
// On failure prints a helpful error and returns "".
std::string resolve_model(const std::string& model);

// While alive, SIGINT/SIGTERM stop downloads in flight (their partial files stay) instead of
// killing the process mid-write; the previous handlers come back after.
class InterruptibleDownloads {
 public:
  InterruptibleDownloads();
  ~InterruptibleDownloads();
  InterruptibleDownloads(const InterruptibleDownloads&) = delete;
  InterruptibleDownloads& operator=(const InterruptibleDownloads&) = delete;

 private:
  struct sigaction old_int_{}, old_term_{};
};

}  // namespace minfer::cli
