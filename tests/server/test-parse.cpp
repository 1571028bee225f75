// Request parsing (server/api.h parse_completion_request) without a server or a model: the tiny
// BPE vocabulary tokenizes, a ParseContext stands for the server's settings. What a request
// becomes (fields over the server's defaults, each API's names), and how it is refused (the
// field named, one error shape). Then its two steps alone: parse_request (request-parse.h: the
// JSON checked and typed, nothing rendered or tokenized) and prepare_request (request-prepare.h).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "../unit/tiny-vocab.h"
#include "server/api-ollama.h"
#include "server/api.h"
#include "server/request-parse.h"
#include "server/request-prepare.h"

namespace minfer::server {
namespace {

// A body that is refused: the field named, a piece of the message.
struct Refusal {
  const char* body;
  const char* param;
  const char* text;
  bool chat = false;
};

template <typename T>
void expect_refused(const Refusal& c, const ApiResult<T>& r) {
  ASSERT_FALSE(r) << c.body << " was accepted";
  EXPECT_EQ(r.error().status, 400) << c.body;
  EXPECT_EQ(r.error().param, c.param) << c.body << " -> " << r.error().message;
  EXPECT_NE(r.error().message.find(c.text), std::string::npos) << c.body << " -> " << r.error().message;
}

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
  ApiResult<CompletionRequest> parse(const char* body, Api api = Api::kJson) {
    ParseContext c = ctx;
    c.api = api;
    return parse_completion_request(json::parse(body), /*chat=*/false, c);
  }
  CompletionRequest ok(const char* body, Api api = Api::kJson) {
    auto r = parse(body, api);
    if (!r) ADD_FAILURE() << body << " -> " << r.error().message;
    return r ? *r : CompletionRequest{};
  }
  ApiError refused(const char* body, Api api = Api::kJson) {
    auto r = parse(body, api);
    if (r) ADD_FAILURE() << body << " was accepted";
    return r ? ApiError{} : r.error();
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
  const Refusal cases[] = {
      {R"({"temperature": 1})", "prompt", "'prompt' is required"},
      {R"({"prompt": "hi", "n": 17})", "n", ""},
      {R"({"prompt": "hi", "top_p": 2})", "top_p", "'top_p' 2 must be in [0, 1]"},
      {R"({"prompt": "hi", "stop": 5})", "stop", "'stop' must be a string or an array of strings"},
      {R"({"prompt": [1, 99999]})", "prompt", "token 99999 is not in"},
      {R"({"prompt": "hi", "max_tokens": 100})", "prompt", "maximum context length is 64"},  // OpenAI's rule
      {R"({"prompt": "hi", "logprobs": 6})", "logprobs", ""},
  };
  for (const Refusal& c : cases) expect_refused(c, parse(c.body));
  // llama-server's n_predict is not checked against the context: the reply ends at its end.
  EXPECT_EQ(ok(R"({"prompt": "hi", "n_predict": 100})").n_predict, 100);
}

// Step 1 alone: the body's fields, typed, before anything needs the model.
class ParseStep : public Parse {
 protected:
  ParsedRequest parsed(const char* body, bool chat = false) {
    auto p = parse_request(json::parse(body), chat, ctx);
    if (!p) ADD_FAILURE() << body << " -> " << p.error().message;
    return p ? *p : ParsedRequest{};
  }
};

TEST_F(ParseStep, a_completion_body_becomes_typed_fields) {
  const ParsedRequest p = parsed(R"({"prompt": ["hi", "there"], "max_tokens": 5, "temperature": 0.5, "n": 3, "stream": true,
      "stream_options": {"include_usage": true}, "logprobs": 2, "cache_prompt": false, "id_slot": 1, "n_keep": -1,
      "n_discard": 4, "return_tokens": true, "ignore_eos": true, "timings_per_token": true,
      "speculative": {"type": "ngram", "n_max": 4}, "speculative.p_min": 0.5,
      "json_schema": {"type": "object"}, "grammar_lazy": true, "grammar_triggers": [{"type": 1, "value": "{"}]})");
  const CompletionRequest& o = p.options;
  EXPECT_FALSE(o.chat);
  EXPECT_EQ(o.n_predict, 5);
  EXPECT_EQ(p.n_predict_name, "max_tokens");
  EXPECT_EQ(o.sampling.temp, 0.5f);
  EXPECT_EQ(o.n, 3);
  EXPECT_TRUE(o.stream);
  EXPECT_TRUE(o.include_usage);
  EXPECT_TRUE(o.logprobs);
  EXPECT_EQ(o.top_logprobs, 2);
  EXPECT_FALSE(o.cache_prompt);
  EXPECT_EQ(o.id_slot, 1);
  EXPECT_EQ(o.n_keep, -1);
  EXPECT_EQ(o.n_discard, 4);
  EXPECT_TRUE(o.return_tokens);
  EXPECT_TRUE(o.timings_per_token);
  EXPECT_TRUE(o.ignore_eos);
  EXPECT_TRUE(o.sampling.logit_bias.empty()) << "the end-of-generation bans need the vocabulary: step 2's";
  ASSERT_TRUE(o.spec.has_value());
  EXPECT_TRUE(o.spec->ngram);
  EXPECT_FALSE(o.spec->model);
  EXPECT_EQ(o.spec->n_max, 4);
  EXPECT_EQ(o.spec->p_min, 0.5f);
  EXPECT_EQ(p.grammar.param, "json_schema");
  EXPECT_FALSE(p.grammar.gbnf.empty()) << "the schema as GBNF text, compiled in step 2";
  ASSERT_EQ(o.grammar_triggers.size(), 1u);
  EXPECT_EQ(o.grammar_triggers[0].text, "{");
  EXPECT_EQ(p.prompt, json::parse(R"(["hi", "there"])")) << "kept as given: tokenized in step 2";
  EXPECT_TRUE(o.prompt.empty());
  EXPECT_FALSE(o.grammar);
}

TEST_F(ParseStep, the_servers_defaults_where_the_body_is_silent) {
  ctx.cache_prompt = false;
  const ParsedRequest p = parsed(R"({"prompt": "hi", "n_probs": 3})");
  EXPECT_EQ(p.options.sampling.temp, 0.3f);
  EXPECT_EQ(p.options.n_predict, 7);
  EXPECT_EQ(p.n_predict_name, "");
  EXPECT_FALSE(p.options.cache_prompt);
  EXPECT_FALSE(p.options.spec.has_value());
  EXPECT_TRUE(p.options.logprobs) << "llama-server's n_probs asks for completion_probabilities";
  EXPECT_EQ(p.options.top_logprobs, 3);
  EXPECT_EQ(p.grammar.param, "");
  EXPECT_EQ(parsed(R"({"prompt": "hi", "n_predict": 9})").n_predict_name, "n_predict");
}

TEST_F(ParseStep, a_chat_body_becomes_checked_messages_and_tools) {
  const ParsedRequest p = parsed(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}], "add_generation_prompt": false, "logprobs": true, "top_logprobs": 2,
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}], "tool_choice": "required",
      "chat_template_kwargs": {"enable_thinking": false}})",
                                 /*chat=*/true);
  EXPECT_TRUE(p.options.chat);
  ASSERT_EQ(p.chat.messages.size(), 2u);
  EXPECT_EQ(p.chat.messages[0]["content"], "a\n\nb") << "text parts are paragraphs";
  EXPECT_EQ(p.chat.messages[1]["content"], "") << "null content is an empty string";
  EXPECT_EQ(p.chat.add_generation_prompt, std::optional<bool>(false));
  EXPECT_FALSE(p.chat.continue_final);
  ASSERT_EQ(p.chat.tools.tools.size(), 1u);
  EXPECT_EQ(p.chat.tools.tools[0].name, "get_weather");
  EXPECT_EQ(p.chat.tools.choice, toolcall::ToolChoice::kRequired);
  EXPECT_EQ(p.chat.template_kwargs, json::parse(R"({"enable_thinking": false})"));
  EXPECT_TRUE(p.options.logprobs);
  EXPECT_EQ(p.options.top_logprobs, 2);
}

