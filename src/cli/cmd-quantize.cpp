// `minfer quantize IN.gguf OUT.gguf TYPE [-t N] [--pure] [--allow-requantize] [--split-max-tensors N]`
// TYPE in any case (q4_k_m = Q4_K_M), F32, or COPY (every tensor as it is: re-split, rewrite).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/thread-pool.h"
#include "quantize/quantize-model.h"

namespace minfer::cli {

int cmd_quantize(int argc, char** argv) {
  CLI::App app{"Convert a GGUF model to another type mix (requantizes through F32)", "minfer quantize"};
  std::string in, out, type;
  int n_threads = 0;
  bool pure = false, allow_requantize = false;
  size_t split_max_tensors = 0;
  app.add_option("IN", in, "input GGUF (any supported type; first part of a split model)")->required();
  app.add_option("OUT", out, "output GGUF")->required();
  app.add_option("TYPE", type,
                 "target, in any case: F32, " + file_type_names() +
                     " (Q3_K, Q4_K, Q5_K mean the _M mixes), or COPY (every tensor as it is)")
      ->required();
  add_threads(app, n_threads);
  app.add_flag("--pure", pure, "no mix: every weight matrix gets TYPE");
  app.add_flag("--allow-requantize", allow_requantize,
               "convert tensors that are already quantized (each conversion loses quality; start from F32/F16/BF16 when you can)");
  app.add_option("--split-max-tensors", split_max_tensors,
                 "write OUT as NAME-0000i-of-0000N.gguf parts of at most N tensors");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  for (char& ch : type) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));  // q4_k_m = Q4_K_M
  const bool copy = type == "COPY";
  const auto ft = copy ? std::optional<FileType>(FileType::F32) : file_type_from_name(type);
  if (!ft) {
    std::fprintf(stderr, "minfer quantize: unknown type '%s'; expected F32, %s or COPY\n", type.c_str(),
                 file_type_names().c_str());
    return kUsageError;
  }
  const std::string in_path = resolve_model(in);
  if (in_path.empty()) return 1;
  std::error_code ec;
  if (std::filesystem::equivalent(in_path, out, ec)) {
    std::fprintf(stderr, "minfer quantize: output '%s' is the input file\n", out.c_str());
    return 1;
  }

  QuantizeOptions opt;
  opt.file_type = *ft;
  if (n_threads == 0) n_threads = hardware_threads();
  opt.n_threads = n_threads;
  opt.pure = pure;
  opt.split_max_tensors = split_max_tensors;
  opt.copy = copy;
  opt.allow_requantize = allow_requantize;
  const bool tty = isatty(fileno(stderr)) != 0;
  int last_decile = -1;
  opt.on_tensor = [&](size_t i, size_t n, const std::string& name, std::string_view t) {
    const double frac = static_cast<double>(i + 1) / static_cast<double>(n);
    const int width = 30;
    const int fill = static_cast<int>(frac * width);
    const std::string bar = std::string(static_cast<size_t>(fill), '#') + std::string(static_cast<size_t>(width - fill), '.');
    if (tty) {
      std::fprintf(stderr, "\r[%s] %3d%% %zu/%zu %-32.32s %-6s", bar.c_str(), static_cast<int>(frac * 100), i + 1, n,
                   name.c_str(), std::string(t).c_str());
      if (i + 1 == n) std::fputc('\n', stderr);
    } else if (static_cast<int>(frac * 10) != last_decile || i + 1 == n) {
      last_decile = static_cast<int>(frac * 10);
      std::fprintf(stderr, "[%s] %3d%% %zu/%zu %s -> %s\n", bar.c_str(), static_cast<int>(frac * 100), i + 1, n,
                   name.c_str(), std::string(t).c_str());
    }
  };
  auto r = quantize_model(in_path, out, opt);
  if (!r) {
    if (tty) std::fputc('\n', stderr);
    std::fprintf(stderr, "minfer quantize: %s\n", r.error().message.c_str());
    return 1;
  }
  const double mb_in = static_cast<double>(r->in_bytes) / 1e6;
  std::fprintf(stderr,
               "quantized %s -> %s (%s): %zu tensors (%zu converted), %.1f MB -> %.1f MB in %.2f s "
               "(%.1f MB/s of input, %.1f M weights/s, %d threads)\n",
               in_path.c_str(), out.c_str(), copy ? "COPY" : std::string(file_type_name(*ft)).c_str(), r->n_tensors,
               r->n_quantized, mb_in, static_cast<double>(r->out_bytes) / 1e6, r->seconds,
               mb_in / r->seconds, static_cast<double>(r->n_elements) / 1e6 / r->seconds, n_threads);
  return 0;
}

}  // namespace minfer::cli
