// libFuzzer target for the Jinja engine: any byte string must parse and render, or fail with
// an error value, within the engine's limits (steps, output size, nesting), never crash,
// hang or leak. Input: a template, optionally followed by "\0" and a JSON object of
// variables (default: a small chat with tools).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "template/chat.h"
#include "template/template.h"

namespace {

constexpr std::string_view kDefaultVars = R"({
  "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi there"},
               {"role": "assistant", "content": null, "reasoning_content": "hmm",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": [1, 2.5]}}}]},
               {"role": "tool", "content": "{\"ok\": true}"}],
  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view source = input, vars = kDefaultVars;
  if (size_t nul = input.find('\0'); nul != std::string_view::npos) {
    source = input.substr(0, nul);
    vars = input.substr(nul + 1);
  }
  auto inputs = minfer::jinja::chat_inputs_from_json(vars);
  if (!inputs) inputs = minfer::jinja::chat_inputs_from_json(kDefaultVars);
  auto tmpl = minfer::jinja::Template::parse(source);
  if (!tmpl) return 0;
  minfer::jinja::RenderOptions opts;
  opts.now = *minfer::jinja::parse_now("2025-03-14T15:09:26");
  opts.immutable = size % 2 == 0;  // both sandboxes
  opts.limits.max_steps = 100000;
  opts.limits.max_output = size_t{1} << 20;
  opts.limits.max_call_depth = 64;
  auto out = tmpl->render(*inputs, opts);
  return out && out->size() == 0xdeadbeef;
}
