// Stop strings on a streamed byte output. Bytes already shown cannot be taken back (pitfall 31:
// the terminal or the client has them), so the scanner holds back every tail that could still
// become a stop string, and an incomplete UTF-8 character at the end; a stop string split across
// tokens, or across the bytes of one character, is still found and cut before it is shown.
// Matching is byte-wise; when several stop strings match, the earliest start wins, then the
// longest. Empty stop strings are ignored.
//
//   StopScanner stops({"\nUser:", "</s>"});
//   for (;;) {                                        // per generated token
//     StopScanner::Step r = stops.feed(token_bytes);
//     write(r.text);                                  // safe to show now
//     if (r.stopped) break;                           // r.text ends before the stop string
//     if (eog || n_out == n_predict) { write(stops.finish()); break; }
//   }
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

// The stateless core. `pending`: output bytes not yet emitted (what the scanner held back last
// time, then the new bytes). Returns how many leading bytes are safe to emit now and, on a stop,
// which string (index into `stops`) starts at byte n_safe.
struct StopScan {
  size_t n_safe = 0;
  bool stopped = false;
  size_t stop_index = 0;
};
StopScan scan_stops(std::string_view pending, std::span<const std::string> stops);

// Bytes at the end of `s` that start a UTF-8 character but do not finish it (0..3).
size_t utf8_incomplete_tail(std::string_view s);

class StopScanner {
 public:
  explicit StopScanner(std::vector<std::string> stops);

  struct Step {
    std::string text;        // bytes to emit now
    bool stopped = false;    // a stop string was hit: generation is over
    int stop_index = -1;     // which one (index into the constructor's list)
  };
  // Appends `bytes` to the output; after a stop, returns nothing more.
  Step feed(std::string_view bytes);
  // End of generation without a stop: the held-back bytes, which are now final.
  std::string finish();

  bool stopped() const { return stopped_; }
  std::string_view held() const { return pending_; }
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace minfer
