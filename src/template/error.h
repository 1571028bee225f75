// Errors inside the Jinja engine. The lexer, parser and interpreter throw JinjaError
// internally (unwinding out of deeply nested evaluation is what an interpreter needs);
// the public API in template.h catches it and returns an Error value, so nothing throws
// past the library boundary.
#pragma once

#include <exception>
#include <string>
#include <utility>

namespace minfer::jinja {

enum class ErrorKind {
  kSyntax,       // the template does not parse (jinja2: TemplateSyntaxError)
  kUnsupported,  // valid Jinja that this engine refuses to run (names the construct)
  kUndefined,    // an operation on an undefined value (jinja2: UndefinedError)
  kType,         // a Python TypeError/ValueError/ZeroDivisionError... in jinja2
  kSecurity,     // what the sandbox refuses (mutating a list in the immutable sandbox...)
  kRaised,       // raise_exception(msg) called by the template
  kLimit,        // an engine limit (iterations, recursion, output size) was hit
};

class JinjaError : public std::exception {
 public:
  JinjaError(ErrorKind kind, std::string message, int line = 0)
      : kind_(kind), message_(std::move(message)), line_(line) {}
  const char* what() const noexcept override { return message_.c_str(); }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  void set_line(int line) { if (line_ == 0) line_ = line; }
  // Raised while binding call arguments (before a generator filter's body runs).
  bool binding() const { return binding_; }
  JinjaError& mark_binding() {
    binding_ = true;
    return *this;
  }

 private:
  ErrorKind kind_;
  std::string message_;
  int line_;
  bool binding_ = false;
};

[[noreturn]] inline void fail(ErrorKind kind, std::string message, int line = 0) {
  throw JinjaError(kind, std::move(message), line);
}
[[noreturn]] inline void type_error(std::string message) { fail(ErrorKind::kType, std::move(message)); }

}  // namespace minfer::jinja