TEST_F(ParseStep, refusals_name_the_field) {
  const Refusal cases[] = {
      {R"([1, 2])", "", "the request body must be a JSON object"},
      {R"({"prompt": "hi", "n": 0})", "n", "'n' is 0, outside [1, 16]"},
      {R"({"prompt": "hi", "stream": "yes"})", "stream", "'stream' must be a boolean, got \"yes\""},
      {R"({"prompt": "hi", "id_slot": 1.5})", "id_slot", "'id_slot' must be an integer"},
      {R"({"prompt": "hi", "stream_options": {"include_usage": 1}})", "stream_options.include_usage", "'include_usage' must be a boolean"},
      {R"({"prompt": "hi", "speculative": {"n_max": 0}})", "speculative.n_max", "'n_max' is 0, outside [1, "},
      {R"({"prompt": "hi", "speculative.p_min": 2})", "speculative.p_min", "'p_min' is 2, outside [0, 1]"},
      {R"({"prompt": "hi", "speculative": {"depth": 3}})", "speculative.depth", "unknown field 'speculative.depth'"},
      {R"({"prompt": "hi", "speculative": {"type": "draft"}})", "speculative.type", "needs a draft model"},
      {R"({"prompt": "hi", "grammar": "root ::= \"a\"", "json_schema": {}})", "json_schema", "both constrain the reply"},
      {R"({"prompt": "hi", "json_schema": 3})", "json_schema", "must be a JSON Schema object"},
      {R"({"prompt": "hi", "response_format": {"type": "xml"}})", "response_format.type", "'xml' is not one of"},
      {R"({"prompt": "hi", "grammar_lazy": true})", "grammar_triggers", "needs 'grammar_triggers'"},
      {R"({"prompt": "hi", "grammar_lazy": true, "grammar_triggers": [{"type": 1, "value": "x"}]})", "grammar_lazy", "needs a 'grammar'"},
      {R"({"temperature": 1})", "prompt", "'prompt' is required"},
      {R"({"prompt": "hi", "top_p": 2})", "top_p", "'top_p' 2 must be in [0, 1]"},
      {R"({"messages": []})", "messages", "'messages' must be a non-empty array", /*chat=*/true},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0].role", "Supported values are", /*chat=*/true},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content", "only text parts", /*chat=*/true},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false, "top_logprobs": 2})", "top_logprobs", "needs 'logprobs': true", /*chat=*/true},
      {R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true, "add_generation_prompt": true})",
       "continue_final_message", "cannot both be true", /*chat=*/true},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"})", "tool_choice", "only allowed when 'tools' are given", /*chat=*/true},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "grammar": "root ::= \"a\""})",
       "tools", "cannot be combined with 'grammar'", /*chat=*/true},
  };
  for (const Refusal& c : cases) expect_refused(c, parse_request(json::parse(c.body), c.chat, ctx));
}

