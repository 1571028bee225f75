// `minfer --cnv MODEL [options]` (also `minfer MODEL --cnv`): the chat REPL (cmd-chat.cpp).
// argv[0] is the program; "--cnv" may stand anywhere in argv.
#pragma once

namespace minfer::cli {

int cmd_chat(int argc, char** argv);

}  // namespace minfer::cli
