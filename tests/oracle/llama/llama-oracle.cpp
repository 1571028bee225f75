// llama-oracle: a small program of ours that links the prebuilt llama.cpp (libllama from
// node-llama-cpp, see scripts/setup.sh) through its public llama.h, so tests can compare minfer
// against an independent implementation. No llama.cpp code is compiled into it.
//
//   llama-oracle quantize IN.gguf OUT.gguf TYPE [-t N]          # TYPE as in llama-quantize
//   llama-oracle logits MODEL --tokens 1,2,3 --out L.f32 [-t N] [-c N]
//        -> L.f32 = float32 [n_tokens][n_vocab] row-major; stdout {"n_tokens":3,"n_vocab":49152}
//   llama-oracle greedy MODEL --tokens 1,2,3 -n 16 [-t N] [-c N]
//        -> {"greedy":[ids...]}   (exactly N argmax tokens; end-of-generation does not stop it)
//   llama-oracle greedy MODEL --tokens 1,2,3 -n 16 --grammar-file G.gbnf [-t N]
//        -> {"greedy":[ids...],"gen_seconds":s}  (llama.cpp's grammar sampler, then greedy, up to
//           N tokens; stops after end-of-generation; gen_seconds: the steps after the prompt)
//   llama-oracle greedy ... --timed: the same timing without a grammar (the sampler chain of greedy
//           alone; exactly N tokens, end-of-generation does not stop it)
//   llama-oracle greedy ... --shift-ctx N [--keep K]: llama-server's context shift in a context
//           of N positions: before a step whose token would leave no free position, the K
//           positions after the first stay and half of the rest go (llama_memory_seq_rm, the later
//           ones moved down by seq_add); exactly N greedy tokens as above
//   llama-oracle greedy ... --temp T [--seed S]: sampled instead of greedy (top-k 40, top-p 0.95,
//           min-p 0.05, temperature T, then a draw), with or without --grammar-file
//   llama-oracle tokenize MODEL TEXT [--special] [--bos]      # TEXT "-" reads stdin
//        -> {"tokens":[ids...]}
//   llama-oracle tokenize-lines MODEL [--special] [--bos]
//        stdin: one text per line, hex-encoded bytes -> stdout: one JSON array of ids per line
//   llama-oracle tokenize-bench MODEL FILE [--special] [-n REPEATS]
//        -> {"bytes":N,"n_tokens":T,"seconds":[...]}  (each repeat times llama_tokenize only)
//   llama-oracle sampler-lines    (no model) stdin: one case per line, "sigma N L0 L1 ..." or
//        "dynatemp TEMP RANGE EXPONENT L0 L1 ..." (logits, "-inf" allowed) -> stdout per line:
//        sigma: {"kept":[ids]} after llama.cpp's top-n-sigma sampler (ids whose logit stays
//        finite); dynatemp: {"logits":[...]} after its temp-ext sampler (the logits divided by
//        the dynamic temperature)
//   llama-oracle vocab-info MODEL
//        -> {"n_vocab":N,"bos":B,"eos":E,"eot":T,"add_bos":b,"add_eos":b,"fim":[pre,suf,mid,pad,rep,sep],"eog":[ids...]}
//   llama-oracle dump MODEL --tokens 1,2,3 --out DIR [--steps N] [-t N]
//        -> every tensor llama.cpp computes for the prompt batch (and for N greedy decode steps
//           after it), as DIR/<step>/<name>.f32 (float32, ggml's ne[0] fastest) plus
//           DIR/<step>/index.json {name: {"type":..., "ne":[...]}}; for op-by-op comparisons.
//   llama-oracle bench MODEL [-p 512] [-n 128] [-d 0] [-r 3] [-t N] [-b 512] [--kv-type T]
//        [--flash-attn on|off]
//        -> like llama-bench -o json: [{"n_prompt":..,"n_gen":..,"n_depth":..,"avg_ts":..,
//           "stddev_ts":..,"rss_bytes":..,"peak_rss_bytes":..,"load_seconds":..,"samples_ts":[..]},
//           ...] (resident memory right after the test, and the peak so far; load_seconds from
//           opening the file to the first decoded token); pp = one prompt of random tokens
//           (batches of -b), tg = single-token steps; each repetition after one warm-up, from a
//           cache holding the -d depth tokens (prefilled once, untimed, then cut back to them)
//   llama-oracle embed MODEL --tokens 1,2,3 --pooling last|mean|cls|none [-t N]
//        -> {"n_embd":N,"embedding":[[...]]}: llama.cpp's embeddings of the prompt (one batch,
//           a context with embeddings on): the pooled vector, or one row per token for none;
//           not normalized
//   llama-oracle perplexity MODEL -f TEXT.txt [-c 512] [--chunks N] [-t N]
//        -> "PPL = x +/- y" on stderr, {"ppl":x,"ppl_err":y,"n_chunks":..,"n_scored":..} on stdout
//        (chunks of -c tokens, the second half of each chunk scored, as llama-perplexity does)
//
// Common flags: --kv-type f16|f32 (KV cache type), --flash-attn on|off, -t N threads (default 1 for logits/greedy, since ggml's workers spin at
// barriers and stall badly on a loaded 2-core machine; all hardware threads for quantize),
// -v shows llama.cpp's log (otherwise only its errors), --bins DIR where the ggml CPU backends
// live. The backends directory is, in order: --bins, $MINFER_LLAMA_BINS, the directory holding
// the loaded libllama (dladdr), the compile-time default. Every failure prints
// "llama-oracle: ..." and exits with status 1.
#include <dlfcn.h>

#include <chrono>
#include <fstream>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/process-memory.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"
#include "sampling/sampler-case.h"  // tests/oracle