// What needs the model is step 2's: a body can parse and still be refused by prepare_request.
TEST_F(ParseStep, the_vocabulary_grammar_and_context_are_step_twos) {
  const Refusal cases[] = {
      {R"({"prompt": [1, 99999]})", "prompt", "token 99999 is not in"},
      {R"({"prompt": "hi", "grammar": "root ::= ("})", "grammar", "grammar: "},
      {R"({"prompt": "hi", "max_tokens": 100})", "prompt", "maximum context length is 64"},
      {R"({"prompt": []})", "prompt", "'prompt' is an empty array"},
  };
  for (const Refusal& c : cases) expect_refused(c, prepare_request(parsed(c.body), ctx));
  const ApiError e = refused(R"({"prompt": "hi", "max_tokens": 100})");
  EXPECT_EQ(e.type, "exceed_context_size_error");
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.extra["n_ctx"], 64);
  // Step 2 on a parsed body: the prompt tokenized, ignore_eos's bans, the grammar compiled.
  auto r = prepare_request(parsed(R"({"prompt": "hello", "ignore_eos": true, "grammar": "root ::= \"a\""})"), ctx);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->prompt, tok->encode("hello", tok->add_bos(), true));
  EXPECT_EQ(r->prompt_text, "hello");
  EXPECT_TRUE(r->grammar);
  for (int32_t id : tok->eog_ids()) EXPECT_TRUE(std::isinf(r->sampling.logit_bias.at(id)));
}

