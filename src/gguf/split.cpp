#include <fmt/format.h>

#include "gguf/reader.h"

namespace minfer {

std::optional<SplitName> parse_split_name(std::string_view path) {
  // "<prefix>-NNNNN-of-MMMMM.gguf": 5 digits each, 1 <= NNNNN <= MMMMM.
  constexpr std::string_view kExt = ".gguf";
  constexpr size_t kTail = 1 + 5 + 4 + 5;  // "-NNNNN-of-MMMMM"
  if (path.size() < kTail + kExt.size() + 1 || !path.ends_with(kExt)) return std::nullopt;
  const std::string_view tail = path.substr(path.size() - kExt.size() - kTail, kTail);
  auto digits = [](std::string_view s) -> std::optional<int> {
    int v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-") return std::nullopt;
  auto index = digits(tail.substr(1, 5));
  auto count = digits(tail.substr(10, 5));
  if (!index || !count || *index < 1 || *index > *count) return std::nullopt;
  return SplitName{std::string(path.substr(0, path.size() - kExt.size() - kTail)), *index, *count};
}

std::string make_split_name(std::string_view prefix, int index, int count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, index, count);
}

}  // namespace minfer
