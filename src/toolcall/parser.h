// The reply of a model with tools, read as it streams: prose (content) and tool calls, in the
// syntax of a ToolPlan (tools.h). Fed the visible text in any pieces; each feed returns what
// became final: content that can no longer turn into a call marker, a call's start (id and
// name) once its name is complete, and the bytes of its arguments as they come. A streamed
// reply is these deltas; a whole reply is their sum (result()), so the two always agree.
//
//   ToolCallParser p(plan);
//   for (auto& piece : pieces) send(p.feed(piece));   // delta.content / delta.tool_calls
//   send(p.finish());                                 // held content, at the end
//   p.result().calls[0].arguments                     // "{\"location\": \"Paris\"}"
//
// Arguments are the exact JSON text the model wrote (the grammar made it valid). Content right
// before a call loses its trailing whitespace; the generic format's {"response": "..."} is its
// decoded string.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "toolcall/tools.h"

namespace minfer::toolcall {

struct ToolCall {
  std::string id, name, arguments;
};

struct CallDelta {
  int index = 0;
  bool start = false;  // first delta of the call: carries id and name
  std::string id = {}, name = {};
  std::string arguments = {};  // the next bytes of the arguments
};

struct ReplyDelta {
  std::string content;
  std::vector<CallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

struct ParsedReply {
  std::string content;
  std::vector<ToolCall> calls;
};

// A call id: "call_" and 24 letters and digits, or 9 of them (Mistral's templates need that).
std::string make_call_id(bool nine_chars);

class ToolCallParser {
 public:
  explicit ToolCallParser(const ToolPlan& plan, std::function<std::string()> make_id = {});
  ReplyDelta feed(std::string_view text);
  ReplyDelta finish();  // the end of the reply: content still held back
  const ParsedReply& result() const { return result_; }

 private:
  enum class Mode { kProse, kCalls };
  struct Frame {
    bool object = false;
    bool expect_key = false;  // object: the next string is a key
    std::string key = {};     // object: the key whose value comes or is being read
  };
  ToolPlan plan_;
  std::function<std::string()> make_id_;
  Mode mode_;
  std::string prose_;    // all prose so far
  size_t emitted_ = 0;   // of it, sent as content
  ParsedReply result_;
  // The JSON scanner over the calls.
  std::vector<Frame> stack_;
  bool in_string_ = false, escape_ = false;
  std::string str_;            // raw text of the string being read (keys, names, response)
  enum class StrRole { kNone, kKey, kName, kResponse } str_role_ = StrRole::kNone;
  size_t response_sent_ = 0;   // raw bytes of the response string already decoded and sent
  int call_ = -1;              // the call being read, -1: none
  bool in_args_ = false;
  size_t args_depth_ = 0;      // stack depth at which the arguments value sits
  bool args_scalar_ = false;   // the arguments value is not a container
  std::string name_buf_;       // kMistralArgs: the text since the last call, up to [ARGS]
  bool expect_args_ = false;   // kMistralArgs: [ARGS] seen, its object comes next
  void mistral_name(ReplyDelta& out);

  size_t call_depth() const;
  bool at_call_object() const;
  void scan(std::string_view text, ReplyDelta& out);
  void scan_char(char c, ReplyDelta& out);
  void end_string(ReplyDelta& out);
  void emit_args(char c, ReplyDelta& out);
  void send_response(ReplyDelta& out, bool all);   // the response string's decoded new bytes, if in it
  void flush_response(ReplyDelta& out, bool all);
  void add_content(ReplyDelta& out, std::string_view s);
};

}  // namespace minfer::toolcall
