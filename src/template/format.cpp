// Python string formatting: printf-style `'%s' % x` and str.format's mini-language.
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/filters-impl.h"
#include "template/interp.h"
#include "template/text.h"

namespace minfer::jinja {
namespace {

struct Spec {
  uint32_t fill = ' ';
  bool fill_given = false;
  char align = 0;  // '<', '>', '^', '=' or 0 (type default)
  char sign = 0;  // '+', '-', ' ' when given
  bool alt = false, zero = false;
  int64_t width = -1, precision = -1;
  char grouping = 0;
  char type = 0;
};

std::string c_format(const char* conv, const Spec& s, double v) {
  std::string f = "%";
  if (s.alt) f += '#';
  f += ".*";
  f += conv;
  char buf[512];
  const int p = static_cast<int>(s.precision < 0 ? 6 : std::min<int64_t>(s.precision, 300));
  std::snprintf(buf, sizeof(buf), f.c_str(), p, v);
  return buf;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

std::string pad(const std::string& body, const std::string& sign, const Spec& s, char default_align) {
  // A '0' before the width pads with zeros unless a fill is given; numbers then pad after the sign.
  const char align = s.align ? s.align : (s.zero && default_align == '>' ? '=' : default_align);
  const uint32_t fill = s.fill_given ? s.fill : (s.zero ? '0' : ' ');
  const auto len = static_cast<int64_t>(utf8_length(body) + sign.size());
  if (s.width <= len) return sign + body;
  std::string f;
  utf8_append(f, fill);
  const int64_t marg = s.width - len;
  auto rep = [&](int64_t n) {
    std::string o;
    for (int64_t i = 0; i < n; ++i) o += f;
    return o;
  };
  if (align == '<') return sign + body + rep(marg);
  if (align == '>') return rep(marg) + sign + body;
  if (align == '=') return sign + rep(marg) + body;
  return rep(marg / 2) + sign + body + rep(marg - marg / 2);
}

std::string sign_prefix(bool negative, char sign_flag) {
  std::string out;
  if (negative) out.push_back('-');
  else if (sign_flag == '+' || sign_flag == ' ') out.push_back(sign_flag);
  return out;
}

std::string format_number(const Value& v, Spec s) {
  const bool is_float = v.is_float() || (s.type && std::string("eEfFgG%").find(s.type) != std::string::npos);
  std::string sign, body;
  if (!is_float) {
    const int64_t i = v.get_int();
    const uint64_t mag = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    sign = sign_prefix(i < 0, s.sign);
    switch (s.type) {
      case 'b': body = fmt::format("{:b}", mag); if (s.alt) sign += "0b"; break;
      case 'o': body = fmt::format("{:o}", mag); if (s.alt) sign += "0o"; break;
      case 'x': body = fmt::format("{:x}", mag); if (s.alt) sign += "0x"; break;
      case 'X': body = fmt::format("{:X}", mag); if (s.alt) sign += "0X"; break;
      case 'c': body.clear(); utf8_append(body, static_cast<uint32_t>(mag)); sign.clear(); break;
      case 0: case 'd': case 'n': body = std::to_string(mag); break;
      default: type_error(fmt::format("Unknown format code '{}' for object of type 'int'", s.type));
    }
    if (s.grouping) body = group_digits(body, s.grouping);
    return pad(body, sign, s, '>');
  }
  double f = v.as_double();
  if (s.type == '%') f *= 100;
  sign = sign_prefix(std::signbit(f), s.sign);
  f = std::fabs(f);
  if (std::isnan(f) || std::isinf(f)) {
    body = std::isnan(f) ? "nan" : "inf";
    if (s.type == 'E' || s.type == 'F' || s.type == 'G') body = str_upper(body);
    if (s.type == '%') body += "%";
    return pad(body, sign, s, '>');
  }
  switch (s.type) {
    case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
      const char conv[2] = {s.type, 0};
      body = c_format(conv, s, f);
      break;
    }
    case '%': body = c_format("f", s, f) + "%"; break;
    case 0:
      if (s.precision < 0) {
        body = float_repr(f);
      } else {
        Spec g = s;
        if (g.precision == 0) g.precision = 1;
        body = c_format("g", g, f);
        if (body.find_first_of(".e") == std::string::npos && body != "inf") body += ".0";
      }
      break;
    default: type_error(fmt::format("Unknown format code '{}' for object of type 'float'", s.type));
  }
  if (s.grouping) {
    const size_t end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, end), s.grouping) + (end == std::string::npos ? "" : body.substr(end));
  }
  return pad(body, sign, s, '>');
}

