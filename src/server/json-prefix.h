// An incremental JSON validator for response_format {"type": "json_object"}: it accepts bytes
// while they can still be the start of one JSON object (RFC 8259, top level an object, any
// whitespace), so the sampler can drop every token that would break it.
//
//   JsonPrefix j;
//   JsonPrefix t = j;                       // try a token on a copy
//   if (t.push("{\"a\": 1")) j = t;          // still a valid prefix: keep it
//   j.push("}"); j.done();                   // true: the object is complete
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer::server {

class JsonPrefix {
 public:
  // Feeds bytes; false (and the state is then undefined) when they cannot continue a JSON object.
  bool push(std::string_view bytes);
  // The top-level object is closed (only whitespace may follow).
  bool done() const { return state_ == kDone; }

 private:
  enum State : uint8_t {
    kStart, kValue, kObjKeyOrEnd, kObjKey, kColon, kObjCommaOrEnd, kArrValueOrEnd, kArrCommaOrEnd,
    kString, kStringEsc, kStringHex, kNumSign, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumExpSign,
    kNumExp, kLiteral, kDone
  };
  bool step(char c);
  bool after_value();  // a value just ended: where the enclosing container goes next
  std::string stack_;  // '{' or '[' per open container
  State state_ = kStart;
  bool string_is_key_ = false;
  int hex_left_ = 0;
  const char* literal_ = nullptr;  // the rest of "true", "false" or "null" to match
};

}  // namespace minfer::server
