// tokenizer-bench MODEL FILE [--no-special] [-n REPEATS]
//   -> {"bytes":N,"n_tokens":T,"seconds":[...]}
// Times Tokenizer::encode on the whole file, REPEATS times (default 5), in the same output
// format as `llama-oracle tokenize-bench`, so bench/tokenizer/run.py can compare the two.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer-bench MODEL FILE [--no-special] [-n REPEATS]\n");
    return 1;
  }
  bool special = true;
  int repeats = 5;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-special") == 0) special = false;
    else if (std::strcmp(argv[i], "-n") == 0 && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "tokenizer-bench: unknown argument '%s'\n", argv[i]);
      return 1;
    }
  }
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tokenizer-bench: cannot open '%s'\n", argv[2]);
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto file = minfer::GgufFile::open(argv[1]);
  if (!file) {
    std::fprintf(stderr, "tokenizer-bench: %s\n", file.error().message.c_str());
    return 1;
  }
  auto tok = minfer::Tokenizer::from_gguf(*file);
  if (!tok) {
    std::fprintf(stderr, "tokenizer-bench: %s\n", tok.error().message.c_str());
    return 1;
  }
  std::string secs;
  size_t n_tokens = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    n_tokens = tok->encode(text, false, special).size();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    secs.append(r ? "," : "").append(std::to_string(dt));
  }
  std::printf("{\"bytes\":%zu,\"n_tokens\":%zu,\"seconds\":[%s]}\n", text.size(), n_tokens, secs.c_str());
  return 0;
}
