// quant-row-tool: minfer's reference quantize_row / dequantize_row over raw files, for
// bench/quant-error.py and tests/oracle/kquant (which compare against ggml and gguf-py).
//
//   quant-row-tool quant TYPE IN.f32 OUT.bin [N_PER_ROW]   # IN: float32 [rows][N_PER_ROW]
//   quant-row-tool dequant TYPE IN.bin OUT.f32 N_PER_ROW   # IN: rows of row_bytes(TYPE, N)
//
// N_PER_ROW defaults to the whole file as one row. `quant` reports its speed on stderr as
// "ns_per_elem=X" (process CPU time, single thread). Errors exit with status 1.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/quant.h"

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "quant-row-tool: %s\n", msg.c_str());
  std::exit(1);
}

std::vector<unsigned char> read_file(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (!f) die(std::string("cannot open '") + path + "'");
  std::vector<unsigned char> data;
  unsigned char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + got);
  std::fclose(f);
  return data;
}

void write_file(const char* path, const void* data, size_t size) {
  FILE* f = std::fopen(path, "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
    die(std::string("cannot write '") + path + "'");
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

int64_t parse_count(const char* s) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v <= 0) die(std::string("bad element count '") + s + "'");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace minfer;
  if (argc < 5 || argc > 6) {
    std::fprintf(stderr,
                 "usage: quant-row-tool quant TYPE IN.f32 OUT.bin [N_PER_ROW]\n"
                 "       quant-row-tool dequant TYPE IN.bin OUT.f32 N_PER_ROW\n");
    return 1;
  }
  const std::string mode = argv[1];
  const auto type = dtype_from_name(argv[2]);
  if (!type) die(std::string("unknown type '") + argv[2] + "'");
  const int64_t block = dtype_info(*type).block_elems;
  const std::vector<unsigned char> in = read_file(argv[3]);

  if (mode == "quant") {
    if (!can_quantize(*type)) die(std::string("cannot quantize to ") + argv[2]);
    const int64_t n = static_cast<int64_t>(in.size() / sizeof(float));
    const int64_t per_row = argc == 6 ? parse_count(argv[5]) : n;
    if (in.size() % sizeof(float) != 0 || n == 0 || n % per_row != 0 || per_row % block != 0)
      die("input of " + std::to_string(in.size()) + " bytes is not rows of " +
          std::to_string(per_row) + " floats, or rows are not multiples of " + std::to_string(block));
    std::vector<float> x(static_cast<size_t>(n));
    std::copy_n(reinterpret_cast<const float*>(in.data()), n, x.data());
    const size_t row_size = row_bytes(*type, per_row);
    std::vector<unsigned char> out(row_size * static_cast<size_t>(n / per_row));
    const double t0 = cpu_seconds();
    for (int64_t r = 0; r < n / per_row; ++r)
      quantize_row(*type, x.data() + r * per_row, out.data() + r * row_size, per_row);
    const double t1 = cpu_seconds();
    std::fprintf(stderr, "ns_per_elem=%.1f\n", (t1 - t0) / static_cast<double>(n) * 1e9);
    write_file(argv[4], out.data(), out.size());
  } else if (mode == "dequant") {
    if (!can_dequantize(*type)) die(std::string("cannot dequantize ") + argv[2]);
    if (argc != 6) die("dequant needs N_PER_ROW");
    const int64_t per_row = parse_count(argv[5]);
    if (per_row % block != 0) die("N_PER_ROW is not a multiple of " + std::to_string(block));
    const size_t row_size = row_bytes(*type, per_row);
    if (in.empty() || in.size() % row_size != 0)
      die("input of " + std::to_string(in.size()) + " bytes is not rows of " + std::to_string(row_size));
    const int64_t rows = static_cast<int64_t>(in.size() / row_size);
    std::vector<float> out(static_cast<size_t>(rows * per_row));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(*type, in.data() + r * row_size, out.data() + r * per_row, per_row);
    write_file(argv[4], out.data(), out.size() * sizeof(float));
  } else {
    die("unknown mode '" + mode + "' (quant or dequant)");
  }
  return 0;
}
