// Lines for the user on stderr: information ([load], [model], speeds, notices) that -q/--quiet
// silences, warnings that it does not. Errors are printed by each command (commands.h fail()).
//
//   set_quiet(opts.log.quiet);
//   info(fmt::format("[load] {} in {:.2f} s", name, s));
//   warning("-ngl 99: this build has no GPU backend");     // "minfer: warning: -ngl 99: ..."
#pragma once

#include <string>

namespace minfer::cli {

void set_quiet(bool quiet);
bool quiet();
void info(const std::string& line);     // the line and a newline, unless quiet
void warning(const std::string& line);  // "minfer: warning: LINE", always

}  // namespace minfer::cli
