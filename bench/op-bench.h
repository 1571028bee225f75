// What the one-op benchmarks (attn-decode.cpp, matmul-decode.cpp) share: "--flag value"
// parsing, a type by its name, a graph node, a clock and the median of the repetitions.
//   int64_t depth = 448;
//   DType kv = DType::F16;
//   if (!parse_flags(argc, argv, {{"--depth", int_flag(depth)}, {"--kv", type_flag(kv)}})) return 2;
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "graph/graph.h"

namespace minfer::bench {

// A flag's setter: false when the value is not one it takes.
using FlagSetter = std::function<bool(const char* value)>;

inline FlagSetter int_flag(int64_t& x, int shift = 0) {
  return [&x, shift](const char* v) {
    char* end = nullptr;
    x = std::strtoll(v, &end, 10) << shift;
    return end && *end == '\0';
  };
}

// q8_0, Q8_0, f16 ... (dtype_from_name's names, any case).
inline FlagSetter type_flag(DType& t) {
  return [&t](const char* v) {
    std::string up = v;
    std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
    const auto parsed = dtype_from_name(up);
    if (parsed) t = *parsed;
    return parsed.has_value();
  };
}

// Every argument after argv[0] is a flag and its value; prints what is wrong and returns false.
inline bool parse_flags(int argc, char** argv, const std::map<std::string, FlagSetter>& flags) {
  for (int i = 1; i < argc; i += 2) {
    const auto it = flags.find(argv[i]);
    if (it == flags.end()) {
      std::fprintf(stderr, "%s: unknown flag %s\n", argv[0], argv[i]);
      return false;
    }
    if (i + 1 >= argc || !it->second(argv[i + 1])) {
      std::fprintf(stderr, "%s: %s needs a valid value\n", argv[0], argv[i]);
      return false;
    }
  }
  return true;
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline Node make_node(Op op, DType t, Shape ne) {
  Node n;
  n.op = op;
  n.type = t;
  n.ne = ne;
  return n;
}

// The median of the repetitions' times (at least one).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace minfer::bench
