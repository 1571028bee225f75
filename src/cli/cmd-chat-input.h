// Reading the user's messages for `--cnv`: with line editing and history (libedit) when stdin
// is a terminal, plain lines otherwise.
//
// One message per line; a line ending in '\' continues on the next line (the '\' becomes a
// newline). With multi-line input (-mli) a message is every line up to an empty line (or the
// end of input). A first line starting with '/' is a command, taken at once in both modes.
//
//   ChatInput in(/*multiline=*/false, isatty(STDIN_FILENO), "\033[32m> \033[0m");
//   while (auto msg = in.read_message()) { ... }   // nullopt: end of input (Ctrl-D)
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace minfer::cli {

class ChatInput {
 public:
  // interrupted(): whether Ctrl-C arrived; a line cut by it is dropped (not the end of input).
  ChatInput(bool multiline, bool terminal, std::string prompt, std::function<bool()> interrupted = {},
            std::string cont_prompt = "... ");
  ~ChatInput();
  std::optional<std::string> read_message();
  bool terminal() const { return terminal_; }
  static bool has_line_editing();

 private:
  std::optional<std::string> read_line(const std::string& prompt);
  bool multiline_, terminal_;
  std::string prompt_;
  std::function<bool()> interrupted_;
  std::string cont_prompt_;
};

}  // namespace minfer::cli
