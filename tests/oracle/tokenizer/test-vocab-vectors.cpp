// llama.cpp's tokenizer test vectors (models/ggml-vocab-NAME.gguf with .inp/.out), run through
// our tokenizer with no BOS and no special-token parsing, as llama.cpp's test-tokenizer-0
// does. Every vocabulary listed in ORACLES.md must match on every input; a missing file is a
// failure, not a skip. Each input must also decode back to its exact bytes.
//
// Not listed: ggml-vocab-gemma-4 (tokenizer.ggml.model "gemma4": BPE merges over SentencePiece
// "▁" text, no byte-level map, split only at newlines), a model type the tokenizer refuses.
// Gemma 3's vocabulary (SentencePiece, from the real gemma3-270m model; llama.cpp has no
// vectors for it) is checked piece by piece here and against llama.cpp in test_tokenizer_vs_hf.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

#ifndef MINFER_LLAMA_SRC
#define MINFER_LLAMA_SRC ""
#endif
#ifndef MINFER_TEST_MODEL_DIR
#define MINFER_TEST_MODEL_DIR ""
#endif

namespace minfer {
namespace {

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Inputs are separated by "\n__ggml_vocab_test__\n" (the file ends with one); expected ids
// are one line of space-separated ids per input.
struct Vectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> expected;
};

Vectors read_vectors(const std::string& base) {
  Vectors v;
  bool ok_inp = false, ok_out = false;
  const std::string inp = read_file(base + ".inp", &ok_inp);
  const std::string out = read_file(base + ".out", &ok_out);
  EXPECT_TRUE(ok_inp) << "missing " << base << ".inp (run scripts/setup.sh)";
  EXPECT_TRUE(ok_out) << "missing " << base << ".out (run scripts/setup.sh)";
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    v.inputs.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    int32_t id;
    while (ids >> id) row.push_back(id);
    v.expected.push_back(row);
  }
  return v;
}

class TokenizerVocab : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerVocab, MatchesLlamaCpp) {
  const std::string base = std::string(MINFER_LLAMA_SRC) + "/models/ggml-vocab-" + GetParam() + ".gguf";
  auto file = GgufFile::open(base);
  ASSERT_TRUE(file) << file.error().message << " (run scripts/setup.sh)";
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok) << tok.error().message;
  const Vectors v = read_vectors(base);
  ASSERT_FALSE(v.inputs.empty());
  ASSERT_EQ(v.inputs.size(), v.expected.size()) << base;
  size_t n_ok = 0, n_round = 0;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const std::vector<int32_t> ids = tok->encode(v.inputs[i], false, false);
    if (ids == v.expected[i]) ++n_ok;
    else {
      auto join = [](const std::vector<int32_t>& xs) {
        std::string s;
        for (int32_t x : xs) s.append(" ").append(std::to_string(x));
        return s;
      };
      const std::string got = join(ids), want = join(v.expected[i]);
      ADD_FAILURE() << GetParam() << " input " << i << " '" << v.inputs[i] << "'\n  got: " << got
                    << "\n want: " << want;
    }
    DecodeOptions opt;
    opt.strip_space_prefix = true;
    if (tok->decode(ids, opt) == v.inputs[i]) ++n_round;
  }
  std::printf("[ vocab ] %-15s %zu/%zu inputs match llama.cpp, %zu/%zu decode to the input\n", GetParam(),
              n_ok, v.inputs.size(), n_round, v.inputs.size());
  EXPECT_EQ(n_ok, v.inputs.size());
}

// GPT-2's byte <-> character table, written out here independently of the library.
std::string gpt2_token_bytes(std::string_view text, bool* ok) {
  std::vector<int> cp_to_byte(512, -1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    cp_to_byte[printable ? b : next++] = b;
  }
  std::string out;
  *ok = true;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = text[i];
    int cp = c, len = 1;
    if (c >= 0xC0 && c < 0xE0 && i + 1 < text.size()) {
      cp = ((c & 0x1F) << 6) | (text[i + 1] & 0x3F);
      len = 2;
    }
    if (cp >= 512 || cp_to_byte[cp] < 0 || c >= 0xE0) {
      *ok = false;
      return {};
    }
    out.push_back(static_cast<char>(cp_to_byte[cp]));
    i += len;
  }
  return out;
}

