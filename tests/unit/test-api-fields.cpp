// The field table (sampling/fields.h) and its JSON binding (api/fields-json.h): every row is
// well formed, every front end reads a field by its names with one range, and the echo says
// every sampler field. No server, no model: a tiny in-memory vocabulary tokenizes text fields.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "api/fields-json.h"
#include "sampling/order.h"
#include "tiny-vocab.h"

namespace minfer {
namespace {

using api::json;

TEST(fields, rows_are_well_formed) {
  std::set<std::string_view> keys;
  std::array<std::set<std::string_view>, kApiCount> names;
  const GenerationSettings d;
  for (const Field& f : fields()) {
    EXPECT_TRUE(keys.insert(f.key).second) << "key twice: " << f.key;
    EXPECT_FALSE(f.help.empty()) << f.key;
    EXPECT_FALSE(f.names[static_cast<size_t>(Api::kCli)].empty()) << f.key << " has no flag";
    EXPECT_FALSE(f.names[static_cast<size_t>(Api::kJson)].empty()) << f.key << " has no JSON name";
    for (size_t a = 0; a < kApiCount; ++a)
      for (std::string_view n : f.names_in(static_cast<Api>(a)))
        if (static_cast<Api>(a) != Api::kResponses || !f.names[a].empty()) {
          EXPECT_TRUE(names[a].insert(n).second) << "name twice in api " << a << ": " << n;
        }
    if (f.is_number()) {
      const double v = f.number(d);
      EXPECT_TRUE(check_value(f, v, f.key)) << f.key << " default " << v << " is outside its own range";
      EXPECT_LE(f.lo, f.hi) << f.key;
    }
  }
  EXPECT_EQ(fields().back().type, FieldType::kStages) << "the stage list must be read last";
}

TEST(fields, sampler_params_accept_every_default_and_refuse_by_the_table) {
  EXPECT_TRUE(validate(SamplerParams{}, 10));
  SamplerParams p;
  p.top_p = 0.0f;  // the most likely token only (OpenAI clients send it): accepted, not clamped
  EXPECT_TRUE(validate(p, 10));
  p.top_p = 1.01f;
  Status st = validate(p, 10);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "sampling: top_p 1.01 must be in [0, 1] (1 = off, 0 = the most likely token only)");
}

class FieldsJson : public ::testing::Test {
 protected:
  void SetUp() override {
    tok = testing::tiny_bpe_tokenizer();
  }
  std::optional<api::FieldError> read(const json& body, Api api, GenerationSettings& s) {
    return api::read_fields(body, api, *tok, s);
  }
  std::unique_ptr<Tokenizer> tok;
};

TEST_F(FieldsJson, reads_every_scalar_by_each_api_name) {
  GenerationSettings s;
  ASSERT_FALSE(read(json::parse(R"({"temperature": 0.5, "top_k": 7, "top_p": 0, "seed": 9007199254740993,
      "max_completion_tokens": 12, "stop": "x", "ignore_eos": true, "mirostat_m": 50, "frequency_penalty": -3})"),
                    Api::kJson, s));
  EXPECT_EQ(s.sampling.temp, 0.5f);
  EXPECT_EQ(s.sampling.top_k, 7);
  EXPECT_EQ(s.sampling.top_p, 0.0f);
  EXPECT_EQ(s.sampling.seed, 9007199254740993LL);  // exact beyond 2^53
  EXPECT_EQ(s.n_predict, 12);
  EXPECT_EQ(s.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.sampling.mirostat_m, 50);          // the server reads it now (the CLI had it alone)
  EXPECT_EQ(s.sampling.frequency_penalty, -3.0f);  // one range: any finite value, as on the CLI

  GenerationSettings a;  // Anthropic's and Ollama's and Responses' own names
  ASSERT_FALSE(read(json::parse(R"({"max_tokens": 5, "stop_sequences": ["a", "b"], "top_k": 3, "min_p": 0.9})"),
                    Api::kAnthropic, a));
  EXPECT_EQ(a.n_predict, 5);
  EXPECT_EQ(a.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.sampling.top_k, 3);
  EXPECT_EQ(a.sampling.min_p, SamplerParams{}.min_p) << "min_p is not an Anthropic field";
  GenerationSettings o;
  ASSERT_FALSE(read(json::parse(R"({"num_predict": 4, "repeat_penalty": 1.1, "max_tokens": 99})"), Api::kOllama, o));
  EXPECT_EQ(o.n_predict, 4);
  EXPECT_FLOAT_EQ(o.sampling.repeat_penalty, 1.1f);
  GenerationSettings r;
  ASSERT_FALSE(read(json::parse(R"({"max_output_tokens": 6, "max_tokens": 99, "top_k": 2})"), Api::kResponses, r));
  EXPECT_EQ(r.n_predict, 6);
  EXPECT_EQ(r.sampling.top_k, 2) << "Responses takes llama-server's extensions by their JSON names";
}