#ifndef MINFER_LLAMA_BINS_DEFAULT
#define MINFER_LLAMA_BINS_DEFAULT ""
#endif

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "llama-oracle: %s\n", msg.c_str());
  std::exit(1);
}

bool g_verbose = false;

void log_callback(ggml_log_level level, const char* text, void*) {
  if (g_verbose || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// Command-line arguments after the subcommand: positionals plus the flags we know.
struct Args {
  std::vector<std::string> pos;
  std::string tokens;  // "1,2,3"
  std::string out;
  std::string bins;
  std::string file;     // -f
  std::string grammar_file;  // greedy --grammar-file
  bool timed = false;        // greedy --timed
  double temp = 0;           // greedy --temp (0: greedy)
  int seed = 42;             // greedy --seed
  ggml_type kv_type = GGML_TYPE_F16;  // --kv-type f16|f32|q8_0|q4_0 (K and V)
  int flash = -1;       // --flash-attn on|off (default: llama.cpp's auto)
  int n_chunks = 0;     // --chunks (0 = all)
  int threads = 0;  // 0 = the subcommand's default
  int shift_ctx = 0, keep = 0;  // greedy --shift-ctx N --keep K (0: no context shift)
  int n_ctx = 0;
  int n_predict = -1;
  int n_prompt = 512;   // bench -p
  int reps = 3;         // bench -r
  int n_batch = 512;    // bench -b
  int n_depth = 0;      // bench -d
  bool special = false;
  bool bos = false;
  std::string pooling = "last";  // embed --pooling
};

int parse_int(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    die("flag " + flag + ": '" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
        std::to_string(hi) + "]");
  }
  return static_cast<int>(x);
}

Args parse_args(int argc, char** argv, int first) {
  Args a;
  for (int i = first; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("flag " + s + " needs a value");
      return argv[++i];
    };
    if (s == "--tokens") a.tokens = value();
    else if (s == "--out" || s == "-o") a.out = value();
    else if (s == "--bins") a.bins = value();
    else if (s == "-f" || s == "--file") a.file = value();
    else if (s == "--grammar-file") a.grammar_file = value();
    else if (s == "--timed") a.timed = true;
    else if (s == "--temp") a.temp = std::stod(value());
    else if (s == "--seed") a.seed = parse_int(s, value(), 0, 0x7fffffff);
    else if (s == "--kv-type") {
      const std::string v = value();
      if (v == "f16") a.kv_type = GGML_TYPE_F16;
      else if (v == "f32") a.kv_type = GGML_TYPE_F32;
      else if (v == "q8_0") a.kv_type = GGML_TYPE_Q8_0;
      else if (v == "q4_0") a.kv_type = GGML_TYPE_Q4_0;
      else die("--kv-type: '" + v + "' is not f16, f32, q8_0 or q4_0");
    } else if (s == "--flash-attn") {
      const std::string v = value();
      if (v != "on" && v != "off") die("--flash-attn: '" + v + "' is not on or off");
      a.flash = v == "on" ? 1 : 0;
    }
    else if (s == "--chunks") a.n_chunks = parse_int(s, value(), 0, 1 << 20);
    else if (s == "-t" || s == "--threads") a.threads = parse_int(s, value(), 1, 1024);
    else if (s == "-c" || s == "--ctx") a.n_ctx = parse_int(s, value(), 1, 1 << 24);
    else if (s == "--shift-ctx") a.shift_ctx = parse_int(s, value(), 8, 1 << 24);
    else if (s == "--keep") a.keep = parse_int(s, value(), 0, 1 << 24);
    else if (s == "-n") a.n_predict = parse_int(s, value(), 0, 1 << 20);
    else if (s == "-p") a.n_prompt = parse_int(s, value(), 0, 1 << 20);
    else if (s == "-r") a.reps = parse_int(s, value(), 1, 1000);
    else if (s == "-b") a.n_batch = parse_int(s, value(), 1, 1 << 20);
    else if (s == "-d") a.n_depth = parse_int(s, value(), 0, 1 << 24);
    else if (s == "--special") a.special = true;
    else if (s == "--pooling") a.pooling = value();
    else if (s == "--bos") a.bos = true;
    else if (s == "-v" || s == "--verbose") g_verbose = true;
    else if (s.size() > 1 && s[0] == '-') die("unknown flag '" + s + "'");
    else a.pos.push_back(s);
  }
  return a;
}

// "1,2,3" or "[1, 2, 3]" -> ids; each must be a non-negative integer.
std::vector<llama_token> parse_tokens(const std::string& s) {
  std::vector<llama_token> ids;
  std::string cur;
  auto flush = [&]() {
    if (cur.empty()) return;
    ids.push_back(parse_int("--tokens", cur, 0, 0x7fffffff));
    cur.clear();
  };
  for (char c : s) {
    if (c >= '0' && c <= '9') cur += c;
    else if (c == ',' || c == ' ' || c == '[' || c == ']' || c == '\n') flush();
    else die(std::string("--tokens: unexpected character '") + c + "' in '" + s + "'");
  }
  flush();
  if (ids.empty()) die("--tokens: no token ids given");
  return ids;
}

std::string json_ids(const char* key, const std::vector<llama_token>& ids) {
  std::string s = std::string("{\"") + key + "\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]}";
}

std::string bins_dir(const Args& a) {
  if (!a.bins.empty()) return a.bins;
  if (const char* e = std::getenv("MINFER_LLAMA_BINS"); e && *e) return e;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&llama_backend_init), &info) && info.dli_fname) {
    std::string p = info.dli_fname;
    const size_t slash = p.rfind('/');
    if (slash != std::string::npos) return p.substr(0, slash);
  }
  return MINFER_LLAMA_BINS_DEFAULT;
}

