#include "sampling/stop.h"

#include <algorithm>
#include <utility>

namespace minfer {

size_t utf8_incomplete_tail(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of the last character.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    size_t need = 0;                   // length of the sequence this lead byte starts
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) need = 3;
    else if (b >= 0xF0 && b <= 0xF4) need = 4;
    return need > back ? back : 0;     // ASCII or an invalid lead never waits for more
  }
  return 0;
}

StopScan scan_stops(std::string_view pending, std::span<const std::string> stops) {
  StopScan r;
  size_t best_pos = std::string_view::npos, best_len = 0;
  for (size_t i = 0; i < stops.size(); ++i) {
    const std::string& s = stops[i];
    if (s.empty()) continue;
    const size_t pos = pending.find(s);
    if (pos == std::string_view::npos) continue;
    if (pos < best_pos || (pos == best_pos && s.size() > best_len)) {
      best_pos = pos;
      best_len = s.size();
      r.stop_index = i;
    }
  }
  if (best_pos != std::string_view::npos) {
    r.n_safe = best_pos;
    r.stopped = true;
    return r;
  }
  // Longest tail of `pending` that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops) {
    const size_t max_k = std::min(s.size() - (s.empty() ? 0 : 1), pending.size());
    for (size_t k = max_k; k > hold; --k) {
      if (pending.substr(pending.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  r.n_safe = pending.size() - hold;
  r.n_safe -= utf8_incomplete_tail(pending.substr(0, r.n_safe));
  return r;
}

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {}

StopScanner::Step StopScanner::feed(std::string_view bytes) {
  Step step;
  if (stopped_) return step;
  pending_.append(bytes);
  const StopScan scan = scan_stops(pending_, stops_);
  step.text = pending_.substr(0, scan.n_safe);
  if (scan.stopped) {
    stopped_ = true;
    step.stopped = true;
    step.stop_index = static_cast<int>(scan.stop_index);
    pending_.clear();
  } else {
    pending_.erase(0, scan.n_safe);
  }
  return step;
}

std::string StopScanner::finish() {
  std::string rest = std::move(pending_);
  pending_.clear();
  return stopped_ ? std::string() : rest;
}

}  // namespace minfer
