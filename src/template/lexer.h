// Jinja lexer with jinja2's whitespace rules as configured by transformers: trim_blocks (one
// newline after a block or comment tag is dropped), lstrip_blocks (spaces and tabs from the
// line start up to a block or comment tag are dropped), `-` / `+` modifiers, newlines
// normalized to "\n" and one trailing newline of the source dropped.
//
//   std::vector<Token> toks = tokenize("Hi {{ name }}!");   // data, var_begin, name, ...
//
// Throws JinjaError(kSyntax) with the line on malformed input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::jinja {

enum class Tok : uint8_t {
  kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // data, name, decoded string literal, operator ("//", "==", "(", ...)
  int64_t i = 0;     // kInt
  double f = 0;      // kFloat
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

std::vector<Token> tokenize(std::string_view source, const LexOptions& opts = {});

const char* tok_name(Tok t);

}  // namespace minfer::jinja