void init_backends(const Args& a) {
  llama_log_set(log_callback, nullptr);
  const std::string dir = bins_dir(a);
  ggml_backend_load_all_from_path(dir.c_str());
  if (ggml_backend_dev_count() == 0) die("no ggml backend could be loaded from '" + dir + "'");
  llama_backend_init();
}

// Owns a model and (optionally) a context; frees them on scope exit.
struct Session {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  const llama_vocab* vocab = nullptr;
  int n_vocab = 0;
  ~Session() {
    if (ctx) llama_free(ctx);
    if (model) llama_model_free(model);
  }
};

void load_model(Session& s, const std::string& path, bool vocab_only) {
  llama_model_params mp = llama_model_default_params();
  // MINFER_ORACLE_NGL: layers on llama.cpp's GPU backend (its Vulkan build as a device oracle);
  // unset: the CPU only.
  const char* ngl = std::getenv("MINFER_ORACLE_NGL");
  mp.n_gpu_layers = ngl ? std::atoi(ngl) : 0;
  mp.vocab_only = vocab_only;
  s.model = llama_model_load_from_file(path.c_str(), mp);
  if (!s.model) die("failed to load model '" + path + "' (run with -v for llama.cpp's log)");
  s.vocab = llama_model_get_vocab(s.model);
  s.n_vocab = llama_vocab_n_tokens(s.vocab);
}

// A context whose single batch holds every prompt token (n_batch = n_ubatch = n_tokens), so
// all positions are computed in one graph as a batched prefill.
void make_context(Session& s, const Args& a, int n_tokens, int n_ctx_needed, bool embeddings = false,
                  enum llama_pooling_type pooling = LLAMA_POOLING_TYPE_UNSPECIFIED) {
  llama_context_params cp = llama_context_default_params();
  cp.embeddings = embeddings;
  cp.pooling_type = pooling;
  cp.n_ctx = static_cast<uint32_t>(std::max(a.n_ctx, n_ctx_needed));
  cp.n_batch = static_cast<uint32_t>(std::max(n_tokens, 1));
  cp.n_ubatch = cp.n_batch;
  cp.n_seq_max = 1;
  cp.n_threads = std::max(a.threads, 1);
  cp.n_threads_batch = cp.n_threads;
  cp.no_perf = true;
  cp.type_k = cp.type_v = a.kv_type;
  if (a.flash >= 0) cp.flash_attn_type = a.flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  s.ctx = llama_init_from_model(s.model, cp);
  if (!s.ctx) die("failed to create a context of " + std::to_string(cp.n_ctx) + " tokens");
}

void check_ids(const Session& s, const std::vector<llama_token>& ids) {
  for (llama_token t : ids) {
    if (t >= s.n_vocab) {
      die("token id " + std::to_string(t) + " is out of range: n_vocab " + std::to_string(s.n_vocab));
    }
  }
}

// Decodes ids at positions pos0.. in one batch; logits requested for every position (all) or
// only the last one.
void decode(Session& s, const std::vector<llama_token>& ids, int pos0, bool all) {
  const int n = static_cast<int>(ids.size());
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    b.token[i] = ids[i];
    b.pos[i] = pos0 + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = (all || i == n - 1) ? 1 : 0;
  }
  b.n_tokens = n;
  const int32_t rc = llama_decode(s.ctx, b);
  llama_batch_free(b);
  if (rc != 0) die("llama_decode failed with status " + std::to_string(rc));
}

