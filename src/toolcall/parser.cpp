// ToolCallParser (parser.h): prose until the plan's trigger, then a small JSON scanner that
// knows at which depth the call objects sit for each syntax (Hermes and Llama 3: top-level
// objects between markers; Mistral: the objects of one array; generic: the objects of the
// "tool_calls" array, or the "response" string).
#include "toolcall/parser.h"

#include <random>

#include "core/utf8.h"

namespace minfer::toolcall {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of a \uXXXX escape at raw[i] ('\\' there), or -1 when incomplete or invalid.
int32_t u_escape(std::string_view raw, size_t i) {
  if (i + 6 > raw.size() || raw[i] != '\\' || raw[i + 1] != 'u') return -1;
  int32_t v = 0;
  for (size_t k = 2; k < 6; ++k) {
    const int h = hex_value(raw[i + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// Decodes JSON string contents raw[from..]: returns the bytes and sets `used` to the raw bytes
// consumed. Without `all`, an escape that may still be incomplete is left for later.
std::string decode_json_chars(std::string_view raw, size_t from, bool all, size_t& used) {
  std::string out;
  size_t i = from;
  while (i < raw.size()) {
    const char c = raw[i];
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= raw.size()) break;
    const char e = raw[i + 1];
    if (e != 'u') {
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        default: out += e; break;  // \" \\ \/
      }
      i += 2;
      continue;
    }
    const int32_t u = u_escape(raw, i);
    if (u < 0) break;
    if (u >= 0xD800 && u <= 0xDBFF) {  // a high surrogate: its pair follows
      const int32_t lo = u_escape(raw, i + 6);
      if (lo < 0 && !all && i + 12 > raw.size()) break;
      if (lo >= 0xDC00 && lo <= 0xDFFF) {
        utf8_append(out, 0x10000u + ((static_cast<uint32_t>(u) - 0xD800u) << 10) + (static_cast<uint32_t>(lo) - 0xDC00u));
        i += 12;
        continue;
      }
      utf8_append(out, 0xFFFD);
      i += 6;
      continue;
    }
    utf8_append(out, (u >= 0xDC00 && u <= 0xDFFF) ? 0xFFFDu : static_cast<uint32_t>(u));
    i += 6;
  }
  used = i - from;
  return out;
}

std::string decoded(std::string_view raw) {
  size_t used = 0;
  return decode_json_chars(raw, 0, true, used);
}

}  // namespace

std::string make_call_id(bool nine_chars) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s = nine_chars ? "" : "call_";
  for (int i = 0; i < (nine_chars ? 9 : 24); ++i) s += kAlnum[rng() % 62];
  return s;
}

ToolCallParser::ToolCallParser(const ToolPlan& plan, std::function<std::string()> make_id)
    : plan_(plan), make_id_(std::move(make_id)), mode_(plan.starts_in_calls && !plan.gbnf.empty() ? Mode::kCalls : Mode::kProse) {
  if (!make_id_) {
    const bool nine = plan_.nine_char_ids;
    make_id_ = [nine] { return make_call_id(nine); };
  }
}

size_t ToolCallParser::call_depth() const {
  switch (plan_.syntax) {
    case Syntax::kMistral: return 2;
    case Syntax::kGeneric: return 3;
    case Syntax::kMistralArgs: return 0;
    default: return 1;
  }
}

bool ToolCallParser::at_call_object() const {
  if (plan_.syntax == Syntax::kMistralArgs || stack_.empty()) return false;
  if (stack_.size() != call_depth() || !stack_.back().object) return false;
  return plan_.syntax != Syntax::kGeneric || (stack_[0].object && stack_[0].key == "tool_calls" && !stack_[1].object);
}

void ToolCallParser::add_content(ReplyDelta& out, std::string_view s) {
  if (s.empty()) return;
  out.content += s;
  result_.content += s;
}

void ToolCallParser::emit_args(char c, ReplyDelta& out) {
  if (call_ < 0) return;
  result_.calls[static_cast<size_t>(call_)].arguments += c;
  if (out.calls.empty() || out.calls.back().index != call_) out.calls.push_back(CallDelta{.index = call_});
  out.calls.back().arguments += c;
}

void ToolCallParser::send_response(ReplyDelta& out, bool all) {
  if (str_role_ == StrRole::kResponse) flush_response(out, all);
}

void ToolCallParser::flush_response(ReplyDelta& out, bool all) {
  size_t used = 0;
  add_content(out, decode_json_chars(str_, response_sent_, all, used));
  response_sent_ += used;
}

void ToolCallParser::end_string(ReplyDelta& out) {
  const StrRole role = str_role_;
  str_role_ = StrRole::kNone;
  if (role == StrRole::kKey) {
    stack_.back().key = decoded(str_);
  } else if (role == StrRole::kName) {
    ToolCall call{make_id_(), decoded(str_), ""};
    call_ = static_cast<int>(result_.calls.size());
    out.calls.push_back(CallDelta{.index = call_, .start = true, .id = call.id, .name = call.name});
    result_.calls.push_back(std::move(call));
  } else if (role == StrRole::kResponse) {
    flush_response(out, true);
  }
  str_.clear();
}

// kMistralArgs: "[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]" read: the call starts (the model's id when
// it wrote one).
void ToolCallParser::mistral_name(ReplyDelta& out) {
  std::string t = name_buf_.substr(0, name_buf_.size() - 6);  // without [ARGS]
  name_buf_.clear();
  if (const size_t m = t.rfind("[TOOL_CALLS]"); m != std::string::npos) t = t.substr(m + 12);
  std::string id;
  if (const size_t m = t.find("[CALL_ID]"); m != std::string::npos) {
    id = t.substr(m + 9);
    t.resize(m);
  }
  while (!t.empty() && is_ws(t.front())) t.erase(t.begin());
  while (!t.empty() && is_ws(t.back())) t.pop_back();
  ToolCall call{id.empty() ? make_id_() : id, t, ""};
  call_ = static_cast<int>(result_.calls.size());
  out.calls.push_back(CallDelta{.index = call_, .start = true, .id = call.id, .name = call.name});
  result_.calls.push_back(std::move(call));
  expect_args_ = true;
}

void ToolCallParser::scan_char(char c, ReplyDelta& out) {
  if (plan_.syntax == Syntax::kMistralArgs && stack_.empty() && !in_string_ && !in_args_) {
    if (!(expect_args_ && c == '{')) {
      if (!expect_args_) {
        name_buf_ += c;
        if (name_buf_.ends_with("[ARGS]")) mistral_name(out);
      }
      return;
    }
    expect_args_ = false;
    in_args_ = true;
    args_depth_ = 0;
    args_scalar_ = false;
    emit_args(c, out);
    stack_.push_back(Frame{.object = true, .expect_key = true});
    return;
  }
  if (in_string_) {
    if (in_args_) emit_args(c, out);
    if (str_role_ != StrRole::kNone && !(c == '"' && !escape_)) str_ += c;
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      end_string(out);
      if (in_args_ && args_scalar_ && stack_.size() == args_depth_) in_args_ = false;
    }
    return;
  }
  if (stack_.empty() && !in_args_) {  // between calls: markers and whitespace
    const char open = plan_.syntax == Syntax::kMistral ? '[' : '{';
    if (c != open) return;
  }
  if (is_ws(c)) {
    if (in_args_ && !args_scalar_) emit_args(c, out);
    return;
  }
  // Scalars end at the delimiter after them (which is not theirs).
  if (in_args_ && args_scalar_ && stack_.size() == args_depth_ && (c == ',' || c == '}' || c == ']')) in_args_ = false;
  Frame* top = stack_.empty() ? nullptr : &stack_.back();
  const bool value_start = c != ':' && c != ',' && c != '}' && c != ']' && !(top && top->object && top->expect_key);
  if (value_start && !in_args_ && at_call_object() && top->key == (plan_.syntax == Syntax::kLlama3 ? "parameters" : "arguments")) {
    in_args_ = true;
    args_depth_ = stack_.size();
    args_scalar_ = c != '{' && c != '[';
  }
  if (in_args_) emit_args(c, out);
  switch (c) {
    case '{':
      stack_.push_back(Frame{.object = true, .expect_key = true});
      break;
    case '[':
      stack_.push_back(Frame{.object = false});
      break;
    case '}':
    case ']':
      if (!stack_.empty()) {
        if (at_call_object()) call_ = -1;
        stack_.pop_back();
      }
      if (in_args_ && !args_scalar_ && stack_.size() == args_depth_) {
        in_args_ = false;
        if (plan_.syntax == Syntax::kMistralArgs) call_ = -1;
      }
      break;
    case ',':
      if (top && top->object) top->expect_key = true;
      break;
    case ':':
      break;
    case '"':
      in_string_ = true;
      escape_ = false;
      str_.clear();
      if (top && top->object && top->expect_key) {
        top->expect_key = false;
        str_role_ = StrRole::kKey;
      } else if (at_call_object() && top->key == "name") {
        str_role_ = StrRole::kName;
      } else if (plan_.syntax == Syntax::kGeneric && stack_.size() == 1 && top->object && top->key == "response") {
        str_role_ = StrRole::kResponse;
        response_sent_ = 0;
      } else {
        str_role_ = StrRole::kNone;
      }
      break;
    default:
      break;
  }
}

