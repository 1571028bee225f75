// minfer command-line entry: dispatches to subcommands.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/commands.h"
#include "cli/main-options.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

constexpr Command kCommands[] = {
    {"info", minfer::cli::cmd_info, "show a model's architecture, hyperparameters, tensors, memory"},
    {"quantize", minfer::cli::cmd_quantize, "convert a GGUF model to another tensor type mix"},
    {"tokenize", minfer::cli::cmd_tokenize, "print the token ids of a text"},
    {"detokenize", minfer::cli::cmd_detokenize, "print the text of token ids"},
    {"grammar", minfer::cli::cmd_grammar, "check a GBNF grammar and match texts against it"},
    {"chat-template", minfer::cli::cmd_chat_template, "render a chat template like transformers' apply_chat_template"},
    {"logits", minfer::cli::cmd_logits, "write the logits of a token sequence (and greedy continuations)"},
    {"perplexity", minfer::cli::cmd_perplexity, "perplexity of a model on a text file (llama-perplexity's method)"},
    {"bench", minfer::cli::cmd_bench, "prompt-processing and generation speed (like llama-bench)"},
    {"serve", minfer::cli::cmd_serve, "OpenAI-compatible HTTP server with parallel slots (docs/server-api.md)"},
    {"viz", minfer::cli::cmd_viz, "the compute graph in the browser, live while it generates (docs/viz.md)"},
    {"download", minfer::cli::cmd_download, "fetch a model (hf:ORG/REPO[:QUANT], ollama:MODEL[:TAG]); prints its path"},
    {"list", minfer::cli::cmd_list, "show the models in minfer's, Hugging Face's and Ollama's caches"},
    {"rm", minfer::cli::cmd_rm, "delete a cached model"},
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "minfer %s: local LLM inference from GGUF files\n\n"
               "usage: minfer MODEL [PROMPT...] [options]   generate a reply (minfer MODEL --help for options)\n"
               "       minfer MODEL --cnv [options]         chat (also -cnv, -i; docs/chat.md)\n"
               "       minfer COMMAND [options]            (minfer COMMAND --help for details)\n"
               "       minfer --list-devices                the GPUs (and software devices) this build can use\n\ncommands:\n",
               MINFER_VERSION);
  for (const Command& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.help);
  std::fprintf(out,
               "\nMODEL is a path, the name of a model in $MINFER_MODEL_DIR (default ~/.cache/minfer/models),\n"
               "hf:ORG/REPO[:QUANT|:FILE] (Hugging Face; the hub cache is shared with huggingface_hub and llama.cpp)\n"
               "or ollama:MODEL[:TAG] (the Ollama registry; an existing ~/.ollama store is used in place).\n"
               "A cached name needs no network; anything else is downloaded first (docs/models.md).\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? minfer::cli::kUsageError : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("minfer %s\n", MINFER_VERSION);
    return 0;
  }
  for (int i = 1; i < argc; ++i)  // llama.cpp's --list-devices: with any command, prints and exits
    if (std::strcmp(argv[i], "--list-devices") == 0) return minfer::cli::cmd_list_devices();
  for (const Command& c : kCommands)
    if (std::string_view(argv[1]) == c.name) return c.run(argc - 1, argv + 1);
  // Anything else is the main command: minfer MODEL [PROMPT...] [options], one-shot or --cnv.
  minfer::cli::MainOptions o;
  if (auto rc = minfer::cli::parse_main_options(argc, argv, o)) return *rc;
  return o.chat ? minfer::cli::run_chat(o) : minfer::cli::run_generate(o);
}