int cmd_quantize(const Args& a) {
  if (a.pos.size() != 3) die("usage: llama-oracle quantize IN.gguf OUT.gguf TYPE [-t N]");
  struct Named { const char* name; llama_ftype ftype; };
  static const Named kTypes[] = {
      {"F32", LLAMA_FTYPE_ALL_F32},         {"F16", LLAMA_FTYPE_MOSTLY_F16},
      {"BF16", LLAMA_FTYPE_MOSTLY_BF16},    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
      {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
      {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
      {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},    {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S},
      {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
      {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S},
      {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
      {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
      {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
  };
  std::string type = a.pos[2];
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::toupper(c); });
  const Named* hit = nullptr;
  for (const Named& n : kTypes) {
    if (type == n.name) hit = &n;
  }
  if (!hit) {
    std::string names;
    for (const Named& n : kTypes) names += std::string(names.empty() ? "" : " ") + n.name;
    die("unknown quantization type '" + a.pos[2] + "'; known: " + names);
  }
  llama_model_quantize_params qp = llama_model_quantize_default_params();
  qp.nthread = a.threads > 0 ? a.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  qp.ftype = hit->ftype;
  qp.allow_requantize = true;
  const uint32_t rc = llama_model_quantize(a.pos[0].c_str(), a.pos[1].c_str(), &qp);
  if (rc != 0) die("llama_model_quantize('" + a.pos[0] + "' -> '" + a.pos[1] + "', " + type + ") failed");
  std::printf("{\"quantized\":\"%s\",\"type\":\"%s\"}\n", a.pos[1].c_str(), type.c_str());
  return 0;
}

int cmd_logits(const Args& a) {
  if (a.pos.size() != 1 || a.tokens.empty() || a.out.empty()) {
    die("usage: llama-oracle logits MODEL --tokens 1,2,3 --out FILE.f32 [-t N] [-c N]");
  }
  const std::vector<llama_token> ids = parse_tokens(a.tokens);
  Session s;
  load_model(s, a.pos[0], false);
  check_ids(s, ids);
  const int n = static_cast<int>(ids.size());
  make_context(s, a, n, n);
  decode(s, ids, 0, true);

  FILE* f = std::fopen(a.out.c_str(), "wb");
  if (!f) die("cannot open '" + a.out + "' for writing: " + std::strerror(errno));
  size_t n_bad = 0;
  for (int i = 0; i < n; ++i) {
    const float* row = llama_get_logits_ith(s.ctx, i);  // [n_vocab]
    if (!row) die("no logits for position " + std::to_string(i));
    for (int v = 0; v < s.n_vocab; ++v) n_bad += std::isfinite(row[v]) ? 0 : 1;
    if (std::fwrite(row, sizeof(float), s.n_vocab, f) != static_cast<size_t>(s.n_vocab)) {
      std::fclose(f);
      die("short write to '" + a.out + "'");
    }
  }
  if (std::fclose(f) != 0) die("cannot close '" + a.out + "': " + std::strerror(errno));
  std::printf("{\"n_tokens\":%d,\"n_vocab\":%d,\"n_nonfinite\":%zu}\n", n, s.n_vocab, n_bad);
  return 0;
}

int cmd_embed(const Args& a) {
  if (a.pos.size() != 1 || a.tokens.empty())
    die("usage: llama-oracle embed MODEL --tokens 1,2,3 --pooling last|mean|cls|none [-t N]");
  enum llama_pooling_type pooling = LLAMA_POOLING_TYPE_LAST;
  if (a.pooling == "mean") pooling = LLAMA_POOLING_TYPE_MEAN;
  else if (a.pooling == "cls") pooling = LLAMA_POOLING_TYPE_CLS;
  else if (a.pooling == "none") pooling = LLAMA_POOLING_TYPE_NONE;
  else if (a.pooling != "last") die("--pooling: '" + a.pooling + "' is not last, mean, cls or none");
  const std::vector<llama_token> ids = parse_tokens(a.tokens);
  Session s;
  load_model(s, a.pos[0], false);
  check_ids(s, ids);
  const int n = static_cast<int>(ids.size());
  make_context(s, a, n, n, true, pooling);
  decode(s, ids, 0, true);
  const int n_embd = llama_model_n_embd(s.model);
  std::string out = "{\"n_embd\":" + std::to_string(n_embd) + ",\"embedding\":[";
  auto row = [&](const float* v) {
    std::string r = "[";
    char buf[32];
    for (int j = 0; j < n_embd; ++j) {
      std::snprintf(buf, sizeof buf, "%s%.9g", j ? "," : "", static_cast<double>(v[j]));
      r += buf;
    }
    return r + "]";
  };
  if (pooling == LLAMA_POOLING_TYPE_NONE) {
    for (int i = 0; i < n; ++i) {
      const float* v = llama_get_embeddings_ith(s.ctx, i);  // [n_embd]
      if (!v) die("no embedding for position " + std::to_string(i));
      out += (i ? "," : "") + row(v);
    }
  } else {
    const float* v = llama_get_embeddings_seq(s.ctx, 0);  // [n_embd]
    if (!v) die("no pooled embedding for sequence 0");
    out += row(v);
  }
  std::printf("%s]}\n", out.c_str());
  return 0;
}

// greedy through llama.cpp's sampler chain: the grammar sampler (when given), then greedy.
int greedy_sampled(Session& s, const Args& a, const std::vector<llama_token>& ids) {
  llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  if (!a.grammar_file.empty()) {
    std::ifstream in(a.grammar_file, std::ios::binary);
    if (!in) die("cannot read grammar file '" + a.grammar_file + "'");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    llama_sampler* g = llama_sampler_init_grammar(s.vocab, text.c_str(), "root");
    if (!g) die("llama.cpp refused the grammar in '" + a.grammar_file + "'");
    llama_sampler_chain_add(chain, g);
  }
  if (a.temp > 0) {
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(40));
    llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.95f, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_min_p(0.05f, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(static_cast<float>(a.temp)));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(static_cast<uint32_t>(a.seed)));
  } else {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
  }
  decode(s, ids, 0, false);
  int pos = static_cast<int>(ids.size());
  std::vector<llama_token> out;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < a.n_predict; ++step) {
    const llama_token t = llama_sampler_sample(chain, s.ctx, -1);  // applies and accepts
    out.push_back(t);
    if (!a.grammar_file.empty() && llama_vocab_is_eog(s.vocab, t)) break;  // without one: exactly N tokens
    decode(s, {t}, pos, false);
    ++pos;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  llama_sampler_free(chain);
  std::string j = json_ids("greedy", out);
  j.pop_back();  // the closing brace
  std::printf("%s,\"gen_seconds\":%.6f}\n", j.c_str(), secs);
  return 0;
}

int cmd_greedy(const Args& a) {
  if (a.pos.size() != 1 || a.tokens.empty() || a.n_predict < 0) {
    die("usage: llama-oracle greedy MODEL --tokens 1,2,3 -n N [-t N] [-c N]");
  }
  const std::vector<llama_token> ids = parse_tokens(a.tokens);
  Session s;
  load_model(s, a.pos[0], false);
  check_ids(s, ids);
  const int n = static_cast<int>(ids.size());
  if (a.shift_ctx > 0 && n + 1 >= a.shift_ctx) die("--shift-ctx: the prompt of " + std::to_string(n) + " tokens must leave a free position");
  make_context(s, a, n, a.shift_ctx > 0 ? a.shift_ctx : n + a.n_predict);
  std::vector<llama_token> out;
  int pos = 0;
  std::vector<llama_token> next = ids;
  if (!a.grammar_file.empty() || a.timed || a.temp > 0) return greedy_sampled(s, a, ids);
  for (int step = 0; step < a.n_predict; ++step) {
    if (step > 0 && a.shift_ctx > 0 && pos + 1 >= a.shift_ctx) {  // llama-server's context shift
      const int keep = std::min(a.shift_ctx - 4, a.keep);
      const int n_left = pos - keep;
      const int n_discard = std::clamp(n_left / 2, 0, std::max(0, n_left - 1));
      llama_memory_t mem = llama_get_memory(s.ctx);
      llama_memory_seq_rm(mem, 0, keep, keep + n_discard);
      llama_memory_seq_add(mem, 0, keep + n_discard, pos, -n_discard);
      pos -= n_discard;
    }
    decode(s, next, pos, false);
    pos += static_cast<int>(next.size());
    const float* row = llama_get_logits_ith(s.ctx, -1);  // [n_vocab]
    if (!row) die("no logits after position " + std::to_string(pos - 1));
    // First maximum on ties, so the choice is reproducible.
    const llama_token best = static_cast<llama_token>(std::max_element(row, row + s.n_vocab) - row);
    out.push_back(best);
    next.assign(1, best);
  }
  std::printf("%s\n", json_ids("greedy", out).c_str());
  return 0;
}

// Eval callback state of `dump`: writes each computed tensor as float32.
struct DumpState {
  std::string dir;
  std::string index;
  std::vector<uint8_t> raw;
  std::vector<float> f32;
};

bool dump_tensor(ggml_tensor* t, bool ask, void* user) {
  if (ask) return true;  // we want every tensor
  auto* st = static_cast<DumpState*>(user);
  if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16) return true;
  const size_t nb = ggml_nbytes(t);
  st->raw.resize(nb);
  ggml_backend_tensor_get(t, st->raw.data(), 0, nb);
  const int64_t n = ggml_nelements(t);
  st->f32.resize(static_cast<size_t>(n));
  size_t k = 0;
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
          const size_t off = static_cast<size_t>(i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
          if (t->type == GGML_TYPE_F32) std::memcpy(&st->f32[k++], st->raw.data() + off, 4);
          else {
            ggml_fp16_t h;
            std::memcpy(&h, st->raw.data() + off, 2);
            st->f32[k++] = ggml_fp16_to_fp32(h);
          }
        }
  std::string name = t->name;
  for (char& c : name) if (c == '/' || c == ' ' || c == '(' || c == ')') c = '_';
  const std::string path = st->dir + "/" + name + ".f32";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) die("cannot open '" + path + "': " + std::strerror(errno));
  std::fwrite(st->f32.data(), 4, st->f32.size(), f);
  std::fclose(f);
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s\"%s\":{\"type\":\"%s\",\"op\":\"%s\",\"ne\":[%lld,%lld,%lld,%lld]}",
                st->index.empty() ? "" : ",", name.c_str(), ggml_type_name(t->type), ggml_op_desc(t),
                (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
  st->index += buf;
  return true;
}

int cmd_dump(const Args& a) {
  if (a.pos.size() != 1 || a.tokens.empty() || a.out.empty()) {
    die("usage: llama-oracle dump MODEL --tokens 1,2,3 --out DIR [-n STEPS] [-t N]");
  }
  const std::vector<llama_token> ids = parse_tokens(a.tokens);
  const int steps = std::max(a.n_predict, 0);
  Session s;
  load_model(s, a.pos[0], false);
  check_ids(s, ids);
  const int n = static_cast<int>(ids.size());
  static DumpState st;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(std::max(a.n_ctx, n + steps + 1));
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n);
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = std::max(a.threads, 1);
  cp.no_perf = true;
  cp.cb_eval = dump_tensor;
  cp.cb_eval_user_data = &st;
  cp.type_k = cp.type_v = a.kv_type;
  if (a.flash >= 0) cp.flash_attn_type = a.flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  s.ctx = llama_init_from_model(s.model, cp);
  if (!s.ctx) die("failed to create a context");
  std::vector<llama_token> next = ids;
  int pos = 0;
  std::vector<llama_token> out;
  for (int step = 0; step <= steps; ++step) {
    st.dir = a.out + "/" + std::to_string(step);
    std::system(("mkdir -p '" + st.dir + "'").c_str());
    st.index.clear();
    decode(s, next, pos, false);
    pos += static_cast<int>(next.size());
    const float* row = llama_get_logits_ith(s.ctx, -1);
    const llama_token best = static_cast<llama_token>(std::max_element(row, row + s.n_vocab) - row);
    out.push_back(best);
    next.assign(1, best);
    std::ofstream(st.dir + "/index.json") << "{" << st.index << "}\n";
  }
  std::printf("%s\n", json_ids("greedy", out).c_str());
  return 0;
}

