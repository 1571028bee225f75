// Tokenizer units on small in-memory vocabularies: byte-exact round trips, special-token
// splitting, BOS, end-of-generation set, the streaming decoder, SentencePiece byte fallback,
// and the errors for unsupported or malformed metadata.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tiny-vocab.h"
#include "tokenizer/tokenizer.h"

namespace minfer {
namespace {

using testing::tiny_bpe_metadata;
using testing::tiny_spm_metadata;

Tokenizer load(const std::vector<GgufKV>& md) {
  auto t = Tokenizer::from_metadata(md);
  EXPECT_TRUE(t) << (t ? "" : t.error().message);
  return std::move(*t);
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  // Mostly text-like bytes, with UTF-8 lead/continuation bytes and specials' characters.
  static const std::string alphabet = "the hello world\n\t  123<|>uv'sx\xC3\xA9\xE4\xB8\xAD\x80\xFF\xF0";
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
  return s;
}

TEST(Tokenizer, BpeRoundTripsArbitraryBytes) {
  for (const char* pre : {"gpt-2", "qwen2", "qwen35", "llama-bpe", "starcoder", "falcon", "deepseek-llm",
                          "deepseek-coder", "default"}) {
    const Tokenizer tok = load(tiny_bpe_metadata(pre));
    std::mt19937 rng(7);
    for (int i = 0; i < 300; ++i) {
      const std::string s = random_bytes(rng, rng() % 40);
      for (bool special : {false, true}) {
        const std::vector<int32_t> ids = tok.encode(s, false, special);
        ASSERT_EQ(tok.decode(ids), s) << pre << " special=" << special;
      }
    }
  }
}

TEST(Tokenizer, MergesAndWords) {
  const Tokenizer tok = load(tiny_bpe_metadata("gpt-2"));
  const std::vector<int32_t> ids = tok.encode("hello the world", false, false);
  // " the" has the merges of "Ġthe" but "t h" and "th e" rank first (they were learned for
  // "the"), so BPE reaches "Ġ" + "the", not "Ġthe": lowest rank wins, not longest token.
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(tok.token_text(ids[0]), "hello");
  EXPECT_EQ(tok.token_text(ids[1]), "\xC4\xA0");  // Ġ
  EXPECT_EQ(tok.token_text(ids[2]), "the");
  EXPECT_EQ(tok.piece(ids[3]), " world");
  // "  " is a word of its own (\s+(?!\S) keeps one space for "the") and a merged token.
  const std::vector<int32_t> sp = tok.encode("   the", false, false);
  ASSERT_EQ(sp.size(), 3u);
  EXPECT_EQ(tok.piece(sp[0]), "  ");
}

TEST(Tokenizer, SpecialTokensLeftmostLongest) {
  const Tokenizer tok = load(tiny_bpe_metadata("gpt-2"));
  const int32_t im_start = tok.find_token("<|im_start|>"), im_end = tok.find_token("<|im_end|>");
  const int32_t u = tok.find_token("<u>"), uv = tok.find_token("<u><v>"), vx = tok.find_token("<v>x");
  ASSERT_GE(im_start, 0);
  std::vector<int32_t> ids = tok.encode("<|im_start|>hello<|im_end|>", false, true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], im_start);
  EXPECT_EQ(tok.token_text(ids[1]), "hello");
  EXPECT_EQ(ids[2], im_end);
  // Without special parsing control text is plain text...
  ids = tok.encode("<|im_start|>", false, false);
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(tok.decode(ids), "<|im_start|>");
  // ...but user-defined tokens are still recognised (llama.cpp, Hugging Face).
  EXPECT_EQ(tok.encode("<u>", false, false), std::vector<int32_t>{u});
  // The longest token at the leftmost position wins: "<u><v>" over "<u>", then "x".
  ids = tok.encode("<u><v>x", false, true);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], uv);
  EXPECT_EQ(tok.decode(ids), "<u><v>x");
  // Leftmost first: "<u>" starts before "<v>x" in "<u><v>x" only when "<u><v>" is not there.
  ids = tok.encode("a<v>x<u>", false, true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], vx);
  EXPECT_EQ(ids[2], u);
  // Partial special text stays text.
  EXPECT_EQ(tok.decode(tok.encode("<|im_sta", false, true)), "<|im_sta");
}

