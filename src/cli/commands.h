// Entry points of the minfer subcommands. Each takes the arguments after its name
// (args[0] is "minfer <cmd>" for messages) and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace minfer::cli {

int cmd_info(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);        // cmd-tokenize.cpp
int cmd_detokenize(int argc, char** argv);      // cmd-tokenize.cpp
int cmd_chat_template(int argc, char** argv);   // cmd-chat-template.cpp
int cmd_logits(int argc, char** argv);          // cmd-logits.cpp
int cmd_perplexity(int argc, char** argv);      // cmd-perplexity.cpp
int cmd_bench(int argc, char** argv);           // cmd-bench.cpp
// The main command, `minfer MODEL [PROMPT...]`: argv[0] is the program, argv[1] the model.
int cmd_generate(int argc, char** argv);        // cmd-generate.cpp

// Resolves MODEL: an existing path, else a name in the model cache ($MINFER_MODEL_DIR, else
// ~/.cache/minfer/models): exact file name (with or without .gguf), then a unique prefix.
// On failure prints a helpful error and returns "".
std::string resolve_model(const std::string& model);

}  // namespace minfer::cli
