// TokenStep (runtime/step.h), the step every front end runs, without a model: the logits rows
// are made by hand (one token far above the rest) over the tiny BPE vocabulary, so each case
// says which token the "model" wants and checks what the step does with it: limits, end of
// generation, stop strings, UTF-8 held until whole, the context's room, a grammar, end().
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "runtime/step.h"
#include "tiny-vocab.h"

namespace minfer {
namespace {

StepParams limits(int n_predict, std::vector<std::string> stop = {}, bool ignore_eog = false) {
  StepParams p;
  p.n_predict = n_predict;
  p.stop = std::move(stop);
  p.ignore_eog = ignore_eog;
  return p;
}

class Step : public ::testing::Test {
 protected:
  void SetUp() override {
    tok = testing::tiny_bpe_tokenizer();
    SamplerParams sp;
    sp.temp = 0.0f;  // greedy: the row's top token
    auto s = Sampler::create(sp, tok->n_vocab());
    ASSERT_TRUE(s.has_value());
    sampler = std::make_unique<Sampler>(std::move(*s));
  }
  // A logits row whose argmax is `id`; `second` (if any) comes next.
  std::vector<float> row(int32_t id, int32_t second = -1) const {
    std::vector<float> r(static_cast<size_t>(tok->n_vocab()), 0.0f);
    r[static_cast<size_t>(id)] = 10.0f;
    if (second >= 0) r[static_cast<size_t>(second)] = 5.0f;
    return r;
  }
  int32_t byte(unsigned char c) const {
    const std::vector<int32_t> ids = tok->encode(std::string(1, static_cast<char>(c)), false, false);
    EXPECT_EQ(ids.size(), 1u);
    return ids[0];
  }
  // Runs `wanted` tokens through the step (room 100 each); the results, up to the one that says done.
  std::vector<TokenStep::Result> run(TokenStep& step, const std::vector<int32_t>& wanted, int room = 100) {
    std::vector<TokenStep::Result> out;
    for (int32_t id : wanted) {
      auto r = step.next(row(id), room);
      EXPECT_TRUE(r.has_value()) << r.error().message;
      if (!r) break;
      out.push_back(*r);
      if (r->done) break;
    }
    return out;
  }
  static std::string text_of(const std::vector<TokenStep::Result>& rs) {
    std::string t;
    for (const auto& r : rs) t += r.text;
    return t;
  }
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Sampler> sampler;
};

TEST_F(Step, stops_at_n_predict_with_every_byte_shown) {
  TokenStep step(*tok, *sampler, limits(3));
  const auto rs = run(step, {byte('a'), byte('b'), byte('c'), byte('d')});
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_TRUE(rs.back().done);
  EXPECT_EQ(rs.back().reason, StopReason::kLength);
  EXPECT_EQ(text_of(rs), "abc");
  EXPECT_EQ(step.n_gen(), 3);
  EXPECT_EQ(step.tokens(), (std::vector<int32_t>{byte('a'), byte('b'), byte('c')}));
}

TEST_F(Step, end_of_generation_is_not_output_unless_ignored) {
  const int32_t eos = tok->eos_id();
  ASSERT_GE(eos, 0);
  TokenStep step(*tok, *sampler, limits(10));
  const auto rs = run(step, {byte('x'), eos, byte('y')});
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_TRUE(rs[1].done && rs[1].eog);
  EXPECT_EQ(rs[1].reason, StopReason::kEog);
  EXPECT_EQ(text_of(rs), "x");
  EXPECT_EQ(step.tokens(), std::vector<int32_t>{byte('x')});

  TokenStep keep(*tok, *sampler, limits(3, {}, true));
  const auto rk = run(keep, {byte('x'), eos, byte('y')});
  ASSERT_EQ(rk.size(), 3u);
  EXPECT_EQ(rk.back().reason, StopReason::kLength);
}

TEST_F(Step, a_stop_string_cuts_the_text_before_it_even_across_tokens) {
  TokenStep step(*tok, *sampler, limits(20, {"zz", "cd"}));
  const auto rs = run(step, {byte('a'), byte('b'), byte('c'), byte('d'), byte('e')});
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[2].text, "") << "'c' may start the stop string: held back";
  EXPECT_TRUE(rs[3].done);
  EXPECT_EQ(rs[3].reason, StopReason::kStopString);
  EXPECT_EQ(rs[3].stop_index, 1);
  EXPECT_EQ(text_of(rs), "ab");
}

TEST_F(Step, utf8_is_held_until_the_character_is_whole) {
  const std::string euro = "\xe2\x82\xac";  // U+20AC, three bytes, three byte tokens here
  TokenStep step(*tok, *sampler, limits(4));
  const auto rs = run(step, {byte(0xe2), byte(0x82), byte(0xac), byte('!')});
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[0].text, "");
  EXPECT_EQ(rs[1].text, "");
  EXPECT_EQ(rs[2].text, euro);
  EXPECT_EQ(text_of(rs), euro + "!");
}

TEST_F(Step, no_room_left_ends_with_context_full) {
  TokenStep step(*tok, *sampler, limits(10));
  auto r1 = step.next(row(byte('a')), 2);
  ASSERT_TRUE(r1 && !r1->done);
  auto r2 = step.next(row(byte('b')), 0);
  ASSERT_TRUE(r2.has_value());
  EXPECT_TRUE(r2->done);
  EXPECT_EQ(r2->reason, StopReason::kContextFull);
}

TEST_F(Step, a_grammar_takes_the_allowed_token_over_the_models_favourite) {
  auto g = parse_gbnf("root ::= \"a\"+");
  ASSERT_TRUE(g.has_value()) << g.error().message;
  StepParams p = limits(3);
  p.grammar = std::make_shared<const Grammar>(std::move(*g));
  p.grammar_tokens = grammar_tokens(*tok);
  TokenStep step(*tok, *sampler, p);
  for (int i = 0; i < 3; ++i) {
    auto r = step.next(row(byte('b'), byte('a')), 100);  // the "model" prefers b
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->token, byte('a'));
  }
  EXPECT_EQ(step.tokens(), (std::vector<int32_t>{byte('a'), byte('a'), byte('a')}));
}

TEST_F(Step, finish_gives_the_held_text_and_end_gives_nothing_more) {
  TokenStep step(*tok, *sampler, limits(10, {"cd"}));
  run(step, {byte('a'), byte('c')});  // 'c' held: it may start "cd"
  EXPECT_EQ(step.finish(), "c");
  EXPECT_TRUE(step.done());

  TokenStep cut(*tok, *sampler, limits(10));
  run(cut, {byte('a')});
  cut.end();
  EXPECT_TRUE(cut.done());
}

}  // namespace
}  // namespace minfer