int cmd_bench(const Args& a) {
  if (a.pos.size() != 1) die("usage: llama-oracle bench MODEL [-p 512] [-n 128] [-d 0] [-r 3] [-t N] [-b 512]");
  const int n_pp = a.n_prompt, n_tg = a.n_predict < 0 ? 128 : a.n_predict, reps = a.reps, depth = a.n_depth;
  Session s;
  using Clock = std::chrono::steady_clock;
  const auto t_load = Clock::now();  // load_seconds: from here to the first decoded token
  load_model(s, a.pos[0], false);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(depth + std::max({n_pp, n_tg, 16}));
  cp.type_k = cp.type_v = a.kv_type;
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(a.n_batch);
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  cp.no_perf = true;
  if (a.flash >= 0) cp.flash_attn_type = a.flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  s.ctx = llama_init_from_model(s.model, cp);
  if (!s.ctx) die("failed to create a context");
  std::srand(1234);
  auto random_tokens = [&](int n) {
    std::vector<llama_token> t(static_cast<size_t>(n));
    for (auto& x : t) x = std::rand() % s.n_vocab;
    if (llama_vocab_get_add_bos(s.vocab) && n > 0) t[0] = llama_vocab_bos(s.vocab);
    return t;
  };
  // The cache holding exactly the depth's tokens: prefilled once, then cut back to them.
  bool depth_filled = false;
  auto prefill = [&](const std::vector<llama_token>& ids, int pos0) {
    for (int i = 0; i < static_cast<int>(ids.size()); i += a.n_batch) {
      const int m = std::min(a.n_batch, static_cast<int>(ids.size()) - i);
      decode(s, std::vector<llama_token>(ids.begin() + i, ids.begin() + i + m), pos0 + i, false);
    }
  };
  auto to_depth = [&](bool timed_warmup) {
    llama_memory_t mem = llama_get_memory(s.ctx);
    if (depth == 0 || timed_warmup) {
      llama_memory_clear(mem, true);
      depth_filled = false;
      return 0;
    }
    if (depth_filled && llama_memory_seq_rm(mem, 0, depth, -1)) return depth;
    llama_memory_clear(mem, true);
    prefill(random_tokens(depth), 0);
    llama_synchronize(s.ctx);
    depth_filled = true;
    return depth;
  };
  auto run_pp = [&](int n, bool warmup = false) {
    const int pos0 = to_depth(warmup);
    auto ids = random_tokens(n);
    if (pos0 > 0 && n > 0) ids[0] = std::rand() % s.n_vocab;  // no BOS in the middle
    const auto t0 = Clock::now();
    prefill(ids, pos0);
    llama_synchronize(s.ctx);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  auto run_tg = [&](int n, bool warmup = false) {
    const int pos0 = to_depth(warmup);
    auto ids = random_tokens(n);
    if (pos0 > 0 && n > 0) ids[0] = std::rand() % s.n_vocab;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) decode(s, {ids[static_cast<size_t>(i)]}, pos0 + i, false);
    llama_synchronize(s.ctx);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  run_tg(1, true);  // the first token ends the load time (as minfer bench)
  const double load_seconds = std::chrono::duration<double>(Clock::now() - t_load).count();
  if (n_pp > 0) run_pp(std::min(n_pp, 32), true);
  std::string out = "[";
  auto report = [&](int np, int ng, const std::vector<double>& ts) {
    double mean = 0, var = 0;
    for (double x : ts) mean += x;
    mean /= static_cast<double>(ts.size());
    for (double x : ts) var += (x - mean) * (x - mean);
    const double sd = ts.size() > 1 ? std::sqrt(var / static_cast<double>(ts.size() - 1)) : 0.0;
    char buf[256];
    const minfer::ProcessMemory mem = minfer::process_memory();
    std::snprintf(buf, sizeof buf,
                  "%s{\"n_prompt\":%d,\"n_gen\":%d,\"n_depth\":%d,\"n_threads\":%d,\"avg_ts\":%.4f,\"stddev_ts\":%.4f,"
                  "\"rss_bytes\":%zu,\"peak_rss_bytes\":%zu,\"load_seconds\":%.4f,\"samples_ts\":[",
                  out.size() > 1 ? "," : "", np, ng, depth, cp.n_threads, mean, sd, mem.rss, mem.peak_rss, load_seconds);
    out += buf;
    for (size_t i = 0; i < ts.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(ts[i]);
    }
    out += "]}";
  };
  if (n_pp > 0) {
    std::vector<double> ts;
    for (int r = 0; r < reps; ++r) ts.push_back(n_pp / run_pp(n_pp));
    report(n_pp, 0, ts);
  }
  if (n_tg > 0) {
    std::vector<double> ts;
    for (int r = 0; r < reps; ++r) ts.push_back(n_tg / run_tg(n_tg));
    report(0, n_tg, ts);
  }
  std::printf("%s]\n", out.c_str());
  return 0;
}

int cmd_tokenize(const Args& a) {
  if (a.pos.size() != 2) die("usage: llama-oracle tokenize MODEL TEXT [--special] [--bos]");
  std::string text = a.pos[1];
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  Session s;
  load_model(s, a.pos[0], true);
  const int32_t len = static_cast<int32_t>(text.size());
  std::vector<llama_token> ids(text.size() + 8);
  int32_t n = llama_tokenize(s.vocab, text.data(), len, ids.data(), static_cast<int32_t>(ids.size()),
                             a.bos, a.special);
  if (n < 0 && n != INT32_MIN) {
    ids.resize(static_cast<size_t>(-n));
    n = llama_tokenize(s.vocab, text.data(), len, ids.data(), static_cast<int32_t>(ids.size()), a.bos,
                       a.special);
  }
  if (n < 0) die("llama_tokenize failed (" + std::to_string(n) + ") on " + std::to_string(len) + " bytes");
  ids.resize(static_cast<size_t>(n));
  std::printf("%s\n", json_ids("tokens", ids).c_str());
  return 0;
}

// Perplexity over chunks of n_ctx tokens: each chunk is evaluated from an empty cache and the
// tokens of its second half are scored (position j predicts token j+1). With a vocab that adds
// BOS, the chunk's first token is replaced by BOS, as llama-perplexity does.
int cmd_perplexity(const Args& a) {
  if (a.pos.size() != 1 || a.file.empty()) {
    die("usage: llama-oracle perplexity MODEL -f TEXT.txt [-c 512] [--chunks N] [-t N]");
  }
  FILE* f = std::fopen(a.file.c_str(), "rb");
  if (!f) die("cannot open '" + a.file + "': " + std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
  std::fclose(f);

  Session s;
  load_model(s, a.pos[0], false);
  const bool add_bos = llama_vocab_get_add_bos(s.vocab);
  std::vector<llama_token> ids(text.size() + 8);
  const int32_t n_tok = llama_tokenize(s.vocab, text.data(), static_cast<int32_t>(text.size()),
                                       ids.data(), static_cast<int32_t>(ids.size()), add_bos, false);
  if (n_tok < 0) die("llama_tokenize failed on '" + a.file + "'");
  ids.resize(static_cast<size_t>(n_tok));
  const int n_ctx = a.n_ctx > 0 ? a.n_ctx : 512;
  int n_chunks = n_tok / n_ctx;
  if (a.n_chunks > 0) n_chunks = std::min(n_chunks, a.n_chunks);
  if (n_chunks < 1) die("text has " + std::to_string(n_tok) + " tokens, fewer than one chunk of " + std::to_string(n_ctx));
  Args ca = a;
  ca.n_ctx = n_ctx;
  if (ca.threads == 0) ca.threads = 1;
  make_context(s, ca, n_ctx, n_ctx);
  const int first = n_ctx / 2;
  double nll = 0, nll2 = 0;
  long count = 0;
  for (int c = 0; c < n_chunks; ++c) {
    std::vector<llama_token> chunk(ids.begin() + static_cast<long>(c) * n_ctx, ids.begin() + static_cast<long>(c + 1) * n_ctx);
    if (add_bos) chunk[0] = llama_vocab_bos(s.vocab);
    llama_memory_clear(llama_get_memory(s.ctx), true);
    decode(s, chunk, 0, true);
    for (int j = first; j < n_ctx - 1; ++j) {
      const float* row = llama_get_logits_ith(s.ctx, j);  // [n_vocab]
      double mx = row[0];
      for (int v = 1; v < s.n_vocab; ++v) mx = std::max<double>(mx, row[v]);
      double sum = 0;
      for (int v = 0; v < s.n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      const double lp = static_cast<double>(row[chunk[j + 1]]) - mx - std::log(sum);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    std::fprintf(stderr, "[%d/%d] ppl so far %.4f\n", c + 1, n_chunks, std::exp(nll / static_cast<double>(count)));
  }
  const double mean = nll / static_cast<double>(count);
  const double var = nll2 / static_cast<double>(count) - mean * mean;
  const double ppl = std::exp(mean);
  const double err = count > 1 ? ppl * std::sqrt(std::max(var, 0.0) / static_cast<double>(count - 1)) : 0.0;
  std::fprintf(stderr, "PPL = %.4f +/- %.5f\n", ppl, err);
  std::printf("{\"ppl\":%.6f,\"ppl_err\":%.6f,\"n_chunks\":%d,\"n_ctx\":%d,\"n_tokens\":%d,\"n_scored\":%ld}\n",
              ppl, err, n_chunks, n_ctx, n_tok, count);
  return 0;
}

std::vector<llama_token> tokenize_text(const Session& s, const std::string& text, bool bos, bool special) {
  const int32_t len = static_cast<int32_t>(text.size());
  std::vector<llama_token> ids(text.size() + 8);
  int32_t n = llama_tokenize(s.vocab, text.data(), len, ids.data(), static_cast<int32_t>(ids.size()), bos, special);
  if (n < 0 && n != INT32_MIN) {
    ids.resize(static_cast<size_t>(-n));
    n = llama_tokenize(s.vocab, text.data(), len, ids.data(), static_cast<int32_t>(ids.size()), bos, special);
  }
  if (n < 0) die("llama_tokenize failed (" + std::to_string(n) + ") on " + std::to_string(len) + " bytes");
  ids.resize(static_cast<size_t>(n));
  return ids;
}

int cmd_tokenize_lines(const Args& a) {
  if (a.pos.size() != 1) die("usage: llama-oracle tokenize-lines MODEL [--special] [--bos] < HEX_LINES");
  Session s;
  load_model(s, a.pos[0], true);
  std::string line;
  size_t line_no = 0;
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    die("stdin line " + std::to_string(line_no) + ": '" + std::string(1, c) + "' is not a hex digit");
  };
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.size() % 2) die("stdin line " + std::to_string(line_no) + ": odd number of hex digits");
    std::string text(line.size() / 2, '\0');
    for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(nibble(line[2 * i]) * 16 + nibble(line[2 * i + 1]));
    const std::vector<llama_token> ids = text.empty() ? std::vector<llama_token>() : tokenize_text(s, text, a.bos, a.special);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) out.append(i ? "," : "").append(std::to_string(ids[i]));
    std::printf("%s]\n", out.c_str());
  }
  return 0;
}

