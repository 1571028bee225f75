// Command-line options shared by the minfer commands. Each option is declared here once (its
// names, llama.cpp's spellings, default, range and help) and every command that takes it calls
// the same add_ function, so `-c`, `-t`, `-b` or `--kv-type` mean the same everywhere.
// parse_command_line() parses with llama.cpp's single-dash spellings (-ngl, -ctk, -cnv, -fa,
// -sys ...) mapped to ours, refuses an unknown flag by its own name with the closest known one,
// and ends every usage error with one exit code, kUsageError.
//
//   CLI::App app{"Prompt-processing and generation speed", "minfer bench"};
//   ContextOptions co;                                   // -c -b -t --kv-type/-ctk/-ctv --swa-full
//   add_context_options(app, co);                       //   -ngl -fa --no-mmap --mlock
//   if (auto rc = parse_command_line(app, argc, argv)) return *rc;   // --help: 0, errors: 2
//   auto kv = co.kv.dtype();                             // Expected<DType>, errors name the flag
//   co.compat.warn();                                    // "-ngl 99: no GPU backend ..." on stderr
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "cli/commands.h"
#include "runtime/context.h"
#include "runtime/placement.h"
#include "core/dtype.h"
#include "core/status.h"

namespace minfer::cli {

// Parses argv (argv[0] is the program or "minfer CMD"). nullopt: go on; otherwise the exit code
// to return (0 after --help). Errors go to stderr as "minfer CMD: ..." with a hint.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// The usage line --help prints (CLI11 would print the app name, [OPTIONS], then positionals).
void set_usage(CLI::App& app, std::string usage);

// -c/--ctx-size N: KV cache positions; 0 = the model's training context; capped at it.
CLI::Option* add_ctx_size(CLI::App& app, int& n_ctx, const std::string& help = {});
// The context a model gets for -c N: N capped at the training context, 0 = the training context.
int context_for_model(int n_ctx, int64_t n_ctx_train);
// A memory size as flags take it: bytes, or a number with K, M, G or T (binary: 1 G = 2^30 bytes;
// "GB" and "GiB" read the same), e.g. "12G", "1.5GiB", "1536M". The error names the value.
Expected<uint64_t> parse_memory_size(std::string_view text);
// -t/--threads N: compute threads; 0 = all hardware threads.
CLI::Option* add_threads(CLI::App& app, int& n_threads);
// -b/--batch-size (also llama.cpp's -ub/--ubatch-size) N: most tokens in one graph.
CLI::Option* add_batch_size(CLI::App& app, int& n_batch, const std::string& help = {});

// --kv-type T (both caches), -ctk/--cache-type-k T and -ctv/--cache-type-v T (llama.cpp's).
struct KvTypeOptions {
  std::string both, k, v;  // as given; empty: not given
  // The cache type: f16 unless given; K and V must agree; a type minfer cannot store yet is an
  // error naming the flag and the types it can.
  Expected<DType> dtype() const;
  std::string name() const;  // "f16", "f32": for [model] lines
};
void add_kv_type(CLI::App& app, KvTypeOptions& o);

// --swa-full: sliding-window layers keep the whole context (Context's swa_full).
void add_swa_full_flag(CLI::App& app, bool& swa_full);

// -ngl/--gpu-layers/--n-gpu-layers N|all and -dev/--device NAME[,NAME]|none, as llama.cpp spells
// them: the last N layers (all: every layer and the output) on GPUs (runtime/placement.h).
struct OffloadOptions {
  std::string n_gpu_layers;  // as given; "" = not given
  std::string devices;       // as given; "" = not given
  // The Offload for ContextParams. -ngl with no --device takes the first hardware GPU (a software
  // device such as lavapipe only when named: it is slower than the CPU backend); with no GPU, or a
  // build without one, a warning says every layer runs on the CPU. --device alone offloads every
  // layer. Errors: a -ngl that is neither a count nor "all", a device this machine lacks.
  Expected<Offload> resolve() const;
};
void add_offload_options(CLI::App& app, OffloadOptions& o);

// llama.cpp flags accepted for compatibility: -fa/--flash-attn [on|off|auto],
// --no-mmap, --mlock, -tb/--threads-batch N. warn() says on stderr what does nothing on this
// build; mlock() locks the process's memory (what --mlock asks) and warns when it cannot.
struct CompatOptions {
  std::string flash_attn;  // "on", "off", "auto" or empty
  bool no_mmap = false, mlock_memory = false;
  std::optional<int> threads_batch;
  void warn(int n_threads) const;
  void mlock() const;
};
void add_compat_options(CLI::App& app, CompatOptions& o);

// Everything a command that creates a context takes.
struct ContextOptions {
  int n_ctx = 4096;
  int n_batch = 512;
  int n_threads = 0;
  KvTypeOptions kv;
  bool swa_full = false;
  OffloadOptions offload;
  CompatOptions compat;
};
void add_context_options(CLI::App& app, ContextOptions& o, const std::string& ctx_help = {});

// -v/--verbose and -q/--quiet (llama.cpp's --log-disable): whether informational lines ([load],
// [model], speeds, notices) go to stderr. Errors always do.
struct LogOptions {
  bool verbose = false, quiet = false;
};
void add_log_options(CLI::App& app, LogOptions& o, const std::string& verbose_help);

// --chat-template NAME|JINJA, --chat-template-file FILE, --jinja (accepted: templates are always
// Jinja here).
struct TemplateOptions {
  std::string chat_template, chat_template_file;
  bool jinja = false;
  // The template source to use instead of the model's: "" for the model's own; a built-in name
  // gives its source. Errors: unreadable or empty file, text that is neither Jinja nor a name,
  // Jinja that does not parse. *label gets a short description for a notice.
  Expected<std::string> source(std::string* label = nullptr) const;
};
void add_template_options(CLI::App& app, TemplateOptions& o);

}  // namespace minfer::cli
