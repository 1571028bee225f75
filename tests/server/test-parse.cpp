// Request parsing (server/api.h parse_completion_request) without a server or a model: the tiny
// BPE vocabulary tokenizes, a ParseContext stands for the server's settings. What a request
// becomes (fields over the server's defaults, each API's names), and how it is refused (the
// field named, one error shape).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "../unit/tiny-vocab.h"
#include "server/api.h"

namespace minfer::server {
namespace {

class Parse : public ::testing::Test {
 protected:
  void SetUp() override {
    tok = testing::tiny_bpe_tokenizer();
    defaults.temp = 0.3f;  // serve's --temp 0.3
    ctx.tok = tok.get();
    ctx.n_ctx_slot = 64;
    ctx.default_n_predict = 7;  // serve's -n 7
    ctx.sampling = &defaults;
  }
  std::variant<CompletionRequest, ApiError> parse(const char* body, Api api = Api::kJson) {
    ParseContext c = ctx;
    c.api = api;
    return parse_completion_request(json::parse(body), /*chat=*/false, c);
  }
  CompletionRequest ok(const char* body, Api api = Api::kJson) {
    auto r = parse(body, api);
    if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << e->message;
    return std::get_if<CompletionRequest>(&r) ? std::get<CompletionRequest>(r) : CompletionRequest{};
  }
  ApiError refused(const char* body, Api api = Api::kJson) {
    auto r = parse(body, api);
    if (!std::holds_alternative<ApiError>(r)) ADD_FAILURE() << body << " was accepted";
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
  }
  std::unique_ptr<Tokenizer> tok;
  SamplerParams defaults;
  ParseContext ctx;
};

TEST_F(Parse, the_servers_defaults_then_the_requests_fields) {
  const CompletionRequest d = ok(R"({"prompt": "hello"})");
  EXPECT_EQ(d.sampling.temp, 0.3f);
  EXPECT_EQ(d.n_predict, 7);
  EXPECT_EQ(d.prompt, tok->encode("hello", tok->add_bos(), true));
  const CompletionRequest r = ok(R"({"prompt": "hello", "temperature": 0.9, "max_tokens": 5, "stop": ["\n"], "top_k": 3, "n": 2})");
  EXPECT_EQ(r.sampling.temp, 0.9f);
  EXPECT_EQ(r.n_predict, 5);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_EQ(r.n, 2);
}

TEST_F(Parse, ignore_eos_bans_the_end_of_generation_tokens) {
  const CompletionRequest r = ok(R"({"prompt": "hi", "ignore_eos": true})");
  ASSERT_FALSE(tok->eog_ids().empty());
  for (int32_t id : tok->eog_ids()) EXPECT_TRUE(std::isinf(r.sampling.logit_bias.at(id)));
}

TEST_F(Parse, each_api_reads_its_own_names) {
  EXPECT_EQ(ok(R"({"prompt": "hi", "max_output_tokens": 4})", Api::kResponses).n_predict, 4);
  EXPECT_EQ(ok(R"({"prompt": "hi", "max_output_tokens": 4})", Api::kJson).n_predict, 7) << "not an OpenAI chat field";
  EXPECT_EQ(ok(R"({"prompt": "hi", "stop_sequences": ["x"]})", Api::kAnthropic).stop, std::vector<std::string>{"x"});
}

TEST_F(Parse, refusals_name_the_field) {
  struct Case {
    const char* body;
    const char* param;
    const char* text;
  };
  const Case cases[] = {
      {R"({"temperature": 1})", "prompt", "'prompt' is required"},
      {R"({"prompt": "hi", "n": 17})", "n", ""},
      {R"({"prompt": "hi", "top_p": 2})", "top_p", "'top_p' 2 must be in [0, 1]"},
      {R"({"prompt": "hi", "stop": 5})", "stop", "'stop' must be a string or an array of strings"},
      {R"({"prompt": [1, 99999]})", "prompt", "token 99999 is not in"},
      {R"({"prompt": "hi", "max_tokens": 100})", "prompt", "maximum context length is 64"},  // OpenAI's rule
      {R"({"prompt": "hi", "logprobs": 6})", "logprobs", ""},
  };
  for (const Case& c : cases) {
    const ApiError e = refused(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_NE(e.message.find(c.text), std::string::npos) << c.body << " -> " << e.message;
  }
  // llama-server's n_predict is not checked against the context: the reply ends at its end.
  EXPECT_EQ(ok(R"({"prompt": "hi", "n_predict": 100})").n_predict, 100);
}

}  // namespace
}  // namespace minfer::server