TEST(Tokenizer, BosAndEog) {
  const Tokenizer tok = load(tiny_bpe_metadata("qwen2"));
  const int32_t bos = tok.bos_id();
  ASSERT_GE(bos, 0);
  EXPECT_FALSE(tok.add_bos());  // qwen2 default, no add_bos_token key
  EXPECT_EQ(tok.encode("the", true, true).front(), bos);
  EXPECT_EQ(tok.encode("", true, true), std::vector<int32_t>{bos});
  EXPECT_TRUE(tok.encode("", false, true).empty());
  // eos (<|endoftext|>) and <|im_end|> end generation; <|im_start|> does not.
  EXPECT_TRUE(tok.is_eog(tok.eos_id()));
  EXPECT_TRUE(tok.is_eog(tok.find_token("<|im_end|>")));
  EXPECT_FALSE(tok.is_eog(tok.find_token("<|im_start|>")));
  EXPECT_EQ(tok.eog_ids().size(), 2u);
  // llama-bpe adds BOS by default.
  EXPECT_TRUE(load(tiny_bpe_metadata("llama-bpe")).add_bos());
}

TEST(Tokenizer, DecodeSpecialRendering) {
  const Tokenizer tok = load(tiny_bpe_metadata("gpt-2"));
  const std::vector<int32_t> ids = tok.encode("<|im_start|>the<u>", false, true);
  EXPECT_EQ(tok.decode(ids), "<|im_start|>the<u>");
  DecodeOptions opt;
  opt.render_special = false;
  EXPECT_EQ(tok.decode(ids, opt), "the<u>");  // user-defined tokens are text
  EXPECT_EQ(tok.decode(std::vector<int32_t>{-1, 1 << 30}), "");
}

TEST(TokenizerStream, NeverSplitsACharacter) {
  const Tokenizer tok = load(tiny_bpe_metadata("gpt-2"));
  // "é" + "中" + "😀" as single-byte tokens: every push returns whole characters only.
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80z";
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(tok.find_token(testing::byte_level_text(std::string(1, c))));
  StreamDecoder dec(tok);
  std::string out;
  const std::vector<size_t> expect_len = {1, 0, 2, 0, 0, 3, 0, 0, 0, 4, 1};
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string got = dec.push(ids[i]);
    EXPECT_EQ(got.size(), expect_len[i]) << "after byte " << i;
    out += got;
  }
  EXPECT_EQ(dec.pending(), 0u);
  EXPECT_EQ(out + dec.flush(), text);
}

TEST(TokenizerStream, InvalidBytesPassThroughAndFlush) {
  const Tokenizer tok = load(tiny_bpe_metadata("gpt-2"));
  auto byte_id = [&](unsigned char c) { return tok.find_token(testing::byte_level_text(std::string(1, char(c)))); };
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(byte_id(0xE4)), "");             // lead byte of a 3-byte character: held
  EXPECT_EQ(dec.push(byte_id('x')), "\xE4x");         // can never complete: passed through
  EXPECT_EQ(dec.push(byte_id(0x80)), "\x80");         // stray continuation byte
  EXPECT_EQ(dec.push(byte_id(0xF0)), "");
  EXPECT_EQ(dec.push(byte_id(0x9F)), "");
  EXPECT_EQ(dec.flush(), "\xF0\x9F");                 // end of generation: whatever is held
  EXPECT_EQ(dec.pending(), 0u);
}

TEST(TokenizerStream, MatchesDecodeOnRandomStreams) {
  const Tokenizer tok = load(tiny_bpe_metadata("qwen2"));
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> ids;
    for (int k = rng() % 30; k > 0; --k) ids.push_back(static_cast<int32_t>(rng() % tok.n_vocab()));
    StreamDecoder dec(tok);
    std::string out;
    for (int32_t id : ids) {
      const std::string part = dec.push(id);
      out += part;
    }
    EXPECT_EQ(out + dec.flush(), tok.decode(ids));
  }
}