// llama.cpp's top-n-sigma and temp-ext samplers on logits given on stdin (no model needed).
int cmd_sampler_lines(const Args& a) {
  if (!a.pos.empty()) die("usage: llama-oracle sampler-lines < CASES");
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    SamplerCase c;
    if (const std::string err = parse_sampler_case(line, c); !err.empty()) die("stdin line " + std::to_string(line_no) + ": " + err);
    const std::string& kind = c.kind;
    const std::vector<float>& param = c.params;
    const std::vector<float>& logits = c.logits;
    std::vector<llama_token_data> data(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) data[i] = {static_cast<llama_token>(i), logits[i], 0.0f};
    llama_token_data_array cur{data.data(), data.size(), -1, false};
    llama_sampler* smpl = kind == "sigma" ? llama_sampler_init_top_n_sigma(param[0])
                                          : llama_sampler_init_temp_ext(param[0], param[1], param[2]);
    llama_sampler_apply(smpl, &cur);
    llama_sampler_free(smpl);
    std::string out;
    if (kind == "sigma") {
      std::vector<int> kept;
      for (size_t i = 0; i < cur.size; ++i)
        if (std::isfinite(cur.data[i].logit)) kept.push_back(cur.data[i].id);
      std::sort(kept.begin(), kept.end());
      out = "{\"kept\":[";
      for (size_t i = 0; i < kept.size(); ++i) out.append(i ? "," : "").append(std::to_string(kept[i]));
    } else {
      std::vector<float> by_id(logits.size(), -INFINITY);
      for (size_t i = 0; i < cur.size; ++i) by_id[static_cast<size_t>(cur.data[i].id)] = cur.data[i].logit;
      out = "{\"logits\":[";
      char buf[32];
      for (size_t i = 0; i < by_id.size(); ++i) {
        if (std::isfinite(by_id[i])) std::snprintf(buf, sizeof buf, "%.9g", by_id[i]);
        else std::snprintf(buf, sizeof buf, "null");
        out.append(i ? "," : "").append(buf);
      }
    }
    std::printf("%s]}\n", out.c_str());
  }
  return 0;
}