// A SentencePiece token's bytes, written out here independently: U+2581 is a space, <0xNN>
// is byte NN. (Control and user-defined tokens are their text, as for BPE.)
std::string spm_token_bytes(std::string_view text, TokenType type) {
  auto hex = [](char c) { return c <= '9' ? c - '0' : c - 'A' + 10; };
  if (type == TokenType::kByte) return std::string(1, static_cast<char>(hex(text[3]) * 16 + hex(text[4])));
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 3) == "\xE2\x96\x81") {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Every token decodes to the bytes its text stands for (including the partial UTF-8 sequences
// the Python tests cannot carry): byte-level BPE's normal tokens, and all normal and byte tokens
// of a SentencePiece vocabulary; the streaming decoder fed every id in turn produces exactly
// decode() of the whole sequence.
void check_every_token_decodes(const std::string& path, const char* name) {
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file) << file.error().message << " (run scripts/setup.sh)";
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok) << tok.error().message;
  std::vector<int32_t> all;
  size_t n_checked = 0, n_raw = 0;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    all.push_back(id);
    const TokenType type = tok->token_type(id);
    if (tok->model() == "llama" && (type == TokenType::kNormal || type == TokenType::kByte)) {
      ASSERT_EQ(tok->piece(id), spm_token_bytes(tok->token_text(id), type)) << "token " << id;
      ++n_checked;
      continue;
    }
    if (tok->model() != "gpt2" || type != TokenType::kNormal) continue;
    bool ok = false;
    const std::string want = gpt2_token_bytes(tok->token_text(id), &ok);
    // A "normal" token whose text is not byte-level (Command-R has 1403, e.g. emoji) decodes
    // to its text as it is; llama.cpp prints "[UNK_BYTE_0x...]" for those.
    ASSERT_EQ(tok->piece(id), ok ? want : std::string(tok->token_text(id))) << "token " << id;
    ++(ok ? n_checked : n_raw);
  }
  StreamDecoder dec(*tok);
  std::string streamed;
  size_t max_held = 0;
  for (int32_t id : all) {
    streamed += dec.push(id);
    max_held = std::max(max_held, dec.pending());
  }
  streamed += dec.flush();
  EXPECT_EQ(streamed, tok->decode(all));
  EXPECT_LE(max_held, 3u);
  std::printf("[ pieces ] %-15s %zu %s tokens decode to their bytes (%zu raw-text ones); %d ids streamed\n",
              name, n_checked, tok->model() == "llama" ? "normal and byte" : "normal byte-level", n_raw,
              tok->n_vocab());
}

TEST_P(TokenizerVocab, EveryTokenDecodes) {
  check_every_token_decodes(std::string(MINFER_LLAMA_SRC) + "/models/ggml-vocab-" + GetParam() + ".gguf", GetParam());
}

// Gemma 3's 262144 pieces: "▁" runs, 256 byte tokens (0x80..0xFF: partial UTF-8), 6249 control
// and 165 user-defined tokens; the real model file that scripts/setup.sh installs.
TEST(OracleGemma3, EveryTokenDecodes) {
  check_every_token_decodes(std::string(MINFER_TEST_MODEL_DIR) + "/gemma3-270m-Q4_K_M.gguf", "gemma3");
}

INSTANTIATE_TEST_SUITE_P(Oracle, TokenizerVocab,
                         ::testing::Values("qwen2", "qwen35", "llama-bpe", "gpt-2", "starcoder", "deepseek-llm",
                                           "deepseek-coder", "falcon", "mpt", "refact", "command-r", "llama-spm",
                                           "phi-3"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string s = p.param;
                           for (char& c : s) if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace minfer