void ToolCallParser::scan(std::string_view text, ReplyDelta& out) {
  for (const char c : text) scan_char(c, out);
  send_response(out, false);
}

ReplyDelta ToolCallParser::feed(std::string_view text) {
  ReplyDelta out;
  if (mode_ == Mode::kCalls) {
    scan(text, out);
    return out;
  }
  const size_t before = prose_.size();
  prose_ += text;
  if (plan_.triggers.empty() || plan_.gbnf.empty()) {
    add_content(out, std::string_view(prose_).substr(emitted_));
    emitted_ = prose_.size();
    return out;
  }
  if (auto hit = find_grammar_trigger(prose_, plan_.triggers, before)) {
    size_t end = hit->begin;
    while (end > emitted_ && is_ws(prose_[end - 1])) --end;  // no trailing blank before a call
    if (end > emitted_) add_content(out, std::string_view(prose_).substr(emitted_, end - emitted_));
    emitted_ = prose_.size();
    mode_ = Mode::kCalls;
    scan(std::string_view(prose_).substr(hit->feed_from), out);
    return out;
  }
  // Held back: what could grow into a marker, and the blank before it (dropped before a call).
  size_t hold = trigger_prefix_len(prose_, plan_.triggers);
  while (hold < prose_.size() && is_ws(prose_[prose_.size() - 1 - hold])) ++hold;
  const size_t safe = prose_.size() - std::min(hold, prose_.size());
  if (safe > emitted_) {
    add_content(out, std::string_view(prose_).substr(emitted_, safe - emitted_));
    emitted_ = safe;
  }
  return out;
}

ReplyDelta ToolCallParser::finish() {
  ReplyDelta out;
  if (mode_ == Mode::kProse) {
    add_content(out, std::string_view(prose_).substr(emitted_));
    emitted_ = prose_.size();
  } else if (in_string_) {
    send_response(out, true);
  }
  return out;
}

}  // namespace minfer::toolcall
