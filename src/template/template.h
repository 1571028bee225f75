// minfer's Jinja engine: renders Hugging Face chat templates byte-identically to Python
// jinja2 as transformers configures it (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False), raise_exception,
// strftime_now). See docs/templates.md for what is supported.
//
//   auto t = jinja::Template::parse("{% for m in messages %}{{ m.content }}{% endfor %}");
//   if (!t) return t.error();
//   auto vars = jinja::value_from_json(R"({"messages": [{"role": "user", "content": "hi"}]})");
//   auto text = t->render(*vars);            // Expected<std::string>: "hi"
//
// Errors (syntax, unsupported constructs, undefined values, raise_exception, limits) come back
// as Error values whose message names the problem and the template line.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "template/interp.h"
#include "template/value.h"

namespace minfer::jinja {

struct RenderOptions {
  bool immutable = true;         // false: list.append/dict.update... allowed (SandboxedEnvironment)
  std::optional<std::tm> now;    // strftime_now's clock; the current local time when empty
  Limits limits;
};

class Template {
 public:
  static Expected<Template> parse(std::string_view source);
  // `vars` is a dict of the template's variables (the keyword arguments of jinja2's render).
  Expected<std::string> render(const Value& vars, const RenderOptions& opts = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

// JSON text -> Value with Python's json.loads types (object key order kept).
Expected<Value> value_from_json(std::string_view json_text);

// "YYYY-MM-DD[THH:MM[:SS]]" -> broken-down time (for strftime_now).
Expected<std::tm> parse_now(std::string_view text);

}  // namespace minfer::jinja