TEST_F(FieldsJson, refuses_with_the_name_used_and_the_tables_range) {
  struct Case {
    const char* body;
    Api api;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"({"temperature": -1})", Api::kJson, "temperature", "'temperature' -1 must be a finite value >= 0 (0 = greedy)"},
      {R"({"temperature": "hot"})", Api::kJson, "temperature", "'temperature' must be a number, got \"hot\""},
      {R"({"top_k": 2.5})", Api::kJson, "top_k", "'top_k' must be an integer, got 2.5"},
      {R"({"max_output_tokens": -2})", Api::kResponses, "max_output_tokens", "'max_output_tokens' -2 must be in [-1, 1073741824] (-1 = until end"},
      {R"({"stop_sequences": [1]})", Api::kAnthropic, "stop_sequences", "'stop_sequences' must be a string or an array of strings"},
      {R"({"seed": 18446744073709551615})", Api::kJson, "seed", "'seed' 1.8446744e+19 must be an integer >= -1"},
      {R"({"logit_bias": {"3": 101}})", Api::kJson, "logit_bias", "logit_bias[\"3\"] must be a number in [-100, 100] or false"},
      {R"({"logit_bias": {"99999": 1}})", Api::kJson, "logit_bias", "logit_bias key \"99999\" is not a token id"},
      {R"({"samplers": ["min_p", "top_k"]})", Api::kJson, "samplers", "'top_k' after 'min_p'"},
      {R"({"ignore_eos": 1})", Api::kJson, "ignore_eos", "'ignore_eos' must be a boolean, got 1"},
  };
  for (const Case& c : cases) {
    GenerationSettings s;
    auto e = read(json::parse(c.body), c.api, s);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body;
    EXPECT_NE(e->message.find(c.message), std::string::npos) << c.body << " -> " << e->message;
  }
}

TEST_F(FieldsJson, token_fields_and_stage_list) {
  GenerationSettings s;
  ASSERT_FALSE(read(json::parse(R"({"logit_bias": [[5, false], ["hello", 2]], "dry_sequence_breakers": ["\n", ""],
      "top_p": 0.5, "samplers": "kmt"})"), Api::kJson, s));
  EXPECT_TRUE(std::isinf(s.sampling.logit_bias.at(5)));
  const std::vector<int32_t> hello = tok->encode("hello", false, false);
  for (int32_t id : hello) EXPECT_EQ(s.sampling.logit_bias.at(id), 2.0f);
  EXPECT_EQ(s.sampling.dry_sequence_breakers.size(), 1u) << "an empty breaker has no tokens: dropped";
  EXPECT_EQ(s.sampling.top_p, 1.0f) << "the stage list leaves top_p out: off, read after top_p";
  EXPECT_EQ(s.sampling.top_k, 40);
}

TEST_F(FieldsJson, echo_says_every_sampler_scalar_by_its_key) {
  SamplerParams p;
  p.logit_bias[3] = -INFINITY;
  const json e = api::sampling_json(p);
  for (const Field& f : fields())
    if (f.is_sampler() && (f.is_number() || f.type == FieldType::kTokenBias)) {
      EXPECT_TRUE(e.contains(f.key)) << f.key;
    }
  EXPECT_EQ(e["logit_bias"], json::parse(R"([{"bias": null, "token": 3}])"));
  // Read back by the same names: the echo is a valid request.
  GenerationSettings s;
  json scalars = e;
  scalars.erase("logit_bias");
  ASSERT_FALSE(read(scalars, Api::kJson, s));
  EXPECT_EQ(api::sampling_json(s.sampling).dump(), [&] { json x = e; x["logit_bias"] = json::array(); return x.dump(); }());
}

TEST(fields, sampler_list_takes_names_or_chars) {
  SamplerParams a, b;
  ASSERT_TRUE(apply_sampler_list(a, "top_k;min_p;temperature"));
  ASSERT_TRUE(apply_sampler_list(b, "kmt"));
  EXPECT_EQ(a.top_p, 1.0f);
  EXPECT_EQ(b.top_p, 1.0f);
  EXPECT_EQ(a.top_k, b.top_k);
  SamplerParams c;
  ASSERT_TRUE(apply_sampler_list(c, "temp"));  // a name, though every char is a stage char
  EXPECT_EQ(c.top_k, 0);
  EXPECT_FALSE(apply_sampler_list(c, "mk"));
}

}  // namespace
}  // namespace minfer