Spec parse_spec(const std::string& spec) {
  Spec s;
  std::vector<uint32_t> c = utf8_decode(spec);
  size_t i = 0;
  auto is_align = [](uint32_t x) { return x == '<' || x == '>' || x == '^' || x == '='; };
  if (c.size() >= 2 && is_align(c[1])) {
    s.fill = c[0];
    s.fill_given = true;
    s.align = static_cast<char>(c[1]);
    i = 2;
  } else if (!c.empty() && is_align(c[0])) {
    s.align = static_cast<char>(c[0]);
    i = 1;
  }
  if (i < c.size() && (c[i] == '+' || c[i] == '-' || c[i] == ' ')) s.sign = static_cast<char>(c[i++]);
  if (i < c.size() && c[i] == '#') { s.alt = true; ++i; }
  if (i < c.size() && c[i] == '0') { s.zero = true; ++i; }
  auto number = [&]() {
    int64_t n = -1;
    while (i < c.size() && c[i] >= '0' && c[i] <= '9') {
      n = (n < 0 ? 0 : n) * 10 + (c[i++] - '0');
      if (n > (int64_t{1} << 24)) fail(ErrorKind::kLimit, "format width or precision too large");
    }
    return n;
  };
  s.width = number();
  if (i < c.size() && (c[i] == ',' || c[i] == '_')) s.grouping = static_cast<char>(c[i++]);
  if (i < c.size() && c[i] == '.') {
    ++i;
    s.precision = number();
    if (s.precision < 0) type_error("Format specifier missing precision");
  }
  if (i < c.size()) s.type = static_cast<char>(c[i++]);
  if (i != c.size()) type_error("Invalid format specifier");
  return s;
}

std::string format_value(const Value& v, const std::string& spec) {
  if (spec.empty()) return v.to_str();
  Spec s = parse_spec(spec);
  if (v.is_number()) return format_number(v, s);  // bool formats as int with a spec
  if (v.is_string()) {
    if (s.type && s.type != 's') type_error(fmt::format("Unknown format code '{}' for object of type 'str'", s.type));
    if (s.sign) type_error("Sign not allowed in string format specifier");
    std::string body = v.str();
    if (s.precision >= 0) {
      std::vector<uint32_t> cps = utf8_decode(body);
      if (static_cast<int64_t>(cps.size()) > s.precision) body = utf8_encode(cps, 0, static_cast<size_t>(s.precision));
    }
    return pad(body, "", s, '<');
  }
  type_error(fmt::format("unsupported format string passed to {}.__format__", v.type_name()));
}

}  // namespace

