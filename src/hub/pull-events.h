// What a download reports to a caller that shows it elsewhere than on stderr (the server's
// /api/pull streams it as Ollama's progress lines). Every member may be empty.
//
//   PullEvents ev;
//   ev.status = [](const std::string& s) { send({{"status", s}}); };          // "pulling manifest" ...
//   ev.bytes = [](const std::string& digest, int64_t total, int64_t done) {  // digest "sha256:HEX"
//     return send({{"digest", digest}, {"total", total}, {"completed", done}}); };  // false: stop
//   resolve_model_ref("ollama:smollm2:135m", true, &ev);
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace minfer::hub {

struct PullEvents {
  // A step, in Ollama's words: "pulling manifest", "verifying sha256 digest", "writing manifest".
  std::function<void(const std::string& status)> status;
  // Bytes of one file held so far (total -1: unknown); false stops the download, its partial file
  // kept for the next try, as a cancel does.
  std::function<bool(const std::string& digest, int64_t total, int64_t completed)> bytes;

  void say(const std::string& s) const {
    if (status) status(s);
  }
};

}  // namespace minfer::hub
