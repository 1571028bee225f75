// placeholder until the tokenizer lands: the commands refuse clearly.
#include <cstdio>

#include "cli/commands.h"

namespace minfer::cli {
int cmd_tokenize(int, char**) { std::fprintf(stderr, "minfer tokenize: not available in this build\n"); return 1; }
int cmd_detokenize(int, char**) { std::fprintf(stderr, "minfer detokenize: not available in this build\n"); return 1; }
}  // namespace minfer::cli
