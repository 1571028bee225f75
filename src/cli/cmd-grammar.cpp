// `minfer grammar GRAMMAR.gbnf [TEXT...] [--texts-json FILE]`: checks a GBNF grammar and
// matches texts against it (llama.cpp's gbnf-validator, several texts at once).
// `minfer grammar --json-schema SCHEMA.json [TEXT...] [--print]`: the same for the grammar made
// from a JSON Schema; --print writes that grammar to stdout.
//
// Without texts it prints "grammar ok: N rules (M generated)" or the parse error (exit 1). Each
// TEXT (or each string of the JSON array in FILE) gets one line: "match", "incomplete" (a
// prefix of some match) or "no match at byte B"; --json prints one JSON array of those instead.
// Exit 0 when the grammar parses, whatever the texts do.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "grammar/gbnf.h"
#include "grammar/json-schema.h"
#include "grammar/matcher.h"

namespace minfer::cli {
namespace {

// "match", "incomplete" or "no match at byte B".
std::string verdict(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.accept(std::string_view(text).substr(i, 1))) return fmt::format("no match at byte {}", i);
  return m.can_end() ? "match" : "incomplete";
}

}  // namespace

int cmd_grammar(int argc, char** argv) {
  CLI::App app{"Check a GBNF grammar and match texts against it", "minfer grammar"};
  std::string path, texts_json;
  std::vector<std::string> texts;
  bool json = false;
  std::string schema_path;
  bool print = false;
  app.add_option("GRAMMAR", path, "GBNF grammar file (not with --json-schema)");
  app.add_option("TEXT", texts, "texts to match");
  app.add_option("--json-schema", schema_path, "a JSON Schema file: check the grammar made from it");
  app.add_flag("--print", print, "print the grammar (the one made from --json-schema) and stop");
  app.add_option("--texts-json", texts_json, "a JSON file holding an array of texts to match");
  app.add_flag("--json", json, "print the verdicts as one JSON array");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;

  std::string text;
  if (!schema_path.empty()) {
    if (!path.empty()) texts.insert(texts.begin(), path);  // the first positional is a text then
    std::ifstream in(schema_path, std::ios::binary);
    if (!in) return fail("grammar", fmt::format("cannot read schema file '{}'", schema_path));
    const std::string schema((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto converted = json_schema_to_gbnf(schema);
    if (!converted) return fail("grammar", fmt::format("{}: {}", schema_path, converted.error().message));
    text = std::move(*converted);
    path = schema_path;
  } else {
    if (path.empty()) return fail("grammar", "give a GRAMMAR file or --json-schema FILE");
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail("grammar", fmt::format("cannot read grammar file '{}'", path));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (print) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  auto g = parse_gbnf(text);
  if (!g) return fail("grammar", fmt::format("{}: {}", path, g.error().message));
  if (!texts_json.empty()) {
    std::ifstream tj(texts_json, std::ios::binary);
    if (!tj) return fail("grammar", fmt::format("cannot read '{}'", texts_json));
    try {
      const nlohmann::json j = nlohmann::json::parse(tj);
      if (!j.is_array()) return fail("grammar", fmt::format("{}: expected a JSON array of strings", texts_json));
      for (const auto& e : j) {
        if (!e.is_string()) return fail("grammar", fmt::format("{}: expected strings, got {}", texts_json, e.type_name()));
        texts.push_back(e.get<std::string>());
      }
    } catch (const nlohmann::json::exception& e) {
      return fail("grammar", fmt::format("{}: {}", texts_json, e.what()));
    }
  }
  const auto shared = std::make_shared<const Grammar>(std::move(*g));
  if (texts.empty()) {
    size_t generated = 0;
    for (bool b : shared->generated) generated += b;
    std::printf("grammar ok: %zu rules (%zu generated)\n", shared->names.size(), generated);
    return 0;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& t : texts) {
    const std::string v = verdict(shared, t);
    if (json) {
      out.push_back(v);
    } else {
      std::printf("%s\n", v.c_str());
    }
  }
  if (json) std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace minfer::cli