TEST(TokenizerSpm, ScoresByteFallbackAndSpacePrefix) {
  const Tokenizer tok = load(tiny_spm_metadata());
  EXPECT_TRUE(tok.add_bos());
  EXPECT_TRUE(tok.add_space_prefix());
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  std::vector<int32_t> ids = tok.encode("hello the", false, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok.token_text(ids[0]), "\xE2\x96\x81hello");
  EXPECT_EQ(tok.token_text(ids[1]), "\xE2\x96\x81the");
  // "é" has no piece: its two bytes become <0xC3> <0xA9>.
  ids = tok.encode("\xC3\xA9", false, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(tok.token_text(ids[1]), "<0xC3>");
  EXPECT_EQ(tok.token_text(ids[2]), "<0xA9>");
  DecodeOptions opt;
  opt.strip_space_prefix = true;
  EXPECT_EQ(tok.decode(ids, opt), "\xC3\xA9");
  EXPECT_EQ(tok.decode(tok.encode("hello the", true, false), opt), "<s>hello the");
  // Control text is parsed with parse_special; the unknown token's too.
  ids = tok.encode("<s>hello", false, true);
  ASSERT_GE(ids.size(), 1u);
  EXPECT_EQ(ids[0], 1);
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    const std::string s = random_bytes(rng, rng() % 30);
    for (int32_t id : tok.encode(s, true, true)) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
  }
}

std::vector<GgufKV> with(std::vector<GgufKV> md, const std::string& key, GgufValue v);

TEST(TokenizerSpm, Phi3SpecialTokensSwallowFollowingWhitespace) {
  // Phi-3's added tokens are rstrip in its tokenizer.json; recognised by the model name.
  const Tokenizer plain = load(tiny_spm_metadata());
  const Tokenizer phi = load(with(tiny_spm_metadata(), "general.name", GgufValue::make_string("Phi-3 mini")));
  const std::vector<int32_t> a = plain.encode("the</s> \n the", false, true);
  const std::vector<int32_t> b = phi.encode("the</s> \n the", false, true);
  EXPECT_LT(b.size(), a.size());
  EXPECT_EQ(phi.decode(b), " the</s> the");  // " " before "the": the prefix after a special
  EXPECT_EQ(phi.encode("<s> the", false, true), plain.encode("<s> the", false, true));  // <s> keeps it
}

// Replaces (or adds) one metadata key.
std::vector<GgufKV> with(std::vector<GgufKV> md, const std::string& key, GgufValue v) {
  for (GgufKV& kv : md) {
    if (kv.key == key) {
      kv.value = std::move(v);
      return md;
    }
  }
  md.push_back({key, std::move(v)});
  return md;
}

std::vector<GgufKV> without(std::vector<GgufKV> md, const std::string& key) {
  std::erase_if(md, [&](const GgufKV& kv) { return kv.key == key; });
  return md;
}

void expect_error(const std::vector<GgufKV>& md, const std::string& needle) {
  auto t = Tokenizer::from_metadata(md);
  ASSERT_FALSE(t) << "expected an error mentioning " << needle;
  EXPECT_NE(t.error().message.find(needle), std::string::npos) << t.error().message;
}

TEST(Tokenizer, RefusesWhatItCannotTokenize) {
  const auto md = tiny_bpe_metadata("gpt-2");
  expect_error(with(md, "tokenizer.ggml.pre", GgufValue::make_string("klingon-v9")), "'klingon-v9'");
  expect_error(with(md, "tokenizer.ggml.model", GgufValue::make_string("bert")), "'bert'");
  expect_error(without(md, "tokenizer.ggml.pre"), "tokenizer.ggml.pre is missing");
  expect_error(without(md, "tokenizer.ggml.merges"), "tokenizer.ggml.merges is missing");
  expect_error(without(md, "tokenizer.ggml.tokens"), "tokenizer.ggml.tokens is missing");
  expect_error(without(md, "tokenizer.ggml.model"), "tokenizer.ggml.model is missing");
  expect_error(with(md, "tokenizer.ggml.tokens", GgufValue::make_string("x")), "expected an array");
  expect_error(with(md, "tokenizer.ggml.token_type", testing::i32_array({1, 1})), "has 2 entries");
  expect_error(with(md, "tokenizer.ggml.merges", testing::i32_array({1})), "expected strings");
  expect_error(with(md, "tokenizer.ggml.add_bos_token", GgufValue::make_string("yes")), "expected a bool");
  // An out-of-range special id is ignored, as llama.cpp does.
  auto t = Tokenizer::from_metadata(with(md, "tokenizer.ggml.bos_token_id", GgufValue(GgufValue::Storage(uint32_t(1u << 30)))));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bos_id(), -1);
}

}  // namespace
}  // namespace minfer
