// placeholder until the template engine lands: the command refuses clearly.
#include <cstdio>

#include "cli/commands.h"

namespace minfer::cli {
int cmd_chat_template(int, char**) { std::fprintf(stderr, "minfer chat-template: not available in this build\n"); return 1; }
}  // namespace minfer::cli
