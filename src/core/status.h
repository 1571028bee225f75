// Error values for bad input. A function that can fail on user data returns Expected<T>
// (or Status for no value); the message names the object, the value and the limit.
//
//   Expected<int> parse(std::string_view s);
//   auto v = parse("12");
//   if (!v) return v.error();          // propagate
//   use(*v);
//
// Broken invariants are bugs and use MINFER_ASSERT instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace minfer {

struct Error {
  std::string message;
};

// Builds an Error from a fmt format string.
template <typename... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Expected(Error e) : v_(std::move(e)) {}      // NOLINT(implicit)

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success or an Error, no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT(implicit)
  static Status ok() { return Status(); }
  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "minfer: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace minfer

#define MINFER_ASSERT(cond) \
  ((cond) ? (void)0 : ::minfer::assert_fail(#cond, __FILE__, __LINE__))

// Propagates an error from an Expected/Status expression.
#define MINFER_TRY(expr)                       \
  do {                                         \
    auto&& minfer_try_ = (expr);               \
    if (!minfer_try_) return minfer_try_.error(); \
  } while (0)
