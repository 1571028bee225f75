// libFuzzer target for the tokenizer. The first input byte selects a mode:
//   0x00-0xFE: encode the rest with one of the small in-memory vocabularies (byte-level BPE
//              with each pre-tokenizer family, and SentencePiece); bit 0x80 turns special
//              parsing on. Every id must be in range, a BPE encoding must decode to the exact
//              input bytes, and the streaming decoder must reproduce decode(). The rest is also
//              read as little-endian ids (some out of range) and decoded.
//   0xFF:      the rest is a GGUF image; its metadata must load as a tokenizer or fail cleanly,
//              and a loaded one must encode and decode a fixed text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "../unit/tiny-vocab.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Entry {
  minfer::Tokenizer tok;
  bool bpe;
};

const std::vector<Entry>& tokenizers() {
  static const std::vector<Entry> v = [] {
    std::vector<Entry> out;
    for (const char* pre : {"gpt-2", "qwen2", "qwen35", "llama-bpe", "starcoder", "falcon", "deepseek-llm",
                            "deepseek-coder", "default"}) {
      auto t = minfer::Tokenizer::from_metadata(minfer::testing::tiny_bpe_metadata(pre));
      if (!t) std::abort();
      out.push_back({std::move(*t), true});
    }
    auto spm = minfer::Tokenizer::from_metadata(minfer::testing::tiny_spm_metadata());
    if (!spm) std::abort();
    out.push_back({std::move(*spm), false});
    return out;
  }();
  return v;
}

void check_stream(const minfer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  minfer::StreamDecoder dec(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += dec.push(id);
  streamed += dec.flush();
  if (streamed != tok.decode(ids)) std::abort();
}

void fuzz_gguf(const uint8_t* data, size_t size) {
  auto img = minfer::gguf_parse(data, size, "fuzz");
  if (!img) return;
  auto tok = minfer::Tokenizer::from_metadata(img->metadata);
  if (!tok) return;
  const std::string text = "Hello world <|im_start|> 123\n\n  \xC3\xA9\xE4\xB8\xAD \xF0\x9F\x98\x80";
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok->encode(text, true, special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok->n_vocab()) std::abort();
    }
    check_stream(*tok, ids);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] == 0xFF) {
    fuzz_gguf(data + 1, size - 1);
    return 0;
  }
  const auto& all = tokenizers();
  const Entry& e = all[(data[0] & 0x7F) % all.size()];
  const bool special = data[0] & 0x80;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ids = e.tok.encode(text, false, special);
  for (int32_t id : ids) {
    if (id < 0 || id >= e.tok.n_vocab()) std::abort();
  }
  if (e.bpe && e.tok.decode(ids) != text) std::abort();  // byte-level BPE is lossless
  check_stream(e.tok, ids);

  std::vector<int32_t> raw;
  for (size_t i = 1; i + 1 < size; i += 2) {
    raw.push_back(static_cast<int32_t>((data[i] | (data[i + 1] << 8)) % (e.tok.n_vocab() + 8)) - 4);
  }
  check_stream(e.tok, raw);
  return 0;
}
