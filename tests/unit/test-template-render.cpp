// Rendering: statements, scoping, undefined semantics, sandbox, strftime_now, limits and the
// chat API. Expected strings were checked against Python jinja2 (transformers' settings).
#include <gtest/gtest.h>

#include "template/chat.h"
#include "template/template.h"

namespace minfer::jinja {
namespace {

RenderOptions fixed_opts() {
  RenderOptions o;
  o.now = *parse_now("2025-03-14T15:09:26");
  return o;
}

Expected<std::string> try_render(std::string_view src, std::string_view vars = "{}", RenderOptions o = fixed_opts()) {
  auto t = Template::parse(src);
  if (!t) return t.error();
  return t->render(*value_from_json(vars), o);
}

std::string render(std::string_view src, std::string_view vars = "{}", RenderOptions o = fixed_opts()) {
  auto r = try_render(src, vars, o);
  EXPECT_TRUE(r) << src << " -> " << r.error().message;
  return r ? *r : "<error>";
}

std::string error_of(std::string_view src, std::string_view vars = "{}", RenderOptions o = fixed_opts()) {
  auto r = try_render(src, vars, o);
  EXPECT_FALSE(r) << src << " rendered " << (r ? *r : "");
  return r ? "" : r.error().message;
}

TEST(templateRender, LoopVariables) {
  EXPECT_EQ(render("{% for i in l %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }},{% endfor %}",
                   R"({"l": [5, 6]})"),
            "11TrueFalse,20FalseTrue,");
  EXPECT_EQ(render("{% for i in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}"), "-2|1-3|2-|");
  EXPECT_EQ(render("{% for i in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "abab");
  EXPECT_EQ(render("{% for i in range(5) if i is odd %}{{ i }}/{{ loop.length }} {% endfor %}"), "1/2 3/2 ");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in range(9) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
                   "{{ i }}{% endfor %}"),
            "013");
  EXPECT_EQ(render("{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "a=2;b=1;");
}

TEST(templateRender, RecursiveLoop) {
  EXPECT_EQ(render("{% for n in tree recursive %}{{ n.name }}{% if n.kids %}({{ loop(n.kids) }}){% endif %}{% endfor %}",
                   R"({"tree": [{"name": "a", "kids": [{"name": "b"}, {"name": "c", "kids": [{"name": "d"}]}]}]})"),
            "a(bc(d))");
}

TEST(templateRender, MacrosAndCaller) {
  EXPECT_EQ(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(b=3, a=4) }}"),
            "1B1243");
  EXPECT_EQ(render("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, k=2) }}"), "(1,){'k': 2}");
  EXPECT_EQ(render("{% macro w() %}[{{ caller(1) }}]{% endmacro %}{% call(x) w() %}got {{ x }}{% endcall %}"),
            "[got 1]");
  EXPECT_NE(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").find("takes not more than 1"), std::string::npos);
}

TEST(templateRender, ScopingFollowsJinja2) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "3");
  // A render argument shadowed by a later assignment in an enclosing loop is undefined in
  // the nested loop (jinja2's compile-time scoping).
  EXPECT_EQ(render("{% for i in [1] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = 2 %}{% endfor %}",
                   R"({"x": 1})"),
            "[]");
  EXPECT_EQ(render("{% macro m() %}{{ x }}{% endmacro %}{% set x = 5 %}{{ m() }}"), "5");
}

TEST(templateRender, UndefinedSemantics) {
  EXPECT_EQ(render("[{{ nope }}][{{ nope|default('d') }}][{{ nope is defined }}][{{ nope|length }}][{{ none.attr }}]"),
            "[][d][False][0][]");
  EXPECT_EQ(render("{% for x in nope %}x{% endfor %}{{ 'a' ~ nope }}{{ d.missing }}", R"({"d": {}})"), "a");
  EXPECT_NE(error_of("{{ nope.attr }}").find("undefined value: 'nope' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nope + 1 }}").find("undefined"), std::string::npos);
}

TEST(templateRender, ErrorsCarryTheLine) {
  EXPECT_NE(error_of("a\nb\n{{ raise_exception('bad role') }}").find("line 3: raise_exception: bad role"),
            std::string::npos);
  EXPECT_NE(error_of("\n{{ 1 / 0 }}").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("can only concatenate str"), std::string::npos);
  EXPECT_NE(error_of("{% if x %}{{ 1|from_json }}{% endif %}", R"({"x": true})").find("No filter named 'from_json'"),
            std::string::npos);
}

TEST(templateRender, ImmutableSandboxRefusesMutation) {
  EXPECT_NE(error_of("{% set l = [1] %}{{ l.append(2) }}").find("refused by the sandbox"), std::string::npos);
  EXPECT_EQ(render("{{ l.append is defined }}", R"({"l": []})"), "False");  // an "unsafe" undefined
  RenderOptions o = fixed_opts();
  o.immutable = false;
  EXPECT_EQ(render("{% set l = [1] %}{% set _ = l.append(2) %}{{ l }}{{ l.pop(0) }}{{ l }}", "{}", o), "[1, 2]1[2]");
  EXPECT_EQ(render("{% set d = {} %}{% set _ = d.update({'a': 1}) %}{{ d }}", "{}", o), "{'a': 1}");
  auto vars = value_from_json(R"({"l": [1]})");  // the caller's values are not changed
  EXPECT_EQ(*Template::parse("{{ l.append(2) }}{{ l }}")->render(*vars, o), "None[1, 2]");
  EXPECT_EQ(vars->to_str(), "{'l': [1]}");
}

TEST(templateRender, StrftimeNowUsesTheFixedDate) {
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %A %d %B') }}"), "2025-03-14 15:09:26 Friday 14 March");
  EXPECT_EQ(render("{{ strftime_now('%-d %b %Y|%z%Z|%f') }}"), "14 Mar 2025||000000");
  EXPECT_FALSE(parse_now("2025-13-01"));
}

TEST(templateRender, TojsonAndFormatting) {
  EXPECT_EQ(render("{{ x|tojson }}", R"({"x": {"a": "é", "b": [1, 2.0]}})"), "{\"a\": \"é\", \"b\": [1, 2.0]}");
  EXPECT_EQ(render("{{ x|tojson(indent=2) }}", R"({"x": [1]})"), "[\n  1\n]");
  EXPECT_EQ(render("{{ '{:>4}|{}'.format(1, 'a') }}{{ '%05.1f' % 3.14159 }}"), "   1|a003.1");
}

TEST(templateRender, LimitsStopRunawayTemplates) {
  RenderOptions o = fixed_opts();
  o.limits.max_steps = 1000;
  EXPECT_NE(error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "{}", o).find("limit"),
            std::string::npos);
  o = fixed_opts();
  o.limits.max_output = 1000;
  EXPECT_NE(error_of("{% for i in range(500) %}xyz{% endfor %}", "{}", o).find("limit"), std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000000 }}").find("limit"), std::string::npos);
  EXPECT_NE(error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}").find("deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000)|length }}").find("MAX_RANGE"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
}