int cmd_tokenize_bench(const Args& a) {
  if (a.pos.size() != 2) die("usage: llama-oracle tokenize-bench MODEL FILE [--special] [-n REPEATS]");
  std::ifstream in(a.pos[1], std::ios::binary);
  if (!in) die("cannot open '" + a.pos[1] + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Session s;
  load_model(s, a.pos[0], true);
  const int repeats = a.n_predict > 0 ? a.n_predict : 5;
  std::string secs;
  size_t n_tokens = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    n_tokens = tokenize_text(s, text, false, a.special).size();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    secs.append(r ? "," : "").append(std::to_string(dt));
  }
  std::printf("{\"bytes\":%zu,\"n_tokens\":%zu,\"seconds\":[%s]}\n", text.size(), n_tokens, secs.c_str());
  return 0;
}

int cmd_vocab_info(const Args& a) {
  if (a.pos.size() != 1) die("usage: llama-oracle vocab-info MODEL");
  Session s;
  load_model(s, a.pos[0], true);
  std::vector<llama_token> eog;
  for (llama_token t = 0; t < s.n_vocab; ++t) {
    if (llama_vocab_is_eog(s.vocab, t)) eog.push_back(t);
  }
  std::string e = json_ids("eog", eog);  // {"eog":[...]}
  const std::vector<llama_token> fim = {llama_vocab_fim_pre(s.vocab), llama_vocab_fim_suf(s.vocab), llama_vocab_fim_mid(s.vocab),
                                        llama_vocab_fim_pad(s.vocab), llama_vocab_fim_rep(s.vocab), llama_vocab_fim_sep(s.vocab)};
  const std::string f = json_ids("fim", fim);  // {"fim":[pre,suf,mid,pad,rep,sep]}
  std::printf("{\"n_vocab\":%d,\"bos\":%d,\"eos\":%d,\"eot\":%d,\"add_bos\":%s,\"add_eos\":%s,%s,%s\n", s.n_vocab,
              llama_vocab_bos(s.vocab), llama_vocab_eos(s.vocab), llama_vocab_eot(s.vocab),
              llama_vocab_get_add_bos(s.vocab) ? "true" : "false", llama_vocab_get_add_eos(s.vocab) ? "true" : "false",
              f.substr(1, f.size() - 2).c_str(), e.substr(1).c_str());
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: llama-oracle quantize IN.gguf OUT.gguf TYPE [-t N]\n"
               "       llama-oracle logits MODEL --tokens 1,2,3 --out FILE.f32 [-t N] [-c N]\n"
               "       llama-oracle greedy MODEL --tokens 1,2,3 -n N [-t N] [-c N]\n"
               "       llama-oracle tokenize MODEL TEXT [--special] [--bos]\n"
               "       llama-oracle sampler-lines < CASES\n"
               "       llama-oracle tokenize-lines MODEL [--special] [--bos] < HEX_LINES\n"
               "       llama-oracle tokenize-bench MODEL FILE [--special] [-n REPEATS]\n"
               "       llama-oracle vocab-info MODEL\n"
               "       llama-oracle perplexity MODEL -f TEXT.txt [-c 512] [--chunks N] [-t N]\n"
               "common: -v (llama.cpp log), --bins DIR (ggml backends; env MINFER_LLAMA_BINS)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 1;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    usage();
    return 0;
  }
  const Args a = parse_args(argc, argv, 2);
  init_backends(a);
  int rc = 1;
  if (cmd == "quantize") rc = cmd_quantize(a);
  else if (cmd == "logits") rc = cmd_logits(a);
  else if (cmd == "embed") rc = cmd_embed(a);
  else if (cmd == "greedy") rc = cmd_greedy(a);
  else if (cmd == "bench") rc = cmd_bench(a);
  else if (cmd == "dump") rc = cmd_dump(a);
  else if (cmd == "tokenize") rc = cmd_tokenize(a);
  else if (cmd == "tokenize-lines") rc = cmd_tokenize_lines(a);
  else if (cmd == "tokenize-bench") rc = cmd_tokenize_bench(a);
  else if (cmd == "vocab-info") rc = cmd_vocab_info(a);
  else if (cmd == "sampler-lines") rc = cmd_sampler_lines(a);
  else if (cmd == "perplexity") rc = cmd_perplexity(a);
  else {
    usage();
    die("unknown subcommand '" + std::string(cmd) + "'");
  }
  llama_backend_free();
  return rc;
}