// Ollama's bodies (api-ollama.h) become the OpenAI-shaped body parse reads with Api::kOllama.
TEST_F(ParseStep, ollama_bodies_translate_to_the_chat_and_completion_fields) {
  auto translate = [](const char* body, bool chat_endpoint) {
    auto t = ollama_to_request(json::parse(body), chat_endpoint);
    if (!t) ADD_FAILURE() << body << " -> " << t.error().message;
    return t ? *t : OllamaRequest{};
  };
  // /api/generate raw: the prompt after the context's ids; options by Ollama's names, with its
  // defaults where the server's flags left llama.cpp's; num_predict not checked against the context.
  const OllamaRequest g = translate(R"({"model": "m", "prompt": "hi", "raw": true, "context": [1, 2], "stream": false,
      "options": {"num_predict": 100, "temperature": 0.5, "stop": ["x"], "num_ctx": 8192, "max_tokens": 3}})", false);
  EXPECT_FALSE(g.chat);
  EXPECT_FALSE(g.load_only);
  EXPECT_EQ(g.body["prompt"], json::parse(R"([1, 2, "hi"])"));
  ParseContext oc = ctx;
  oc.api = Api::kOllama;
  defaults.top_p = 0.5f;  // serve's --top-p 0.5: a flag wins over Ollama's default
  const SamplerParams od = ollama_sampling_defaults(defaults, {"top_p"});
  oc.sampling = &od;
  auto r = parse_completion_request(g.body, g.chat, oc);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->n_predict, 100) << "num_predict, not OpenAI's max_tokens";
  EXPECT_EQ(r->sampling.temp, 0.5f);
  EXPECT_EQ(r->stop, std::vector<std::string>{"x"});
  EXPECT_FALSE(r->stream);
  EXPECT_EQ(r->sampling.top_p, 0.5f);
  EXPECT_EQ(r->sampling.min_p, 0.0f);
  EXPECT_EQ(r->sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(r->sampling.repeat_last_n, 64);
  // A flag set to llama.cpp's own default (--repeat-penalty 1: off) still wins.
  EXPECT_EQ(ollama_sampling_defaults(SamplerParams{}, {"repeat_penalty"}).repeat_penalty, SamplerParams{}.repeat_penalty);
  EXPECT_EQ(ollama_sampling_defaults(SamplerParams{}, {}).repeat_penalty, 1.1f);
  // /api/chat: streams by default; format, think, tools and the messages' Ollama fields.
  const OllamaRequest c = translate(R"({"model": "m", "think": "high",
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": "", "thinking": "hm", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                   {"role": "tool", "content": "r", "tool_name": "f"}]})", true);
  EXPECT_TRUE(c.body["stream"].get<bool>());
  EXPECT_EQ(c.body["chat_template_kwargs"], json::parse(R"({"enable_thinking": true})"));
  const json& m = c.body["messages"];
  EXPECT_EQ(m[1]["reasoning_content"], "hm");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], R"({"a":1})");
  EXPECT_EQ(m[2]["name"], "f");
  ParseContext chat_ctx = ctx;
  chat_ctx.api = Api::kOllama;
  auto pr = parse_request(c.body, /*chat=*/true, chat_ctx);
  ASSERT_TRUE(pr) << pr.error().message;
  const ParsedRequest& p = *pr;
  EXPECT_TRUE(p.options.stream);
  EXPECT_EQ(p.chat.tools.tools.size(), 1u);
  const OllamaRequest f = translate(R"({"model": "m", "format": {"type": "object"}, "messages": [{"role": "user", "content": "q"}]})", true);
  EXPECT_EQ(f.body["response_format"]["json_schema"]["schema"], json::parse(R"({"type": "object"})"));
  EXPECT_EQ(translate(R"({"model": "m", "prompt": "hi", "context": [5, 6]})", false).context, (std::vector<int32_t>{5, 6}))
      << "templated: the ids go before the rendered prompt (ollama_prepend_context)";
  EXPECT_TRUE(translate(R"({"model": "m", "messages": []})", true).load_only);
  EXPECT_TRUE(translate(R"({"model": "m"})", false).load_only);
  EXPECT_EQ(translate(R"({"model": "m", "format": "json", "messages": [{"role": "user", "content": "q"}]})", true).body["response_format"],
            json::parse(R"({"type": "json_object"})"));
}