TEST(templateRender, ReferenceCyclesAreReleased) {
  // A namespace holding itself and a macro in its own scope form cycles; the render must not
  // leak them (checked under ASan/LSan in the fuzz build) and must still print.
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("recursive"), std::string::npos);
  EXPECT_EQ(render("{% macro m() %}x{% endmacro %}{% set ns = namespace(f=m) %}{{ ns.f() }}"), "x");
}

TEST(templateChat, InputsGetTransformersDefaults) {
  auto in = chat_inputs_from_json(R"({"messages": [{"role": "user", "content": "Hi"}], "enable_thinking": false})");
  ASSERT_TRUE(in);
  auto t = Template::parse("{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}{{ enable_thinking }}"
                           "{{ bos_token is defined }}");
  ASSERT_TRUE(t);
  EXPECT_EQ(*t->render(*in), "TrueTrueFalseFalseFalse");
  EXPECT_FALSE(chat_inputs_from_json(R"({"messages": "x"})"));
  EXPECT_FALSE(chat_inputs_from_json(R"({"messages": [{"content": "no role"}]})"));
  EXPECT_FALSE(chat_inputs_from_json("[1]"));
}

TEST(templateChat, ChatmlFallback) {
  auto in = chat_inputs_from_json(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
                                      "add_generation_prompt": true})");
  ASSERT_TRUE(in);
  auto out = render_chat(kChatmlTemplate, *in, fixed_opts());
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  set_default_token(*in, "bos_token", "<s>");
  set_default_token(*in, "bos_token", "ignored");
  EXPECT_EQ(*render_chat("{{ bos_token }}", *in, fixed_opts()), "<s>");
}

std::string render_gemma(std::string_view case_json) {
  auto in = chat_inputs_from_json(case_json);
  EXPECT_TRUE(in) << in.error().message;
  if (!in) return "<error>";
  set_default_token(*in, "bos_token", "<bos>");
  auto out = render_chat(kGemmaTemplate, *in, fixed_opts());
  EXPECT_TRUE(out) << out.error().message;
  return out ? *out : "<error>";
}

// Gemma's documented format: <bos>, <start_of_turn>ROLE\n ... <end_of_turn>\n, the assistant is
// "model", system instructions start the first user turn (then a blank line).
TEST(templateChat, GemmaBuiltinFormat) {
  EXPECT_EQ(render_gemma(R"({"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
                             "add_generation_prompt": true})"),
            "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render_gemma(R"({"messages": [{"role": "user", "content": " Hi\n"}, {"role": "assistant", "content": "Hello!"},
                                          {"role": "user", "content": [{"type": "text", "text": "Bye "}, {"type": "text", "text": "now"}]}]})"),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye now<end_of_turn>\n");
  // A system message with no user turn after it is a user turn of its own.
  EXPECT_EQ(render_gemma(R"({"messages": [{"role": "system", "content": "S"}], "add_generation_prompt": true})"),
            "<bos><start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\n");
}

TEST(templateChat, FallbackByArchitecture) {
  for (const char* arch : {"gemma", "gemma2", "gemma3", "gemma3n"}) {
    EXPECT_EQ(fallback_template_for_arch(arch).name, "gemma") << arch;
    EXPECT_EQ(fallback_template_for_arch(arch).source, kGemmaTemplate) << arch;
  }
  for (const char* arch : {"llama", "qwen2", "qwen3", "phi3", ""}) {
    EXPECT_EQ(fallback_template_for_arch(arch).name, "chatml") << arch;
    EXPECT_EQ(fallback_template_for_arch(arch).source, kChatmlTemplate) << arch;
  }
  ASSERT_NE(find_builtin_template("gemma"), nullptr);
  EXPECT_EQ(find_builtin_template("gemma")->title, "Gemma");
  ASSERT_NE(find_builtin_template("chatml"), nullptr);
  EXPECT_EQ(find_builtin_template("chatml")->title, "ChatML");
  ASSERT_NE(find_builtin_template("llama3"), nullptr);
  EXPECT_EQ(find_builtin_template("alpaca"), nullptr);
  EXPECT_EQ(builtin_template_names(),
            "chatml, gemma, llama3, llama2, mistral, phi3, zephyr, vicuna, command-r, granite");
}

}  // namespace
}  // namespace minfer::jinja
