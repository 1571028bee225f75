// Command-line access to the reference (de)quantizers, for the gguf-py oracle test.
//
//   quant-tool dequant Q4_K blocks.bin out.f32    # raw blocks -> little-endian fp32
//   quant-tool quant   Q8_0 in.f32 blocks.bin     # fp32 -> raw blocks
//
// The element count comes from the input size, which must be a whole number of blocks (or of
// floats, for quant, a multiple of the block size). Errors go to stderr with exit status 1.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "quant/quant.h"

namespace minfer {
namespace {

Expected<std::vector<uint8_t>> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error("quant-tool: cannot open '{}': {}", path, std::strerror(errno));
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return make_error("quant-tool: read error on '{}'", path);
  return data;
}

Status write_file(const std::string& path, const void* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return make_error("quant-tool: cannot create '{}': {}", path, std::strerror(errno));
  const bool ok = std::fwrite(data, 1, size, f) == size;
  if (std::fclose(f) != 0 || !ok) return make_error("quant-tool: write error on '{}'", path);
  return Status::ok();
}

Status dequant(DType t, const std::string& in, const std::string& out) {
  const DTypeInfo& info = dtype_info(t);
  if (!can_dequantize(t)) return make_error("quant-tool: cannot dequantize type {}", info.name);
  auto data = read_file(in);
  MINFER_TRY(data);
  if (data->size() % info.block_bytes != 0)
    return make_error("quant-tool: '{}' is {} bytes, not a multiple of the {} block size {}", in,
                      data->size(), info.name, info.block_bytes);
  const int64_t n = static_cast<int64_t>(data->size() / info.block_bytes) * info.block_elems;
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, data->data(), y.data(), n);
  return write_file(out, y.data(), y.size() * sizeof(float));
}

Status quant(DType t, const std::string& in, const std::string& out) {
  const DTypeInfo& info = dtype_info(t);
  if (!can_quantize(t)) return make_error("quant-tool: cannot quantize to type {}", info.name);
  auto data = read_file(in);
  MINFER_TRY(data);
  if (data->size() % (sizeof(float) * info.block_elems) != 0)
    return make_error("quant-tool: '{}' is {} bytes, not a whole number of {} blocks of {} floats",
                      in, data->size(), info.name, info.block_elems);
  const int64_t n = static_cast<int64_t>(data->size() / sizeof(float));
  std::vector<float> x(static_cast<size_t>(n));
  std::memcpy(x.data(), data->data(), data->size());
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  return write_file(out, q.data(), q.size());
}

Status run(int argc, char** argv) {
  if (argc != 5)
    return make_error("usage: quant-tool dequant|quant TYPE IN OUT (got {} arguments, want 4)",
                      argc - 1);
  const std::string_view mode = argv[1];
  const std::optional<DType> t = dtype_from_name(argv[2]);
  if (!t) return make_error("quant-tool: unknown type '{}' (a GGML type name, e.g. Q4_K)", argv[2]);
  if (mode == "dequant") return dequant(*t, argv[3], argv[4]);
  if (mode == "quant") return quant(*t, argv[3], argv[4]);
  return make_error("quant-tool: unknown mode '{}' (want dequant or quant)", mode);
}

}  // namespace
}  // namespace minfer

int main(int argc, char** argv) {
  const minfer::Status s = minfer::run(argc, argv);
  if (!s) {
    std::fprintf(stderr, "%s\n", s.error().message.c_str());
    return 1;
  }
  return 0;
}
