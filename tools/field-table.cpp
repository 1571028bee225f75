// minfer-field-table: the field table (sampling/fields.h) as the Markdown table of
// docs/sampling.md, between its "<!-- field-table -->" and "<!-- /field-table -->" lines.
//
//   minfer-field-table                      # print the table
//   minfer-field-table --check docs/sampling.md   # exit 1 when the doc's table differs (ctest docs.field_table)
//   minfer-field-table --write docs/sampling.md   # replace the doc's table
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "sampling/fields.h"

namespace {

using namespace minfer;

constexpr const char* kBegin = "<!-- field-table -->\n";
constexpr const char* kEnd = "<!-- /field-table -->\n";

std::string names_cell(const Field& f, Api api) {
  std::string out;
  for (std::string_view n : f.names_in(api)) out += fmt::format("{}`{}`", out.empty() ? "" : " ", n);
  return out.empty() ? "–" : out;
}

const char* type_name(FieldType t) {
  switch (t) {
    case FieldType::kFloat: return "number";
    case FieldType::kInt: return "integer";
    case FieldType::kBool: return "boolean";
    case FieldType::kStrings: return "strings";
    case FieldType::kTokenBias: return "token biases";
    case FieldType::kTokenSeqs: return "strings (token ids)";
    case FieldType::kStages: return "stage list";
  }
  return "?";
}

std::string table() {
  std::string out =
      "| key | CLI | JSON (OpenAI, llama-server, viz) | Anthropic | Responses | Ollama `options` | type | default | range "
      "| meaning |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Field& f : fields()) {
    // Responses reads the JSON names unless it has its own: show only its own.
    const std::string responses = f.names[static_cast<size_t>(Api::kResponses)].empty() ? "(JSON)" : names_cell(f, Api::kResponses);
    const std::string range = f.is_number() || f.type == FieldType::kTokenBias ? range_text(f) : "";
    const std::string meaning = f.off.empty() ? std::string(f.help) : fmt::format("{}; {}", f.help, f.off);
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", f.key, names_cell(f, Api::kCli),
                       names_cell(f, Api::kJson), names_cell(f, Api::kAnthropic), responses, names_cell(f, Api::kOllama),
                       type_name(f.type), default_text(f), range, meaning);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode.empty()) return std::fputs(table().c_str(), stdout) < 0;
  if ((mode != "--check" && mode != "--write") || argc != 3) {
    std::fprintf(stderr, "usage: minfer-field-table [--check|--write DOC.md]\n");
    return 2;
  }
  std::ifstream in(argv[2]);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  const size_t b = doc.find(kBegin), e = doc.find(kEnd);
  if (!in || b == std::string::npos || e == std::string::npos || e < b) {
    std::fprintf(stderr, "minfer-field-table: %s has no '%s' ... '%s' block\n", argv[2], "<!-- field-table -->",
                 "<!-- /field-table -->");
    return 1;
  }
  const size_t from = b + std::char_traits<char>::length(kBegin);
  const std::string want = table();
  if (mode == "--check") {
    if (doc.compare(from, e - from, want) == 0) return 0;
    std::fprintf(stderr, "minfer-field-table: the table in %s differs from src/sampling/fields.cpp; run "
                 "build/bin/minfer-field-table --write %s\n", argv[2], argv[2]);
    return 1;
  }
  doc.replace(from, e - from, want);
  std::ofstream(argv[2]) << doc;
  return 0;
}
