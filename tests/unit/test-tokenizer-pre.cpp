// Pre-tokenizer splits on hand-checked cases (each follows from the rule's regex), the
// UTF-8 helpers, and the two BPE merge loops (array scan, heap) agreeing on random words.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tiny-vocab.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre-tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

std::vector<std::string> split(const char* pre, const std::string& text) {
  auto p = PreTokenizer::from_name(pre);
  EXPECT_TRUE(p) << pre;
  PreTokenizeScratch s;
  std::vector<uint32_t> ends;
  p->split(text, s, ends);
  std::vector<std::string> words;
  size_t start = 0;
  for (uint32_t e : ends) {
    words.push_back(text.substr(start, e - start));
    start = e;
  }
  EXPECT_EQ(start, text.size());
  return words;
}

using W = std::vector<std::string>;

TEST(TokenizerPre, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world"), (W{"Hello", " world"}));
  EXPECT_EQ(split("gpt-2", "   x"), (W{"  ", " x"}));           // \s+(?!\S) leaves one space
  EXPECT_EQ(split("gpt-2", "a   "), (W{"a", "   "}));           // trailing run stays whole
  EXPECT_EQ(split("gpt-2", "it's DON'T"), (W{"it", "'s", " DON", "'", "T"}));  // case-sensitive
  EXPECT_EQ(split("gpt-2", "x 123 ?!?"), (W{"x", " 123", " ?!?"}));
  EXPECT_EQ(split("gpt-2", "a\n\nb"), (W{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("gpt-2", "\xC2\xA0x"), (W{"\xC2\xA0", "x"}));  // only ' ' joins a word
}

TEST(TokenizerPre, Llama3AndQwen2) {
  EXPECT_EQ(split("llama-bpe", "12345 abc"), (W{"123", "45", " abc"}));
  EXPECT_EQ(split("qwen2", "12345"), (W{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("qwen2", "it's DON'T"), (W{"it", "'s", " DON", "'T"}));  // (?i:...)
  EXPECT_EQ(split("qwen2", "(hello"), (W{"(hello"}));              // one prefix character
  EXPECT_EQ(split("qwen2", "((hello"), (W{"((", "hello"}));
  EXPECT_EQ(split("qwen2", "a  b"), (W{"a", " ", " b"}));
  EXPECT_EQ(split("qwen2", "a \n \n  b"), (W{"a", " \n \n", " ", " b"}));  // \s*[\r\n]+
  EXPECT_EQ(split("qwen2", "x;\n\ny"), (W{"x", ";\n\n", "y"}));     // symbols take newlines
  EXPECT_EQ(split("qwen2", "  1"), (W{" ", " ", "1"}));
  EXPECT_EQ(split("qwen2", "\t x"), (W{"\t", " x"}));
}

TEST(TokenizerPre, Qwen35MarksJoinLetters) {
  const std::string e_acute = "e\xCC\x81";  // e + U+0301
  EXPECT_EQ(split("qwen2", e_acute + "x"), (W{"e", "\xCC\x81x"}));
  EXPECT_EQ(split("qwen35", e_acute + "x"), (W{e_acute + "x"}));
}

TEST(TokenizerPre, MultiRule) {
  EXPECT_EQ(split("starcoder", "ab12 x"), (W{"ab", "1", "2", " x"}));
  EXPECT_EQ(split("falcon", "1234567 a+=b"), (W{"123", "456", "7", " a", "+=", "b"}));
  EXPECT_EQ(split("deepseek-coder", "ab 12\n"), (W{"ab", " ", "1", "2", "\n"}));
  EXPECT_EQ(split("deepseek-llm", "Hello, \xE4\xB8\xAD\xE6\x96\x87 42  "),
            (W{"Hello", ",", " ", "\xE4\xB8\xAD\xE6\x96\x87", " ", "42", "  "}));
}

TEST(TokenizerPre, UnknownNameIsAnError) {
  auto p = PreTokenizer::from_name("nope");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("'nope'"), std::string::npos);
  EXPECT_NE(p.error().message.find("qwen2"), std::string::npos);  // lists what is supported
}

TEST(TokenizerPre, InvalidUtf8IsKeptByteForByte) {
  for (const char* pre : {"gpt-2", "qwen2", "llama-bpe", "deepseek-llm"}) {
    const std::string s = "a\xFF\xC3 b\xE4\xB8";
    std::string joined;
    for (const std::string& w : split(pre, s)) joined += w;
    EXPECT_EQ(joined, s) << pre;
  }
}

TEST(TokenizerUnicode, ClassesAndDecoding) {
  EXPECT_TRUE(unicode_is_letter(unicode_class('a')));
  EXPECT_TRUE(unicode_is_number(unicode_class(0x0663)));     // Arabic-Indic three
  EXPECT_TRUE(unicode_is_ws(unicode_class(0x3000)));
  EXPECT_TRUE(unicode_is_ws(unicode_class(0x85)));
  EXPECT_FALSE(unicode_is_ws(unicode_class(0x200B)));        // zero width space is Cf
  EXPECT_TRUE(unicode_is_letter(unicode_class(0x2EBF0)));    // CJK Ext. I (Unicode 15.1)
  EXPECT_TRUE(unicode_is_mark(unicode_class(0x0301)));
  EXPECT_TRUE(unicode_is_punct(unicode_class(0x3002)));
  size_t len;
  EXPECT_EQ(utf8_decode("\xF0\x9F\x98\x80", 4, &len), 0x1F600u);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(utf8_decode("\xE4\xB8", 2, &len), kUtf8Invalid);  // truncated
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(utf8_decode("\xF4\x90\x80\x80", 4, &len), kUtf8Invalid);  // past U+10FFFF
  EXPECT_EQ(utf8_incomplete_tail("ab\xE4\xB8", 4), 2u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xE4\xB8\xAD", 5), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0", 1), 1u);
  EXPECT_EQ(utf8_incomplete_tail("\x80\x80", 2), 0u);
  for (uint32_t cp : {0x41u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    char buf[4];
    const size_t n = utf8_encode(cp, buf);
    EXPECT_EQ(utf8_decode(buf, n, &len), cp);
    EXPECT_EQ(len, n);
  }
}

TEST(TokenizerBpe, ScanAndHeapMergeLoopsAgree) {
  const auto md = testing::tiny_bpe_metadata("gpt-2");
  MetadataIndex idx(md);
  auto vocab = Vocab::load(idx);
  ASSERT_TRUE(vocab);
  auto merges = load_merges(idx);
  ASSERT_TRUE(merges);
  auto bpe = BpeModel::build(*vocab, *merges);
  ASSERT_TRUE(bpe);
  std::mt19937 rng(11);
  const std::string alphabet = "thelowrdingé中文12 '\n";
  BpeScratch s;
  for (int i = 0; i < 2000; ++i) {
    std::string w;
    for (int k = 1 + rng() % 80; k > 0; --k) w.push_back(alphabet[rng() % alphabet.size()]);
    std::vector<int32_t> a, b;
    bpe->encode_word(w, false, s, a, /*heap_from=*/1u << 30);
    bpe->encode_word(w, false, s, b, /*heap_from=*/2);
    ASSERT_EQ(a, b) << w;
  }
}

}  // namespace
}  // namespace minfer
