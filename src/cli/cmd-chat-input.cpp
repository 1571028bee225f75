#include "cli/cmd-chat-input.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#ifdef MINFER_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace minfer::cli {

ChatInput::ChatInput(bool multiline, bool terminal, std::string prompt, std::function<bool()> interrupted,
                     std::string cont_prompt)
    : multiline_(multiline),
      terminal_(terminal),
      prompt_(std::move(prompt)),
      interrupted_(std::move(interrupted)),
      cont_prompt_(std::move(cont_prompt)) {
#ifdef MINFER_HAVE_LIBEDIT
  if (terminal_) using_history();
#endif
}

ChatInput::~ChatInput() = default;

bool ChatInput::has_line_editing() {
#ifdef MINFER_HAVE_LIBEDIT
  return true;
#else
  return false;
#endif
}

std::optional<std::string> ChatInput::read_line(const std::string& prompt) {
#ifdef MINFER_HAVE_LIBEDIT
  if (terminal_) {
    char* line = readline(prompt.c_str());
    if (!line) return std::nullopt;
    std::string s(line);
    std::free(line);
    return s;
  }
#endif
  if (terminal_) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  std::string s;
  if (!std::getline(std::cin, s)) {
    if (s.empty()) return std::nullopt;  // a last line without a newline still counts
    std::cin.clear();
    std::cin.setstate(std::ios::eofbit);
  }
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

std::optional<std::string> ChatInput::read_message() {
  std::string msg;
  bool first = true;
  for (;;) {
    auto line = read_line(first ? prompt_ : cont_prompt_);
    if (!line && interrupted_ && interrupted_()) return std::string();  // Ctrl-C: drop the input
    if (!line) {
      if (first) return std::nullopt;
      break;  // end of input ends the message
    }
    if (first && !line->empty() && (*line)[0] == '/') {
#ifdef MINFER_HAVE_LIBEDIT
      if (terminal_) add_history(line->c_str());
#endif
      return line;
    }
    if (!line->empty() && line->back() == '\\') {
      line->back() = '\n';
      msg += *line;
      first = false;
      continue;
    }
    if (multiline_) {
      if (line->empty()) {
        if (first) continue;  // blank lines before a message
        break;
      }
      msg += *line + "\n";
      first = false;
      continue;
    }
    msg += *line;
    break;
  }
  if (multiline_ && !msg.empty() && msg.back() == '\n') msg.pop_back();
#ifdef MINFER_HAVE_LIBEDIT
  if (terminal_ && !msg.empty()) add_history(msg.c_str());
#endif
  return msg;
}

}  // namespace minfer::cli
