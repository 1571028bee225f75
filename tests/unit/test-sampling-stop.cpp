// Stop strings (sampling/stop.h): holdback of partial matches and of incomplete UTF-8 across
// chunk boundaries, earliest/longest selection, and a randomized check against a simple
// oracle (search the whole output so far after every chunk).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sampling/rng.h"
#include "sampling/stop.h"

namespace minfer {
namespace {

// Feeds the chunks; returns everything emitted (plus finish() if no stop) and the stop index.
struct Streamed {
  std::vector<std::string> emitted;  // per feed
  std::string text;
  int stop_index = -1;
};
Streamed feed_all(const std::vector<std::string>& stops, const std::vector<std::string>& chunks) {
  StopScanner sc(stops);
  Streamed r;
  for (const std::string& c : chunks) {
    StopScanner::Step st = sc.feed(c);
    r.emitted.push_back(st.text);
    r.text += st.text;
    if (st.stopped) {
      r.stop_index = st.stop_index;
      return r;
    }
  }
  r.text += sc.finish();
  return r;
}

TEST(sampling, utf8_incomplete_tail) {
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xC3"), 1u);              // é = C3 A9, first byte only
  EXPECT_EQ(utf8_incomplete_tail("a\xC3\xA9"), 0u);          // complete
  EXPECT_EQ(utf8_incomplete_tail("\xE2\x82"), 2u);           // € = E2 82 AC
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x98"), 3u);       // 😀 = F0 9F 98 80
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\x80"), 0u);              // stray continuation: emit as is
  EXPECT_EQ(utf8_incomplete_tail("a\xFF"), 0u);              // invalid lead never completes
}

TEST(sampling, scan_stops_holds_partial_match) {
  const std::vector<std::string> stops = {"world"};
  StopScan s = scan_stops("hello wor", stops);  // "wor" may become "world"
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.n_safe, 6u);
  s = scan_stops("world!", stops);
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.n_safe, 0u);
}

TEST(sampling, stop_split_across_chunks) {
  // "\nUser:" arrives over three chunks; "Hel" and "lo" are shown as soon as they are safe.
  const Streamed r = feed_all({"\nUser:"}, {"Hel", "lo\nUs", "er: x", "more"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"Hel", "lo", ""}));
  EXPECT_EQ(r.text, "Hello");
  EXPECT_EQ(r.stop_index, 0);
}

TEST(sampling, stop_one_byte_at_a_time) {
  const Streamed r = feed_all({"</s>"}, {"o", "k", "<", "/", "s", ">", "tail"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"o", "k", "", "", "", ""}));
  EXPECT_EQ(r.text, "ok");
}

TEST(sampling, false_start_is_released) {
  const Streamed r = feed_all({"abc"}, {"xab", "x"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"x", "abx"}));
  EXPECT_EQ(r.stop_index, -1);
  // Held bytes come out at the end of generation.
  EXPECT_EQ(feed_all({"abc"}, {"zab"}).text, "zab");
}

TEST(sampling, self_overlapping_stop) {
  // "aab": after "aaa" the longest tail that starts the stop is "aa"; the first 'a' is safe.
  const Streamed r = feed_all({"aab"}, {"aaa", "b"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(r.text, "a");
}

TEST(sampling, earliest_start_then_longest_wins) {
  // In "xabcd", "ab" and "abc" start at 1 (longest: "abc", index 1); "bc" starts later.
  const Streamed r = feed_all({"ab", "abc", "bc"}, {"xabcd"});
  EXPECT_EQ(r.text, "x");
  EXPECT_EQ(r.stop_index, 1);
  // Order in the list does not matter.
  EXPECT_EQ(feed_all({"bc", "ab"}, {"xabc"}).stop_index, 1);
}

TEST(sampling, empty_stop_strings_are_ignored) {
  const Streamed r = feed_all({"", "zz"}, {"ab", "cz", "q"});
  EXPECT_EQ(r.text, "abczq");
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"ab", "c", "zq"}));
}

TEST(sampling, nothing_after_stop) {
  StopScanner sc({"!"});
  EXPECT_TRUE(sc.feed("hi!").stopped);
  EXPECT_TRUE(sc.stopped());
  EXPECT_EQ(sc.feed("more").text, "");
  EXPECT_EQ(sc.finish(), "");
}

TEST(sampling, utf8_character_split_across_tokens) {
  // "€" = E2 82 AC arrives as E2 82 | AC: nothing of it is shown until it is complete.
  const Streamed r = feed_all({"zzz"}, {"a\xE2\x82", "\xAC b"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"a", "\xE2\x82\xAC b"}));
  // 😀 = F0 9F 98 80 one byte per token.
  const Streamed e = feed_all({}, {"\xF0", "\x9F", "\x98", "\x80", "!"});
  EXPECT_EQ(e.emitted, (std::vector<std::string>{"", "", "", "\xF0\x9F\x98\x80", "!"}));
}

TEST(sampling, multibyte_stop_split_inside_a_character) {
  // Stop "é!" = C3 A9 21; the token boundary falls inside é.
  const Streamed r = feed_all({"\xC3\xA9!"}, {"caf\xC3", "\xA9!", "x"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"caf", ""}));
  EXPECT_EQ(r.text, "caf");
  // Same prefix without the "!": é is released once the next byte rules the stop out.
  const Streamed n = feed_all({"\xC3\xA9!"}, {"caf\xC3", "\xA9", "s"});
  EXPECT_EQ(n.emitted, (std::vector<std::string>{"caf", "", "\xC3\xA9s"}));
}

// Oracle: after each chunk, search the whole output so far; the first chunk that completes a
// stop ends the run at the earliest match start in the text seen so far.
std::string oracle(const std::vector<std::string>& stops, const std::vector<std::string>& chunks) {
  std::string seen;
  for (const std::string& c : chunks) {
    seen += c;
    size_t cut = std::string::npos;
    for (const std::string& s : stops) {
      if (!s.empty()) cut = std::min(cut, seen.find(s));
    }
    if (cut != std::string::npos) return seen.substr(0, cut);
  }
  return seen;
}

TEST(sampling, stop_scanner_matches_oracle_on_random_streams) {
  const char* alphabet[] = {"a", "b", "\n", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  const std::vector<std::string> stops = {"ab\n", "\xC3\xA9\xC3\xA9", "b\xE2\x82\xAC" "a",
                                          "\n\n\n", ""};
  Rng rng(99);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int n_chars = 1 + static_cast<int>(rng.next_u64() % 24);
    for (int i = 0; i < n_chars; ++i) text += alphabet[rng.next_u64() % 6];
    std::vector<std::string> chunks;  // cut at arbitrary bytes, not only character boundaries
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = 1 + rng.next_u64() % 5;
      chunks.push_back(text.substr(pos, len));
      pos += len;
    }
    const Streamed r = feed_all(stops, chunks);
    ASSERT_EQ(r.text, oracle(stops, chunks)) << "iteration " << iter;
    // Every emission is whole characters (the text is valid UTF-8).
    for (const std::string& e : r.emitted) ASSERT_EQ(utf8_incomplete_tail(e), 0u) << iter;
  }
}

}  // namespace
}  // namespace minfer
