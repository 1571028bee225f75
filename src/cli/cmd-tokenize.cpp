// `minfer tokenize MODEL [TEXT... | -f FILE] [--json | --jsonl] [--no-special] [--bos]`
// `minfer detokenize MODEL ID,ID,... [--no-special]`  |  `minfer detokenize MODEL --jsonl`
//
// tokenize prints the ids on one line separated by single spaces (--json: a JSON array).
// With --jsonl it reads one JSON string per line from stdin and writes one JSON array of ids
// per line. Special-token text is parsed unless --no-special; BOS only with --bos.
// detokenize writes the exact bytes of the tokens, with no newline added; with --jsonl it
// reads one JSON array of ids per stdin line and writes one JSON string per line (bytes that
// are not valid UTF-8 become U+FFFD there: use the plain form for exact bytes).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

// `path` comes from resolve_model(), which has already explained a failure.
Expected<Tokenizer> load_tokenizer(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.error();
  return Tokenizer::from_gguf(*file);
}

void append_ids(std::string& out, const std::vector<int32_t>& ids, bool as_json) {
  if (as_json) out.push_back('[');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(as_json ? ',' : ' ');
    fmt::format_to(std::back_inserter(out), "{}", ids[i]);
  }
  if (as_json) out.push_back(']');
  out.push_back('\n');
}

