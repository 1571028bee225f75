// Tool calls (src/toolcall): the syntax found for llama.cpp's collection of real chat templates,
// calls written by the templates themselves (a model's training format) read back by the parser
// and accepted by the grammar, the parser's deltas the same for any split of the text, and the
// grammar refusing calls the tools do not allow.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "template/chat.h"
#include "toolcall/parser.h"
#include "toolcall/tools.h"

namespace minfer::toolcall {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(MINFER_TEST_TEMPLATES_DIR) + "/" + name + ".jinja", std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json kWeatherParams = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
  "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})");
const json kTimeParams = json::parse(R"({"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]})");

ToolRequest weather_request(ToolChoice choice = ToolChoice::kAuto, bool parallel = false) {
  ToolRequest r;
  r.tools = {{"get_weather", "Weather in a city", kWeatherParams}, {"get_time", "Time in a zone", kTimeParams}};
  r.choice = choice;
  r.parallel = parallel;
  for (const Tool& t : r.tools)
    r.tools_json.push_back({{"type", "function"}, {"function", {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
  return r;
}

std::string render(const std::string& source, const json& messages, const json& tools, bool add_generation_prompt) {
  json args = {{"messages", messages}, {"tools", tools}, {"add_generation_prompt", add_generation_prompt},
               {"bos_token", ""}, {"eos_token", "</s>"}};
  auto in = jinja::chat_inputs_from_json(args.dump());
  EXPECT_TRUE(in) << in.error().message;
  auto text = jinja::render_chat(source, *in, {});
  EXPECT_TRUE(text) << text.error().message;
  return text ? *text : "";
}

ParsedReply parse_all(const ToolPlan& plan, std::string_view text) {
  ToolCallParser p(plan);
  p.feed(text);
  p.finish();
  return p.result();
}

// The parser fed in pieces of `step` bytes (0: random sizes): the result, and the sum of its deltas.
std::pair<ParsedReply, ParsedReply> parse_pieces(const ToolPlan& plan, std::string_view text, size_t step, uint32_t seed) {
  ToolCallParser p(plan);
  ParsedReply sum;
  auto add = [&](const ReplyDelta& d) {
    sum.content += d.content;
    for (const CallDelta& c : d.calls) {
      if (c.start) {
        EXPECT_EQ(static_cast<size_t>(c.index), sum.calls.size());
        sum.calls.push_back({c.id, c.name, ""});
      }
      EXPECT_LT(static_cast<size_t>(c.index), sum.calls.size());
      if (static_cast<size_t>(c.index) < sum.calls.size()) sum.calls[static_cast<size_t>(c.index)].arguments += c.arguments;
    }
  };
  std::mt19937 rng(seed);
  for (size_t i = 0; i < text.size();) {
    const size_t n = step ? step : 1 + rng() % 7;
    add(p.feed(text.substr(i, n)));
    i += n;
  }
  add(p.finish());
  return {p.result(), sum};
}

void expect_same(const ParsedReply& a, const ParsedReply& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
  }
}

bool grammar_matches(const std::string& gbnf, std::string_view text) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g) << g.error().message;
  if (!g) return false;
  GrammarMatcher m(std::make_shared<const Grammar>(std::move(*g)));
  return m.accept(text) && m.can_end();
}

TEST(ToolTemplates, SyntaxOfEachFamily) {
  struct Case {
    const char* name;
    Syntax syntax;
    bool object_arguments;
  };
  const Case cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct", Syntax::kHermes, true},
      {"Qwen-Qwen3-0.6B", Syntax::kHermes, true},
      {"Qwen-QwQ-32B", Syntax::kHermes, true},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", Syntax::kHermes, true},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", Syntax::kHermes, true},
      {"meta-llama-Llama-3.1-8B-Instruct", Syntax::kLlama3, true},
      {"meta-llama-Llama-3.2-3B-Instruct", Syntax::kLlama3, true},
      {"meta-llama-Llama-3.3-70B-Instruct", Syntax::kLlama3, true},
      {"mistralai-Mistral-Nemo-Instruct-2407", Syntax::kMistral, true},
      {"Mistral-Small-3.2-24B-Instruct-2506", Syntax::kMistralArgs, true},
      {"unsloth-mistral-Devstral-Small-2507", Syntax::kMistralArgs, true},
      {"mistralai-Ministral-3-14B-Reasoning-2512", Syntax::kMistralArgs, true},
      {"google-gemma-2-2b-it", Syntax::kGeneric, false},
      {"microsoft-Phi-3.5-mini-instruct", Syntax::kGeneric, false},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", Syntax::kGeneric, false},
  };
  for (const Case& c : cases) {
    const TemplateTools tt = probe_template(read_template(c.name));
    EXPECT_EQ(syntax_name(tt.syntax), std::string(syntax_name(c.syntax))) << c.name;
    if (c.syntax != Syntax::kGeneric) {
      EXPECT_TRUE(tt.renders_tools) << c.name;
      EXPECT_EQ(tt.object_arguments, c.object_arguments) << c.name;
    }
  }
  EXPECT_TRUE(probe_template(read_template("mistralai-Mistral-Nemo-Instruct-2407")).nine_char_ids);
  EXPECT_EQ(probe_template(jinja::kChatmlTemplate).syntax, Syntax::kGeneric);
}