std::string str_format(Interp& in, const std::string& f, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
      type_error("Single '}' encountered in format string");
    }
    if (c != '{') { out += c; continue; }
    if (i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    // {field_name!conversion:format_spec}; nested replacement fields in the spec are refused.
    size_t depth = 1, j = i + 1;
    while (j < f.size() && depth) {
      if (f[j] == '{') ++depth;
      else if (f[j] == '}') --depth;
      if (depth) ++j;
    }
    if (j >= f.size()) type_error("expected '}' before end of string");
    const std::string field = f.substr(i + 1, j - i - 1);
    i = j;
    size_t colon = field.find(':'), bang = field.find('!');
    if (bang != std::string::npos && colon != std::string::npos && bang > colon) bang = std::string::npos;
    const std::string name = field.substr(0, std::min(bang, colon));
    const std::string conv = bang == std::string::npos ? "" : field.substr(bang + 1, std::min(colon, field.size()) - bang - 1);
    const std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    if (spec.find('{') != std::string::npos) fail(ErrorKind::kUnsupported, "nested fields in str.format specs are not supported");
    // The first part selects the argument, then .attr and [key] parts walk into it.
    size_t p = 0;
    while (p < name.size() && name[p] != '.' && name[p] != '[') ++p;
    const std::string head = name.substr(0, p);
    Value v;
    if (head.empty() || std::all_of(head.begin(), head.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      size_t idx;
      if (head.empty()) {
        if (used_manual) type_error("cannot switch from manual field specification to automatic field numbering");
        used_auto = true;
        idx = auto_index++;
      } else {
        if (used_auto) type_error("cannot switch from automatic field numbering to manual field specification");
        used_manual = true;
        idx = std::stoul(head.size() > 9 ? "999999999" : head);
      }
      if (idx >= args.pos.size()) fail(ErrorKind::kType, fmt::format("Replacement index {} out of range for positional args tuple", idx));
      v = args.pos[idx];
    } else {
      auto it = std::find_if(args.kw.begin(), args.kw.end(), [&](auto& kv) { return kv.first == head; });
      if (it == args.kw.end()) fail(ErrorKind::kType, fmt::format("KeyError: '{}'", head));
      v = it->second;
    }
    while (p < name.size()) {
      if (name[p] == '.') {
        size_t q = p + 1;
        while (q < name.size() && name[q] != '.' && name[q] != '[') ++q;
        v = in.getattr(v, name.substr(p + 1, q - p - 1));
        p = q;
      } else {
        const size_t q = name.find(']', p);
        if (q == std::string::npos) type_error("Missing ']' in format string");
        const std::string key = name.substr(p + 1, q - p - 1);
        const bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        v = in.getitem(v, digits && key.size() < 18 ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
        p = q + 1;
      }
    }
    if (v.is_undefined() && p > head.size())  // a failed .attr / [key] walk: AttributeError/KeyError
      fail(ErrorKind::kType, fmt::format("format field '{}': {}", name, v.undefined_hint()));
    if (conv == "r" || conv == "a") v = Value(v.repr());
    else if (conv == "s") v = Value(v.to_str());
    else if (!conv.empty()) type_error(fmt::format("Unknown conversion specifier {}", conv));
    out += format_value(v, spec);
    in.check_size(out.size());
  }
  return out;
}

std::string percent_format(Interp& in, const std::string& f, const Value& args) {
  const bool mapping = args.is_dict();
  // Like CPython: an argument with __getitem__ (list, dict, Undefined...) that is not a tuple
  // or str is never reported as "not all arguments converted".
  const bool getitem = mapping || args.is_list() || args.is_undefined();
  ValueList positional = args.is_tuple() ? args.items() : ValueList{args};
  size_t next = 0;
  std::string out;
  auto take = [&]() -> Value {
    if (mapping) return args;
    if (next >= positional.size()) type_error("not enough arguments for format string");
    return positional[next++];
  };
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') { out += f[i]; continue; }
    if (++i >= f.size()) type_error("incomplete format");
    Value v;
    bool have = false;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      if (close == std::string::npos) type_error("incomplete format key");
      if (!mapping) type_error("format requires a mapping");
      const Value* found = args.dict_obj().find(Value(f.substr(i + 1, close - i - 1)));
      if (!found) fail(ErrorKind::kType, fmt::format("KeyError: '{}'", f.substr(i + 1, close - i - 1)));
      v = *found;
      have = true;
      i = close + 1;
    }
    Spec s;  // default alignment: right; '-' flag: left
    for (; i < f.size() && std::string("-+ #0").find(f[i]) != std::string::npos; ++i) {
      if (f[i] == '-') s.align = '<';
      else if (f[i] == '+' || f[i] == ' ') s.sign = s.sign == '+' ? '+' : f[i];
      else if (f[i] == '#') s.alt = true;
      else s.zero = true;
    }
    auto number = [&]() -> int64_t {
      if (i < f.size() && f[i] == '*') { ++i; return to_index(take(), "*"); }
      int64_t n = -1;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') n = std::min<int64_t>((n < 0 ? 0 : n) * 10 + (f[i++] - '0'), 1 << 24);
      return n;
    };
    s.width = number();
    if (i < f.size() && f[i] == '.') { ++i; s.precision = std::max<int64_t>(0, number()); }
    if (i >= f.size()) type_error("incomplete format");
    const char conv = f[i];
    if (conv == '%') { out += '%'; continue; }
    if (!have) v = take();
    if (s.align == '<') s.zero = false;
    std::string body;
    switch (conv) {
      case 's': case 'r': case 'a': {
        body = conv == 's' ? v.to_str() : v.repr();
        if (s.precision >= 0) {
          std::vector<uint32_t> cps = utf8_decode(body);
          if (static_cast<int64_t>(cps.size()) > s.precision) body = utf8_encode(cps, 0, static_cast<size_t>(s.precision));
        }
        Spec t = s;
        t.zero = false;  // %05s pads with spaces
        out += pad(body, "", t, '>');
        break;
      }
      case 'c':
        if (v.is_string()) {
          if (utf8_length(v.str()) != 1) type_error("%c requires an int or a unicode character, not a string of length != 1");
          Spec t = s;
          t.zero = false;
          out += pad(v.str(), "", t, '>');
          break;
        }
        [[fallthrough]];
      case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': {
        if (!v.is_number()) type_error(fmt::format("%{} format: a real number is required, not {}", conv, v.type_name()));
        Value iv = v.is_float() ? Value(float_to_int(v.as_double())) : Value(v.get_int());
        s.type = conv == 'i' || conv == 'u' ? 'd' : conv;
        s.precision = -1;
        out += format_number(iv, s);
        break;
      }
      case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
        if (!v.is_number()) type_error(fmt::format("must be real number, not {}", v.type_name()));
        s.type = conv;
        out += format_number(Value(v.as_double()), s);
        break;
      }
      default: type_error(fmt::format("unsupported format character '{}'", conv));
    }
    in.check_size(out.size());
  }
  if (!mapping && next < positional.size() && args.is_tuple()) type_error("not all arguments converted during string formatting");
  if (!getitem && !args.is_tuple() && next == 0) type_error("not all arguments converted during string formatting");
  return out;
}

}  // namespace minfer::jinja