// --jsonl: one JSON string per input line -> one JSON array per output line.
int tokenize_jsonl(const Tokenizer& tok, bool add_bos, bool special) {
  std::string line, out;
  std::vector<int32_t> ids;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    std::string text;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (!j.is_string()) return fail("tokenize", fmt::format("stdin line {}: expected a JSON string, got {}", line_no, j.type_name()));
      text = j.get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      return fail("tokenize", fmt::format("stdin line {}: not valid JSON: {}", line_no, e.what()));
    }
    ids.clear();
    tok.encode(text, add_bos, special, ids);
    append_ids(out, ids, true);
    if (out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int detokenize_jsonl(const Tokenizer& tok, const DecodeOptions& opt) {
  std::string line, out;
  std::vector<int32_t> ids;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    ids.clear();
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (!j.is_array()) return fail("detokenize", fmt::format("stdin line {}: expected a JSON array of ids", line_no));
      for (const nlohmann::json& x : j) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= tok.n_vocab()) {
          return fail("detokenize", fmt::format("stdin line {}: {} is not a token id (n_vocab {})", line_no, x.dump(), tok.n_vocab()));
        }
        ids.push_back(x.get<int32_t>());
      }
    } catch (const nlohmann::json::exception& e) {
      return fail("detokenize", fmt::format("stdin line {}: not valid JSON: {}", line_no, e.what()));
    }
    out += nlohmann::json(tok.decode(ids, opt)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out.push_back('\n');
    if (out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// A token's bytes for a terminal: printable text as is, \n \t \r \\ \' escaped, other control
// bytes and bytes that are not part of a whole UTF-8 character as \xNN.
std::string escape_piece(std::string_view p) {
  std::string out;
  for (size_t i = 0; i < p.size();) {
    const auto c = static_cast<unsigned char>(p[i]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool whole = len > 1 && i + static_cast<size_t>(len) <= p.size();
    for (int k = 1; whole && k < len; ++k) whole = (static_cast<unsigned char>(p[i + static_cast<size_t>(k)]) >> 6) == 2;
    if (whole) {
      out.append(p.substr(i, static_cast<size_t>(len)));
      i += static_cast<size_t>(len);
      continue;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (c == '\'') out += "\\'";
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
    ++i;
  }
  return out;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  CLI::App app{"Print the token ids of a text (special-token text such as <|im_start|> is parsed)", "minfer tokenize"};
  std::string model, text, file;
  std::vector<std::string> words;
  bool json = false, jsonl = false, no_special = false, bos = false, show_pieces = false;
  app.add_option("MODEL", model, "GGUF file or cached model name")->required();
  app.add_option("TEXT", words, "text to tokenize, words joined with single spaces as the main command does "
                                "(default: -f FILE, else stdin)");
  app.add_option("-f,--file", file, "read the text from FILE ('-': stdin)");
  app.add_flag("--json", json, "print a JSON array instead of space-separated ids");
  app.add_flag("--jsonl", jsonl, "read one JSON string per stdin line, print one JSON array per line");
  app.add_flag("--no-special", no_special, "treat special-token text as plain text");
  app.add_flag("--bos", bos, "prepend the BOS token");
  app.add_flag("--show-pieces,--pieces", show_pieces,
               "one line per token: ID -> 'piece' (control bytes and broken UTF-8 escaped, as \\n or \\xNN)");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  if (show_pieces && (json || jsonl)) return usage_fail("tokenize", "--show-pieces prints lines; not with --json or --jsonl");
  const bool has_text = app.count("TEXT") > 0;
  for (size_t i = 0; i < words.size(); ++i) text += (i ? " " : "") + words[i];
  if ((has_text ? 1 : 0) + (file.empty() ? 0 : 1) + (jsonl ? 1 : 0) > 1) {
    return usage_fail("tokenize", "give at most one of TEXT, -f FILE and --jsonl");
  }
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  auto tok = load_tokenizer(path);
  if (!tok) return fail("tokenize", tok.error().message);
  if (jsonl) return tokenize_jsonl(*tok, bos, !no_special);
  if (!has_text) {
    if (file.empty() || file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      std::ifstream in(file, std::ios::binary);
      if (!in) return fail("tokenize", fmt::format("cannot open '{}'", file));
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  std::string out;
  const std::vector<int32_t> ids = tok->encode(text, bos, !no_special);
  if (show_pieces) {
    for (int32_t id : ids) out += fmt::format("{:>6} -> '{}'\n", id, escape_piece(tok->piece(id, /*render_special=*/true)));
  } else {
    append_ids(out, ids, json);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  CLI::App app{"Print the text of token ids (exact bytes, no newline added)", "minfer detokenize"};
  std::string model;
  std::vector<std::string> id_args;
  bool no_special = false, jsonl = false;
  app.add_option("MODEL", model, "GGUF file or cached model name")->required();
  app.add_option("IDS", id_args, "token ids: 1,2,3 or '1 2 3' or '[1, 2, 3]'");
  app.add_flag("--no-special", no_special, "leave out control tokens such as <|im_end|>");
  app.add_flag("--jsonl", jsonl, "read one JSON array of ids per stdin line, print one JSON string per line");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  if (jsonl == !id_args.empty()) return fail("detokenize", "give either IDS or --jsonl");
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  auto tok = load_tokenizer(path);
  if (!tok) return fail("detokenize", tok.error().message);
  DecodeOptions opt;
  opt.render_special = !no_special;
  opt.strip_space_prefix = true;
  if (jsonl) return detokenize_jsonl(*tok, opt);
  std::vector<int32_t> ids;
  for (const std::string& arg : id_args) {
    std::string cur;
    auto flush = [&]() -> bool {
      if (cur.empty()) return true;
      const long long v = cur.size() > 10 ? -1 : std::stoll(cur);
      if (v < 0 || v >= tok->n_vocab()) return false;
      ids.push_back(static_cast<int32_t>(v));
      cur.clear();
      return true;
    };
    for (char c : arg) {
      if (c >= '0' && c <= '9') {
        cur.push_back(c);
        continue;
      }
      if (c != ',' && c != ' ' && c != '[' && c != ']' && c != '\n' && c != '\t') {
        return fail("detokenize", fmt::format("unexpected character '{}' in '{}'", c, arg));
      }
      if (!flush()) return fail("detokenize", fmt::format("token id {} is out of range: n_vocab {}", cur, tok->n_vocab()));
    }
    if (!flush()) return fail("detokenize", fmt::format("token id {} is out of range: n_vocab {}", cur, tok->n_vocab()));
  }
  const std::string text = tok->decode(ids, opt);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace minfer::cli
