#include "server/json-prefix.h"

namespace minfer::server {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonPrefix::push(std::string_view bytes) {
  for (char c : bytes)
    if (!step(c)) return false;
  return true;
}

bool JsonPrefix::after_value() {
  if (stack_.empty()) state_ = kDone;
  else state_ = stack_.back() == '{' ? kObjCommaOrEnd : kArrCommaOrEnd;
  return true;
}

bool JsonPrefix::step(char c) {
  switch (state_) {
    case kStart:
      if (is_ws(c)) return true;
      if (c != '{') return false;
      stack_.push_back('{');
      state_ = kObjKeyOrEnd;
      return true;
    case kDone: return is_ws(c);
    case kObjKeyOrEnd:
    case kObjKey:
      if (is_ws(c)) return true;
      if (c == '}' && state_ == kObjKeyOrEnd) {
        stack_.pop_back();
        return after_value();
      }
      if (c != '"') return false;
      string_is_key_ = true;
      state_ = kString;
      return true;
    case kColon:
      if (is_ws(c)) return true;
      if (c != ':') return false;
      state_ = kValue;
      return true;
    case kObjCommaOrEnd:
    case kArrCommaOrEnd: {
      if (is_ws(c)) return true;
      const bool obj = state_ == kObjCommaOrEnd;
      if (c == ',') {
        state_ = obj ? kObjKey : kValue;
        return true;
      }
      if (c == (obj ? '}' : ']')) {
        stack_.pop_back();
        return after_value();
      }
      return false;
    }
    case kArrValueOrEnd:
      if (c == ']') {
        stack_.pop_back();
        return after_value();
      }
      [[fallthrough]];
    case kValue:
      if (is_ws(c)) return true;
      if (c == '{') {
        stack_.push_back('{');
        state_ = kObjKeyOrEnd;
      } else if (c == '[') {
        stack_.push_back('[');
        state_ = kArrValueOrEnd;
      } else if (c == '"') {
        string_is_key_ = false;
        state_ = kString;
      } else if (c == '-') {
        state_ = kNumSign;
      } else if (c == '0') {
        state_ = kNumZero;
      } else if (is_digit(c)) {
        state_ = kNumInt;
      } else if (c == 't' || c == 'f' || c == 'n') {
        literal_ = c == 't' ? "rue" : c == 'f' ? "alse" : "ull";
        state_ = kLiteral;
      } else {
        return false;
      }
      return true;
    case kString:
      if (c == '"') {
        if (string_is_key_) {
          state_ = kColon;
          return true;
        }
        return after_value();
      }
      if (c == '\\') state_ = kStringEsc;
      return static_cast<unsigned char>(c) >= 0x20;
    case kStringEsc:
      if (c == 'u') {
        hex_left_ = 4;
        state_ = kStringHex;
        return true;
      }
      state_ = kString;
      return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
    case kStringHex:
      if (!is_hex(c)) return false;
      if (--hex_left_ == 0) state_ = kString;
      return true;
    case kLiteral:
      if (c != *literal_) return false;
      if (*++literal_ == '\0') return after_value();
      return true;
    case kNumSign:
      if (c == '0') state_ = kNumZero;
      else if (is_digit(c)) state_ = kNumInt;
      else return false;
      return true;
    case kNumInt:
      if (is_digit(c)) return true;
      [[fallthrough]];
    case kNumZero:
      if (c == '.') {
        state_ = kNumDot;
        return true;
      }
      [[fallthrough]];
    case kNumFrac:
      if (state_ == kNumFrac && is_digit(c)) return true;
      if (c == 'e' || c == 'E') {
        state_ = kNumE;
        return true;
      }
      [[fallthrough]];
    case kNumExp:
      if (state_ == kNumExp && is_digit(c)) return true;
      after_value();  // the number ended before c: c belongs to what follows
      return step(c);
    case kNumDot:
      if (!is_digit(c)) return false;
      state_ = kNumFrac;
      return true;
    case kNumE:
      if (c == '+' || c == '-') {
        state_ = kNumExpSign;
        return true;
      }
      [[fallthrough]];
    case kNumExpSign:
      if (!is_digit(c)) return false;
      state_ = kNumExp;
      return true;
  }
  return false;
}

}  // namespace minfer::server