// A conversation with calls, rendered by the template: the assistant's part is what a model
// trained on it writes. The parser must read the same calls back and the auto-mode grammar
// must accept the text from the marker to the end of the calls.
TEST(ToolTemplates, CallsWrittenByTheTemplateParseBack) {
  struct Case {
    const char* name;
    size_t n_calls;
    const char* end;  // the end of the calls in the rendered text
    const char* content = "";  // what the template writes before the calls
  };
  const Case cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct", 2, "</tool_call>"},
      {"Qwen-Qwen3-0.6B", 2, "</tool_call>", "<think>\n\n</think>"},  // its empty reasoning block
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", 2, "</tool_call>"},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", 2, "</tool_call>"},
      {"meta-llama-Llama-3.1-8B-Instruct", 1, "}"},
      {"meta-llama-Llama-3.3-70B-Instruct", 1, "}"},
      {"mistralai-Mistral-Nemo-Instruct-2407", 2, "]"},
      {"Mistral-Small-3.2-24B-Instruct-2506", 2, "}"},
      {"unsloth-mistral-Devstral-Small-2507", 2, "}"},
      {"mistralai-Ministral-3-14B-Reasoning-2512", 2, "}"},
  };
  const json args1 = {{"city", "Paris \"centre\" é"}, {"unit", "celsius"}};
  const json args2 = {{"zone", "Europe/Oslo"}};
  for (const Case& c : cases) {
    const std::string src = read_template(c.name);
    const TemplateTools tt = probe_template(src);
    ToolRequest req = weather_request(ToolChoice::kAuto, c.n_calls > 1);
    json calls = json::array({{{"id", "abcDEF123"}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", args1.dump()}}}}});
    if (c.n_calls > 1)
      calls.push_back({{"id", "ghiJKL456"}, {"type", "function"}, {"function", {{"name", "get_time"}, {"arguments", args2.dump()}}}});
    const json user = {{"role", "user"}, {"content", "Weather in Paris and time in Oslo?"}};
    const json history = prepare_messages(tt, req, json::array({user, {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}}));
    const std::string prompt = render(src, json::array({user}), req.tools_json, true);
    const std::string full = render(src, history, req.tools_json, false);
    ASSERT_TRUE(full.starts_with(prompt)) << c.name << "\n--- prompt:\n" << prompt << "\n--- full:\n" << full;
    std::string reply = full.substr(prompt.size());
    const size_t end = reply.rfind(c.end);
    ASSERT_NE(end, std::string::npos) << c.name << ": " << reply;
    reply.resize(end + std::string(c.end).size());

    auto plan = plan_tool_calls(tt, req);
    ASSERT_TRUE(plan) << plan.error().message;
    const ParsedReply got = parse_all(*plan, reply);
    ASSERT_EQ(got.calls.size(), c.n_calls) << c.name << ": " << reply;
    EXPECT_EQ(got.calls[0].name, "get_weather") << c.name;
    EXPECT_EQ(json::parse(got.calls[0].arguments), args1) << c.name << ": " << got.calls[0].arguments;
    if (c.n_calls > 1) {
      EXPECT_EQ(got.calls[1].name, "get_time") << c.name;
      EXPECT_EQ(json::parse(got.calls[1].arguments), args2) << c.name;
    }
    EXPECT_EQ(got.content, c.content) << c.name;
    const auto hit = find_grammar_trigger(reply, plan->triggers);
    ASSERT_TRUE(hit) << c.name << ": " << reply;
    EXPECT_TRUE(grammar_matches(plan->gbnf, std::string_view(reply).substr(hit->feed_from))) << c.name << ": " << reply;
    for (size_t step : {1, 2, 0}) {
      auto [res, sum] = parse_pieces(*plan, reply, step, 7);
      expect_same(res, got, std::string(c.name) + " pieces");
      expect_same(sum, got, std::string(c.name) + " deltas");
    }
  }
}

TEST(ToolParser, ContentBeforeACallNeverShowsTheMarker) {
  TemplateTools tt;
  tt.syntax = Syntax::kHermes;
  auto plan = plan_tool_calls(tt, weather_request());
  ASSERT_TRUE(plan);
  const std::string text = "Let me check <b>that</b>.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  ToolCallParser p(*plan);
  std::string content;
  for (char ch : text) {
    const ReplyDelta d = p.feed(std::string_view(&ch, 1));
    content += d.content;
    EXPECT_EQ(content.find("<tool"), std::string::npos) << content;
  }
  content += p.finish().content;
  EXPECT_EQ(content, "Let me check <b>that</b>.");
  ASSERT_EQ(p.result().calls.size(), 1u);
  EXPECT_EQ(p.result().calls[0].arguments, "{\"city\": \"Rome\"}");
  EXPECT_TRUE(p.result().calls[0].id.starts_with("call_"));
  // Text that only looked like the start of a marker is shown at the end.
  ToolCallParser q(*plan);
  std::string shown = q.feed("a <tool").content;
  EXPECT_EQ(shown, "a");
  shown += q.finish().content;
  EXPECT_EQ(shown, "a <tool");
}

TEST(ToolParser, SameResultForEverySplit) {
  struct Case {
    Syntax syntax;
    bool parallel;
    std::string text;
    size_t n_calls;
  };
  const Case cases[] = {
      {Syntax::kHermes, true, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a}b\\\"{\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"[x]\"}}\n</tool_call>", 2},
      {Syntax::kMistral, true, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"abcdefghi\"}, {\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]", 2},
      {Syntax::kMistralArgs, true, "ok[TOOL_CALLS]get_weather[ARGS]{\"city\": \"{[ARGS]}\"}[TOOL_CALLS]get_time[CALL_ID]abcdefghi[ARGS]{\"zone\": \"UTC\"}", 2},
      {Syntax::kLlama3, false, "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"\\u00e9t\\u00e9\"}}", 1},
      {Syntax::kGeneric, true, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Nice\"}}]}", 2},
      {Syntax::kGeneric, false, "{\"response\": \"caf\\u00e9 \\ud83d\\ude00 line\\nnext \\\"q\\\" \\\\\"}", 0},
  };
  for (const Case& c : cases) {
    TemplateTools tt;
    tt.syntax = c.syntax;
    tt.call_id_marker = c.syntax == Syntax::kMistralArgs;
    auto plan = plan_tool_calls(tt, weather_request(ToolChoice::kAuto, c.parallel));
    ASSERT_TRUE(plan) << plan.error().message;
    const ParsedReply whole = parse_all(*plan, c.text);
    EXPECT_EQ(whole.calls.size(), c.n_calls) << c.text;
    for (const ToolCall& call : whole.calls) EXPECT_TRUE(json::accept(call.arguments)) << call.arguments;
    if (c.n_calls == 0) {
      EXPECT_EQ(whole.content, "café \xF0\x9F\x98\x80 line\nnext \"q\" \\");
    }
    for (uint32_t seed = 0; seed < 20; ++seed) {
      auto [res, sum] = parse_pieces(*plan, c.text, seed < 2 ? seed + 1 : 0, seed);
      expect_same(res, whole, c.text);
      expect_same(sum, whole, c.text);
    }
    // The text the grammar sees (from the trigger on) is one it accepts.
    const auto hit = find_grammar_trigger(c.text, plan->triggers);
    const size_t from = hit ? hit->feed_from : 0;
    EXPECT_TRUE(grammar_matches(plan->gbnf, std::string_view(c.text).substr(from))) << syntax_name(c.syntax) << ": " << c.text;
  }
}

TEST(ToolGrammar, OnlyDeclaredToolsAndValidArguments) {
  TemplateTools tt;
  tt.syntax = Syntax::kHermes;
  auto plan = plan_tool_calls(tt, weather_request(ToolChoice::kRequired));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->prompt_suffix, "<tool_call>");
  EXPECT_TRUE(plan->triggers.empty());
  EXPECT_TRUE(grammar_matches(plan->gbnf, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_FALSE(grammar_matches(plan->gbnf, "\n{\"name\": \"get_stock\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_FALSE(grammar_matches(plan->gbnf, "\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\"}}\n</tool_call>"));
  EXPECT_FALSE(grammar_matches(plan->gbnf, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"kelvin\"}}\n</tool_call>"));
  // One call unless parallel.
  const std::string two = "\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>";
  EXPECT_FALSE(grammar_matches(plan->gbnf, two));
  auto par = plan_tool_calls(tt, weather_request(ToolChoice::kRequired, true));
  ASSERT_TRUE(par);
  EXPECT_TRUE(grammar_matches(par->gbnf, two));
  // A named tool: only that one.
  ToolRequest named = weather_request(ToolChoice::kNamed);
  named.named = "get_time";
  auto np = plan_tool_calls(tt, named);
  ASSERT_TRUE(np);
  EXPECT_TRUE(grammar_matches(np->gbnf, "\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>"));
  EXPECT_FALSE(grammar_matches(np->gbnf, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  // The generic format in auto mode: calls or a response; required: calls only.
  tt.syntax = Syntax::kGeneric;
  auto ga = plan_tool_calls(tt, weather_request());
  auto gr = plan_tool_calls(tt, weather_request(ToolChoice::kRequired));
  ASSERT_TRUE(ga && gr);
  EXPECT_TRUE(grammar_matches(ga->gbnf, "{\"response\": \"hi\"}"));
  EXPECT_FALSE(grammar_matches(gr->gbnf, "{\"response\": \"hi\"}"));
  EXPECT_TRUE(grammar_matches(gr->gbnf, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]}"));
  // No parameters: an empty arguments object.
  ToolRequest bare;
  bare.tools = {{"ping", "", json::object()}};
  bare.choice = ToolChoice::kRequired;
  tt.syntax = Syntax::kLlama3;
  auto bp = plan_tool_calls(tt, bare);
  ASSERT_TRUE(bp);
  EXPECT_TRUE(grammar_matches(bp->gbnf, "{\"name\": \"ping\", \"parameters\": {}}"));
  EXPECT_FALSE(grammar_matches(bp->gbnf, "{\"name\": \"ping\", \"parameters\": {\"x\": 1}}"));
}

TEST(ToolGrammar, RefsInsideAToolAndErrorsNameTheTool) {
  TemplateTools tt;
  tt.syntax = Syntax::kHermes;
  ToolRequest r;
  r.choice = ToolChoice::kRequired;
  r.tools = {{"a", "", json::parse(R"({"type": "object", "properties": {"n": {"$ref": "#/$defs/num"}}, "required": ["n"],
                                      "$defs": {"num": {"type": "integer", "minimum": 1, "maximum": 9}}})")},
             {"b", "", json::parse(R"({"type": "object", "properties": {"x": {"not": {}}}})")}};
  auto bad = plan_tool_calls(tt, r);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("tools[1].function.parameters"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("'not'"), std::string::npos) << bad.error().message;
  r.tools.pop_back();
  auto ok = plan_tool_calls(tt, r);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(grammar_matches(ok->gbnf, "{\"name\": \"a\", \"arguments\": {\"n\": 7}}</tool_call>"));
  EXPECT_FALSE(grammar_matches(ok->gbnf, "{\"name\": \"a\", \"arguments\": {\"n\": 12}}</tool_call>"));
}

TEST(ToolPrompt, GenericFormatDescribesToolsAndRewritesHistory) {
  TemplateTools tt;  // generic
  const ToolRequest req = weather_request(ToolChoice::kAuto);
  const json msgs = json::parse(R"([{"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "22 C"}])");
  const json out = prepare_messages(tt, req, msgs);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["role"], "system");
  EXPECT_NE(out[0]["content"].get<std::string>().find("get_weather"), std::string::npos);
  EXPECT_NE(out[0]["content"].get<std::string>().find("\"response\""), std::string::npos);
  EXPECT_FALSE(out[2].contains("tool_calls"));
  EXPECT_EQ(json::parse(out[2]["content"].get<std::string>())["tool_calls"][0]["arguments"], json({{"city", "Paris"}}));
  EXPECT_EQ(out[3]["role"], "user");
  EXPECT_EQ(json::parse(out[3]["content"].get<std::string>())["tool_response"]["content"], "22 C");
  // Object arguments for templates that apply tojson.
  tt.syntax = Syntax::kHermes;
  tt.object_arguments = true;
  const json h = prepare_messages(tt, req, msgs);
  EXPECT_EQ(h[1]["tool_calls"][0]["function"]["arguments"], json({{"city", "Paris"}}));
  EXPECT_EQ(h.size(), 3u);
}

}  // namespace
}  // namespace minfer::toolcall
