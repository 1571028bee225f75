// llama.cpp's sampler lists (sampling/order.h) on minfer's fixed chain: a list in the chain's
// order turns the stages it leaves out off; anything else is refused with a message naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sampling/order.h"

namespace minfer {
namespace {

SamplerParams busy() {  // every stage on
  SamplerParams p;
  p.repeat_penalty = 1.1f, p.frequency_penalty = 0.2f, p.presence_penalty = 0.3f;
  p.dry_multiplier = 0.8f;
  p.top_n_sigma = 2.0f;
  p.top_k = 40, p.typical_p = 0.9f, p.top_p = 0.95f, p.min_p = 0.05f;
  p.xtc_probability = 0.5f;
  p.temp = 0.7f, p.dynatemp_range = 0.2f;
  return p;
}

TEST(sampling, sampler_list_turns_the_stages_it_leaves_out_off) {
  SamplerParams p = busy();
  ASSERT_TRUE(apply_sampler_names(p, {"top_k", "min_p", "temperature"}));
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.temp, 0.7f);
  EXPECT_EQ(p.dynatemp_range, 0.2f);
  EXPECT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.dry_multiplier, 0.0f);
  EXPECT_EQ(p.top_n_sigma, -1.0f);
  EXPECT_EQ(p.typical_p, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.xtc_probability, 0.0f);
  // The same as chars, and llama.cpp's other spellings.
  SamplerParams q = busy();
  ASSERT_TRUE(apply_sampler_chars(q, "kmt"));
  SamplerParams r = busy();
  ASSERT_TRUE(apply_sampler_names(r, {"top-k", "min-p", "temp"}));
  for (const SamplerParams* x : {&q, &r}) {
    EXPECT_EQ(x->top_k, 40);
    EXPECT_EQ(x->top_p, 1.0f);
    EXPECT_EQ(x->repeat_penalty, 1.0f);
  }
  // The full default order changes nothing.
  SamplerParams all = busy();
  ASSERT_TRUE(apply_sampler_chars(all, "edskypmxt"));
  EXPECT_EQ(all.top_p, 0.95f);
  EXPECT_EQ(all.dry_multiplier, 0.8f);
  EXPECT_EQ(all.repeat_penalty, 1.1f);
}

TEST(sampling, sampler_list_without_temperature_draws_at_one) {
  SamplerParams p = busy();
  ASSERT_TRUE(apply_sampler_names(p, {"top_k"}));
  EXPECT_EQ(p.temp, 1.0f);
  EXPECT_EQ(p.dynatemp_range, 0.0f);
  SamplerParams g = busy();
  g.temp = 0.0f;  // greedy stays greedy
  ASSERT_TRUE(apply_sampler_chars(g, ""));
  EXPECT_EQ(g.temp, 0.0f);
  EXPECT_EQ(g.top_k, 0);
}

TEST(sampling, sampler_list_out_of_order_or_unknown_is_refused) {
  struct Case {
    std::vector<std::string> names;
    std::string chars, expect;
  };
  const Case cases[] = {
      {{"temperature", "top_k"}, "", "'top_k' after 'temperature': minfer's sampler order is fixed"},
      {{"top_k", "top_k"}, "", "'top_k' after 'top_k'"},
      {{"top_k", "bogus"}, "", "'bogus' is not a sampler (known: penalties, dry, top_n_sigma"},
      {{"infill"}, "", "the infill sampler is not supported"},
      {{}, "tk", "'k' after 't'"},
      {{}, "kz", "'z' is not a sampler char"},
      {{}, "ki", "infill sampler ('i')"},
  };
  for (const Case& c : cases) {
    SamplerParams p = busy();
    const Status st = c.chars.empty() ? apply_sampler_names(p, c.names) : apply_sampler_chars(p, c.chars);
    ASSERT_FALSE(st) << c.expect;
    EXPECT_NE(st.error().message.find(c.expect), std::string::npos) << st.error().message;
  }
}

}  // namespace
}  // namespace minfer
