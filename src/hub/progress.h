// Download progress on stderr. On a terminal: one line redrawn in place with a bar, bytes done of
// the total, speed and ETA. Otherwise: a plain line every few seconds
// (MINFER_PROGRESS_SECONDS, default 5), so logs stay readable.
//
//   Progress p("model-Q4_K_M.gguf", total_bytes, already_have);
//   p.add(n);  ...  p.finish();
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace minfer::hub {

class Progress {
 public:
  Progress(std::string label, int64_t total, int64_t start);
  void add(int64_t n);
  void restart();  // the server sent the whole file again: back to 0
  void finish();   // final line with the average speed
  void abandon();  // ends the line on a terminal before an error message

 private:
  void draw(bool force);
  std::string label_;
  int64_t total_, done_, start_;
  bool tty_;
  double interval_s_;
  std::chrono::steady_clock::time_point t0_, last_;
  bool open_line_ = false;
};

// "12.3 MB", "1.02 GB"
std::string human_bytes(int64_t n);

}  // namespace minfer::hub