TEST_F(ParseStep, ollama_refusals_and_model_names) {
  const Refusal cases[] = {
      {R"({"model": "m", "messages": [], "format": 5})", "format", "invalid format"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "q", "images": ["aGk="]}]})", "messages[0].images", "no images"},
      {R"({"model": "m", "messages": [], "options": 3})", "options", "'options' must be an object"},
      {R"({"model": "m", "messages": [], "stream": "yes"})", "stream", "'stream' must be a boolean"},
      {R"({"model": "m", "messages": [], "think": 1})", "think", "'think' must be true, false"},
      {R"({"model": "m", "messages": [], "think": "banana"})", "think", "'think' must be true, false"},
      {R"({"model": "m", "messages": [], "keep_alive": "banana"})", "keep_alive", "'keep_alive' must be a number of seconds"},
      {R"({"model": "m", "messages": [], "top_logprobs": 21})", "top_logprobs", "'top_logprobs' must be an integer in [0, 20]"},
      {R"({"model": "m", "prompt": "hi", "raw": true, "top_logprobs": -1})", "top_logprobs", "'top_logprobs' must be an integer"},
      {R"({"model": "m", "messages": [], "keep_alive": {}})", "keep_alive", "'keep_alive' must be"},
      {R"({"model": "m", "messages": [], "keep_alive": "5m30"})", "keep_alive", "'keep_alive' must be"},
      {R"({"model": "m", "prompt": "hi", "context": [1, -2]})", "context", "'context' must be an array of token ids"},
  };
  for (const Refusal& c : cases) expect_refused(c, ollama_to_request(json::parse(c.body), std::string_view(c.body).find("prompt") == std::string_view::npos));
  expect_refused({R"({"model": "m", "prompt": "hi", "template": "{{ .Prompt }}"})", "template", "not supported"},
                 ollama_to_request(json::parse(R"({"model": "m", "prompt": "hi", "template": "{{ .Prompt }}"})"), false));
  // top_logprobs without logprobs: ignored in every mode (Ollama checks only its range).
  for (bool chat : {true, false}) {
    const char* b = chat ? R"({"model": "m", "messages": [{"role": "user", "content": "q"}], "logprobs": false, "top_logprobs": 3})"
                         : R"({"model": "m", "prompt": "q", "raw": true, "top_logprobs": 3})";
    auto t = ollama_to_request(json::parse(b), chat);
    ASSERT_TRUE(t) << b << ": " << t.error().message;
    EXPECT_FALSE(t->body.contains("top_logprobs")) << b;
    EXPECT_FALSE(t->body.contains("n_probs")) << b;
  }
  // keep_alive: seconds, or Go's durations; negative: for good.
  const std::pair<const char*, double> kept[] = {{"0", 0}, {"300", 300}, {"-1", -1}, {R"("0")", 0}, {R"("-1")", -1}, {R"("5m")", 300},
                                                 {R"("1h30m")", 5400}, {R"("300ms")", 0.3}, {R"("1.5h")", 5400}, {R"("-1m")", -60}};
  for (const auto& [v, want] : kept) {
    auto r = ollama_to_request(json::parse(std::string(R"({"model": "m", "messages": [], "keep_alive": )") + v + "}"), true);
    ASSERT_TRUE(r) << v << ": " << r.error().message;
    ASSERT_TRUE(r->keep_alive_s) << v;
    EXPECT_DOUBLE_EQ(*r->keep_alive_s, want) << v;
  }
  const std::vector<std::string> names = {"smollm2", "tiny"};
  EXPECT_FALSE(ollama_check_model(json::parse(R"({"model": "smollm2:latest"})"), names));
  EXPECT_FALSE(ollama_check_model(json::parse(R"({"model": "tiny"})"), names));
  const auto missing = ollama_check_model(json::parse(R"({"messages": []})"), names);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  EXPECT_EQ(missing->message, "model is required");
  const auto unknown = ollama_check_model(json::parse(R"({"model": "llama3:8b"})"), names);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(ollama_error_json(*unknown), json::parse(R"({"error": "model \"llama3:8b\" not found, try pulling it first"})"));
  EXPECT_EQ(ollama_time(std::chrono::system_clock::time_point(std::chrono::nanoseconds(1700000000123456789LL))),
            "2023-11-14T22:13:20.123456789Z");
}

}  // namespace
}  // namespace minfer::server
