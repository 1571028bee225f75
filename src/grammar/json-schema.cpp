// JSON Schema -> GBNF (json-schema.h). One pass over the schema: each subschema becomes a GBNF
// expression, named as a rule after where it sits (root-address-street); identical bodies share
// one rule; $ref targets become rules named before their body is built, so recursive schemas
// terminate.
//
// Objects: properties p0..pn-1 in order, each required or optional. Two chains of rules,
// first(i) (nothing written yet) and rest(i) (a comma is due):
//   first(i) = p_i rest(i+1) | first(i+1)        rest(i) = "," p_i rest(i+1) | rest(i+1)
// where the second alternative exists only for an optional p_i; linear in n.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json-schema-parts.h"
#include "grammar/json-schema.h"

namespace minfer {
namespace {

using json = nlohmann::ordered_json;
using schema::gbnf_literal;

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "$schema", "$id", "$comment", "default", "examples", "deprecated",
    "readOnly", "writeOnly", "$anchor", "contentEncoding", "contentMediaType", "$defs", "definitions"};
const std::set<std::string, std::less<>> kStringKeys = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string, std::less<>> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string, std::less<>> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string, std::less<>> kArrayKeys = {"items", "prefixItems", "minItems", "maxItems", "additionalItems", "uniqueItems"};
const std::set<std::string, std::less<>> kGeneralKeys = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};

// The JSON value rules every grammar can use, by name: body, and the rules it names.
struct Prim {
  const char* body;
  std::vector<std::string> uses;
};
const std::map<std::string, Prim, std::less<>> kPrims = {
    {"ws", {R"([ \t\n]{0,22})", {}}},
    {"char", {R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}}},
    {"string", {R"("\"" char* "\"")", {"char"}}},
    {"integer", {R"("-"? ("0" | [1-9] [0-9]{0,15}))", {}}},
    {"number", {R"("-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?)", {}}},
    {"boolean", {R"("true" | "false")", {}}},
    {"null", {R"("null")", {}}},
    {"value", {R"(object | array | string | number | boolean | null)", {"object", "array", "string", "number", "boolean", "null"}}},
    {"object", {R"("{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}")", {"ws", "string", "value"}}},
    {"array", {R"("[" ws (value ws ("," ws value ws)*)? "]")", {"ws", "value"}}},
    {"date", {R"(([1-9] [0-9]{3} | "0" ([1-9] [0-9]{2} | "0" ([1-9] [0-9] | "0" [1-9]))) "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))", {}}},
    {"time", {R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))", {}}},
    {"date-time", {R"(date "T" time)", {"date", "time"}}},
    {"uuid", {R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})", {}}},
};

std::string pointer_token(const std::string& key) {
  std::string out;
  for (const char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::string alts(const std::vector<std::string>& a) {
  if (a.size() == 1) return a[0];
  std::string out = "(";
  for (size_t i = 0; i < a.size(); ++i) out += (i ? " | " : "") + (a[i].empty() ? std::string("\"\"") : a[i]);
  return out + ")";
}

bool has_self_ref(const json& s) {
  if (s.is_object()) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() == "$ref" && it.value() == "#") return true;
      if (has_self_ref(it.value())) return true;
    }
  } else if (s.is_array()) {
    for (const auto& v : s)
      if (has_self_ref(v)) return true;
  }
  return false;
}

class Converter {
 public:
  explicit Converter(const json& root, std::string root_name = "root", const std::vector<std::string>& reserved = {})
      : root_(root), root_name_(std::move(root_name)) {
    for (const auto& [name, body] : kPrims) names_.insert(name);
    for (const auto& name : reserved) names_.insert(name);
    if (root_name_ != "root") names_.insert({"root", root_name_});
  }

  Expected<std::string> run() {
    Expected<std::string> top = has_self_ref(root_) ? ref_target("", root_, "root-schema") : visit(root_, "", "root");
    if (!top) return top.error();
    return text(*top);
  }

  std::string any(bool object_only) { return text(prim(object_only ? "object" : "value")); }

  // The subschemas at #/$defs/<key> of the root, each as a rule named roots[i] (an alias of the
  // rule made for it), sharing one set of rules.
  Expected<std::string> run_defs(const std::vector<std::string>& keys, const std::vector<std::string>& roots) {
    std::string aliases;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string ptr = "/$defs/" + pointer_token(keys[i]);
      auto name = ref_target(ptr, root_["$defs"][keys[i]], roots[i] + "-schema");
      if (!name) return name.error();
      aliases += roots[i] + " ::= " + *name + "\n";
    }
    std::string out = aliases;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  const json& root_;
  const std::string root_name_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in order of definition
  std::map<std::string, std::string> by_body_;
  std::set<std::string> names_;
  std::map<std::string, std::string> refs_;  // JSON pointer -> rule
  std::set<std::string> prims_used_;

  std::string text(const std::string& root) const {
    std::string out = root == root_name_ ? "" : root_name_ + " ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  static Error fail(const std::string& ptr, const std::string& what) {
    return Error{fmt::format("json-schema #{}: {}", ptr, what)};
  }

  std::string unique(const std::string& hint) {
    std::string base;
    for (const char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (ok) {
        base += c;
      } else if (!base.empty() && base.back() != '-') {
        base += '-';
      }
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty()) base = "r";
    std::string name = base;
    for (int i = 2; names_.count(name); ++i) name = fmt::format("{}-{}", base, i);
    names_.insert(name);
    return name;
  }

  std::string rule(const std::string& hint, const std::string& body) {
    if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    const std::string name = unique(hint);
    rules_.emplace_back(name, body);
    by_body_[body] = name;
    return name;
  }

  // A primitive rule, defined (with the primitives it uses) on first use.
  std::string prim(const std::string& name) {
    if (prims_used_.insert(name).second) {
      const Prim& p = kPrims.at(name);
      rules_.emplace_back(name, p.body);
      for (const auto& dep : p.uses) prim(dep);
    }
    return name;
  }

  Expected<std::string> ref_target(const std::string& pointer, const json& target, const std::string& hint) {
    if (auto it = refs_.find(pointer); it != refs_.end()) return it->second;
    const std::string name = unique(hint);
    refs_[pointer] = name;
    auto e = visit(target, pointer, name);
    if (!e) return e.error();
    rules_.emplace_back(name, *e);
    return name;
  }

  Expected<const json*> resolve(const std::string& ref, const std::string& ptr) const {
    if (ref.empty() || ref[0] != '#') return fail(ptr, fmt::format("only local references (#/...) are supported, not '{}'", ref));
    const json* at = &root_;
    std::string rest = ref.substr(1);
    if (rest.empty()) return at;
    if (rest[0] != '/') return fail(ptr, fmt::format("'{}' is not a JSON pointer (anchors are not supported)", ref));
    size_t p = 1;
    while (p <= rest.size()) {
      const size_t q = std::min(rest.find('/', p), rest.size());
      std::string tok;
      for (size_t i = p; i < q; ++i) {
        if (rest[i] == '~' && i + 1 < q) {
          tok += rest[i + 1] == '1' ? '/' : '~';
          ++i;
        } else {
          tok += rest[i];
        }
      }
      if (at->is_object() && at->contains(tok)) {
        at = &(*at)[tok];
      } else if (at->is_array() && !tok.empty() && tok.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(tok) < at->size()) {
        at = &(*at)[std::stoul(tok)];
      } else {
        return fail(ptr, fmt::format("the reference '{}' points to nothing", ref));
      }
      p = q + 1;
    }
    return at;
  }

  Expected<std::string> ref(const json& r, const std::string& ptr) {
    if (!r.is_string()) return fail(ptr, "$ref must be a string");
    const std::string s = r.get<std::string>();
    auto target = resolve(s, ptr);
    if (!target) return target.error();
    const std::string pointer = s.substr(1);
    const std::string hint = pointer.empty() ? "root-schema" : pointer.substr(pointer.rfind('/') + 1);
    return ref_target(pointer, **target, hint);
  }

  Expected<std::string> const_value(const json& v) {
    if (v.is_array()) {
      std::string out = "\"[\" ws";
      prim("ws");
      for (size_t i = 0; i < v.size(); ++i) {
        auto e = const_value(v[i]);
        if (!e) return e;
        out += (i ? " \",\" ws " : " ") + *e + " ws";
      }
      return out + " \"]\"";
    }
    if (v.is_object()) {
      std::string out = "\"{\" ws";
      prim("ws");
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        auto e = const_value(it.value());
        if (!e) return e;
        out += (first ? " " : " \",\" ws ") + gbnf_literal(json(it.key()).dump()) + " ws \":\" ws " + *e + " ws";
        first = false;
      }
      return out + " \"}\"";
    }
    return gbnf_literal(v.dump());
  }

  static bool only(const json& s, std::initializer_list<const char*> allowed) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (kAnnotations.count(it.key())) continue;
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return it.key() == a; })) return false;
    }
    return true;
  }

  Expected<std::string> visit(const json& s, const std::string& ptr, const std::string& hint) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return prim("value");
      return fail(ptr, "the schema false matches nothing");
    }
    if (!s.is_object()) return fail(ptr, "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (!kAnnotations.count(k) && !kStringKeys.count(k) && !kNumberKeys.count(k) && !kObjectKeys.count(k) &&
          !kArrayKeys.count(k) && !kGeneralKeys.count(k))
        return fail(ptr, fmt::format("unsupported keyword '{}'", k));
    }
    if (s.contains("$ref")) {
      if (!only(s, {"$ref"})) return fail(ptr, "keywords beside $ref are not supported");
      return ref(s["$ref"], ptr + "/$ref");
    }
    if (s.contains("const")) {
      if (!only(s, {"const", "type"})) return fail(ptr, "keywords beside const (other than type) are not supported");
      return const_value(s["const"]);
    }
    if (s.contains("enum")) {
      if (!only(s, {"enum", "type"})) return fail(ptr, "keywords beside enum (other than type) are not supported");
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) return fail(ptr + "/enum", "enum must be a non-empty array");
      std::vector<std::string> out;
      for (const auto& v : e) {
        auto c = const_value(v);
        if (!c) return c;
        out.push_back(*c);
      }
      return rule(hint, alts(out));
    }
    if (s.contains("allOf")) {
      auto merged = merge_all_of(s, ptr);
      if (!merged) return merged.error();
      return visit(*merged, ptr, hint);
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      if (!only(s, {k})) return fail(ptr, fmt::format("keywords beside {} are not supported: move them into each alternative", k));
      const json& a = s[k];
      if (!a.is_array() || a.empty()) return fail(ptr + "/" + k, fmt::format("{} must be a non-empty array", k));
      std::vector<std::string> out;
      for (size_t i = 0; i < a.size(); ++i) {
        auto e = visit(a[i], fmt::format("{}/{}/{}", ptr, k, i), fmt::format("{}-{}", hint, i));
        if (!e) return e;
        out.push_back(*e);
      }
      return rule(hint, alts(out));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), [](const json& x) { return x.is_string(); })) {
        for (const auto& x : t) types.push_back(x.get<std::string>());
      } else {
        return fail(ptr + "/type", "type must be a string or a non-empty array of strings");
      }
    } else {
      auto any_of = [&](const std::set<std::string, std::less<>>& keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return s.contains(k); });
      };
      if (any_of(kObjectKeys)) types.push_back("object");
      if (any_of(kArrayKeys)) types.push_back("array");
      if (any_of(kStringKeys)) types.push_back("string");
      if (any_of(kNumberKeys)) types.push_back("number");
      if (types.size() > 1) return fail(ptr, "keywords of several types and no 'type': say which type");
      if (types.empty()) return prim("value");
    }
    std::vector<std::string> out;
    for (const auto& t : types) {
      auto e = visit_type(s, t, ptr, types.size() == 1 ? hint : hint + "-" + t);
      if (!e) return e;
      out.push_back(*e);
    }
    return out.size() == 1 ? out[0] : rule(hint, alts(out));
  }

  Expected<std::string> visit_type(const json& s, const std::string& t, const std::string& ptr, const std::string& hint) {
    if (t == "string") return string_schema(s, ptr, hint);
    if (t == "integer" || t == "number") return number_schema(s, t == "integer", ptr, hint);
    if (t == "boolean" || t == "null") return prim(t);
    if (t == "object") return object_schema(s, ptr, hint);
    if (t == "array") return array_schema(s, ptr, hint);
    return fail(ptr + "/type", fmt::format("unknown type '{}'", t));
  }

  Expected<int> count(const json& s, const char* key, const std::string& ptr, int dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return fail(ptr + "/" + key, fmt::format("{} must be a non-negative integer", key));
    if (v.get<int64_t>() > 4096) return fail(ptr + "/" + key, fmt::format("{} {} is above the supported 4096", key, v.get<int64_t>()));
    return static_cast<int>(v.get<int64_t>());
  }

  Expected<std::string> string_schema(const json& s, const std::string& ptr, const std::string& hint) {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      const json& f = s["format"];
      if (s.contains("pattern") || lengths) return fail(ptr, "format beside pattern, minLength or maxLength is not supported");
      const std::string name = f.is_string() ? f.get<std::string>() : "";
      if (name != "date" && name != "time" && name != "date-time" && name != "uuid")
        return fail(ptr + "/format", fmt::format("format '{}' is not supported (date, time, date-time, uuid are)", f.is_string() ? name : f.dump()));
      return rule(hint, "\"\\\"\" " + prim(name) + " \"\\\"\"");
    }
    if (s.contains("pattern")) {
      if (lengths) return fail(ptr, "pattern beside minLength or maxLength is not supported");
      if (!s["pattern"].is_string()) return fail(ptr + "/pattern", "pattern must be a string");
      auto g = schema::regex_to_gbnf(s["pattern"].get<std::string>(), prim("char"));
      if (!g) return fail(ptr + "/pattern", g.error().message);
      return rule(hint, "\"\\\"\" " + *g + " \"\\\"\"");
    }
    if (!lengths) return prim("string");
    auto lo = count(s, "minLength", ptr, 0);
    if (!lo) return lo.error();
    auto hi = count(s, "maxLength", ptr, -1);
    if (!hi) return hi.error();
    if (*hi >= 0 && *hi < *lo) return fail(ptr, "maxLength is below minLength");
    const std::string rep = *hi < 0 ? fmt::format("{{{},}}", *lo) : fmt::format("{{{},{}}}", *lo, *hi);
    return rule(hint, "\"\\\"\" " + prim("char") + rep + " \"\\\"\"");
  }

  Expected<std::string> number_schema(const json& s, bool integer, const std::string& ptr, const std::string& hint) {
    constexpr double kLimit = 1e15;
    std::optional<schema::Bound> lo, hi;
    for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(k)) continue;
      const json& v = s[k];
      if (!v.is_number()) return fail(ptr + "/" + k, fmt::format("{} must be a number (draft-4 boolean forms are not supported)", k));
      const double x = v.get<double>();
      if (!(std::fabs(x) <= kLimit)) return fail(ptr + "/" + k, fmt::format("{} {} is beyond the supported 1e15", k, v.dump()));
      const bool is_min = k[0] == 'm' ? k[1] == 'i' : k[9] == 'M' && k[10] == 'i';
      const bool open = k[0] == 'e';
      schema::Bound b;
      if (integer) {  // as an inclusive integral bound
        b.v = static_cast<int64_t>(is_min ? (open ? std::floor(x) + 1 : std::ceil(x)) : (open ? std::ceil(x) - 1 : std::floor(x)));
      } else {
        if (x != std::floor(x)) return fail(ptr + "/" + k, fmt::format("a non-integral bound on a number ({} {}) is not supported; integral bounds are", k, v.dump()));
        b = {static_cast<int64_t>(x), open};
      }
      auto& slot = is_min ? lo : hi;
      const bool stricter = !slot || (is_min ? (b.v > slot->v || (b.v == slot->v && b.open)) : (b.v < slot->v || (b.v == slot->v && b.open)));
      if (stricter) slot = b;
    }
    if (!lo && !hi) return prim(integer ? "integer" : "number");
    auto g = integer ? schema::int_range_gbnf(lo ? std::optional<int64_t>(lo->v) : std::nullopt, hi ? std::optional<int64_t>(hi->v) : std::nullopt)
                     : schema::number_range_gbnf(lo, hi);
    if (!g) return fail(ptr, fmt::format("the bounds admit no {}", integer ? "integer" : "number"));
    return rule(hint, *g);
  }

  // The contents of a JSON string that is none of `keys` (each of plain characters).
  Expected<std::string> other_key(const std::vector<std::string>& keys, const std::string& ptr, const std::string& hint) {
    struct Node {
      std::map<std::string, int> kids;  // one UTF-8 character -> node
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const auto& k : keys) {
      int n = 0;
      for (size_t i = 0; i < k.size();) {
        const auto c = static_cast<unsigned char>(k[i]);
        if (c < 0x20 || c == '"' || c == '\\')
          return fail(ptr, fmt::format("additional properties beside the property name {} (with a character JSON escapes) are not supported", json(k).dump()));
        const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
        const std::string ch = k.substr(i, len);
        i += len;
        auto it = trie[static_cast<size_t>(n)].kids.find(ch);
        if (it == trie[static_cast<size_t>(n)].kids.end()) {
          trie.emplace_back();
          it = trie[static_cast<size_t>(n)].kids.emplace(ch, static_cast<int>(trie.size() - 1)).first;
        }
        n = it->second;
      }
      trie[static_cast<size_t>(n)].terminal = true;
    }
    const std::string chr = prim("char");
    std::vector<std::string> names(trie.size());
    for (size_t n = 0; n < trie.size(); ++n) names[n] = unique(hint + "-other-key");
    for (size_t n = 0; n < trie.size(); ++n) {
      std::vector<std::string> a;
      if (!trie[n].terminal) a.push_back("");
      std::string excluded = "\"\\\\\\x00-\\x1F";
      for (const auto& [ch, kid] : trie[n].kids) {
        a.push_back(gbnf_literal(ch) + " " + names[static_cast<size_t>(kid)]);
        excluded += schema::gbnf_class_chars(ch);
      }
      a.push_back("([^" + excluded + "] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})) " + chr + "*");
      rules_.emplace_back(names[n], alts(a));
    }
    return names[0];
  }

  Expected<std::string> object_schema(const json& s, const std::string& ptr, const std::string& hint) {
    const std::string ws = prim("ws");
    struct Prop {
      std::string key;
      const json* schema;
      std::string ptr;
      bool required = false;
    };
    std::vector<Prop> props;
    static const json kAny = true;
    if (s.contains("properties")) {
      const json& p = s["properties"];
      if (!p.is_object()) return fail(ptr + "/properties", "properties must be an object");
      for (auto it = p.begin(); it != p.end(); ++it) props.push_back({it.key(), &it.value(), ptr + "/properties/" + pointer_token(it.key())});
    }
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) return fail(ptr + "/required", "required must be an array of strings");
      for (const auto& k : r) {
        if (!k.is_string()) return fail(ptr + "/required", "required must be an array of strings");
        auto it = std::find_if(props.begin(), props.end(), [&](const Prop& p) { return p.key == k.get<std::string>(); });
        if (it == props.end()) {
          props.push_back({k.get<std::string>(), &kAny, ptr + "/required", true});
        } else {
          it->required = true;
        }
      }
    }
    const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    const bool extra_allowed = extra ? !(extra->is_boolean() && !extra->get<bool>()) : !s.contains("properties");
    std::string extra_member;
    if (extra_allowed) {
      auto v = extra ? visit(*extra, ptr + "/additionalProperties", hint + "-additional") : Expected<std::string>(prim("value"));
      if (!v) return v;
      std::vector<std::string> keys;
      for (const auto& p : props) keys.push_back(p.key);
      std::string key = prim("string");
      if (!keys.empty()) {
        auto other = other_key(keys, ptr + "/additionalProperties", hint);
        if (!other) return other;
        key = "\"\\\"\" " + *other + " \"\\\"\"";
      }
      extra_member = rule(hint + "-additional-kv", key + " " + ws + " \":\" " + ws + " " + *v + " " + ws);
    }
    if (props.empty() && extra_allowed && (!extra || extra->is_boolean())) return prim("object");
    std::string first = extra_allowed ? fmt::format("({} (\",\" {} {})*)?", extra_member, ws, extra_member) : "";
    std::string rest = extra_allowed ? fmt::format("(\",\" {} {})*", ws, extra_member) : "";
    for (size_t i = props.size(); i-- > 0;) {
      const Prop& p = props[i];
      auto v = visit(*p.schema, p.ptr, hint + "-" + p.key);
      if (!v) return v;
      const std::string member = gbnf_literal(json(p.key).dump()) + " " + ws + " \":\" " + ws + " " + *v + " " + ws;
      const std::string after = rest.empty() ? "" : " " + rest;
      std::string f = member + after, r = "\",\" " + ws + " " + member + after;
      if (!p.required) {
        f = rule(hint + "-first-" + p.key, alts({f, first}));
        r = rule(hint + "-rest-" + p.key, alts({r, rest}));
      }
      first = std::move(f);
      rest = std::move(r);
    }
    return rule(hint, "\"{\" " + ws + " " + first + (first.empty() ? "" : " ") + "\"}\"");
  }

  Expected<std::string> array_schema(const json& s, const std::string& ptr, const std::string& hint) {
    const std::string ws = prim("ws");
    if (s.contains("uniqueItems") && !(s["uniqueItems"].is_boolean() && !s["uniqueItems"].get<bool>()))
      return fail(ptr + "/uniqueItems", "uniqueItems: true cannot be enforced by a grammar");
    static const json kAny = true;
    const json* prefix = nullptr;
    const json* rest = &kAny;
    std::string prefix_ptr, rest_ptr = ptr + "/items";
    if (s.contains("prefixItems")) {
      prefix = &s["prefixItems"];
      prefix_ptr = ptr + "/prefixItems";
      if (s.contains("items")) rest = &s["items"];
      if (s.contains("additionalItems")) return fail(ptr + "/additionalItems", "additionalItems beside prefixItems: use items");
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix = &s["items"];
      prefix_ptr = ptr + "/items";
      if (s.contains("additionalItems")) {
        rest = &s["additionalItems"];
        rest_ptr = ptr + "/additionalItems";
      }
    } else if (s.contains("items")) {
      rest = &s["items"];
    }
    if (prefix && !prefix->is_array()) return fail(prefix_ptr, "prefixItems must be an array of schemas");
    const int k = prefix ? static_cast<int>(prefix->size()) : 0;
    const bool rest_allowed = !(rest->is_boolean() && !rest->get<bool>());
    auto m = count(s, "minItems", ptr, 0);
    if (!m) return m.error();
    auto mx = count(s, "maxItems", ptr, -1);
    if (!mx) return mx.error();
    int max_n = *mx;
    if (!rest_allowed) max_n = max_n < 0 ? k : std::min(max_n, k);
    if (max_n >= 0 && *m > max_n) return fail(ptr, "minItems is above the number of items the schema allows");
    std::vector<std::string> elems;
    for (int i = 0; i < k; ++i) {
      auto e = visit((*prefix)[static_cast<size_t>(i)], fmt::format("{}/{}", prefix_ptr, i), fmt::format("{}-{}", hint, i));
      if (!e) return e;
      elems.push_back(*e);
    }
    std::string item;
    if (rest_allowed && (max_n < 0 || max_n > k)) {
      auto e = visit(*rest, rest_ptr, hint + "-item");
      if (!e) return e;
      item = *e;
    }
    // tail(i): the elements after the first i, which are written.
    std::function<std::string(int)> tail = [&](int i) -> std::string {
      if (max_n >= 0 && i >= max_n) return "";
      if (i >= k) {
        const int lo = std::max(0, *m - i);
        const std::string one = fmt::format("(\",\" {} {} {})", ws, item, ws);
        if (max_n < 0) return lo == 0 ? one + "*" : fmt::format("{}{{{},}}", one, lo);
        return fmt::format("{}{{{},{}}}", one, lo, max_n - i);
      }
      const std::string next = tail(i + 1);
      const std::string inner = fmt::format("\",\" {} {} {}{}", ws, elems[static_cast<size_t>(i)], ws, next.empty() ? "" : " " + next);
      return i >= *m ? "(" + inner + ")?" : inner;
    };
    if (max_n == 0) return rule(hint, "\"[\" " + ws + " \"]\"");
    const std::string next = tail(1);
    std::string inner = (k > 0 ? elems[0] : item) + " " + ws + (next.empty() ? "" : " " + next);
    if (*m == 0) inner = "(" + inner + ")?";
    return rule(hint, "\"[\" " + ws + " " + inner + " \"]\"");
  }

  // allOf: the schema with every branch's keywords merged in (object schemas: properties and
  // required are united; any other keyword must agree).
  Expected<json> merge_all_of(const json& s, const std::string& ptr) {
    json merged = json::object();
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != "allOf") merged[it.key()] = it.value();
    const json& branches = s["allOf"];
    if (!branches.is_array() || branches.empty()) return fail(ptr + "/allOf", "allOf must be a non-empty array");
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bptr = fmt::format("{}/allOf/{}", ptr, i);
      const json* b = &branches[i];
      for (int hops = 0; b->is_object() && b->contains("$ref"); ++hops) {
        if (hops > 32) return fail(bptr, "a chain of more than 32 $refs");
        auto t = resolve((*b)["$ref"].is_string() ? (*b)["$ref"].get<std::string>() : "", bptr);
        if (!t) return t.error();
        b = *t;
      }
      json branch = *b;
      if (branch.is_boolean()) {
        if (branch.get<bool>()) continue;
        return fail(bptr, "the schema false matches nothing");
      }
      if (!branch.is_object()) return fail(bptr, "a schema must be an object or a boolean");
      if (branch.contains("allOf")) {
        auto inner = merge_all_of(branch, bptr);
        if (!inner) return inner;
        branch = std::move(*inner);
      }
      for (auto it = branch.begin(); it != branch.end(); ++it) {
        const std::string& key = it.key();
        if (kAnnotations.count(key)) continue;
        if (key == "properties") {
          if (!it.value().is_object()) return fail(bptr + "/properties", "properties must be an object");
          json& props = merged["properties"];
          if (props.is_null()) props = json::object();
          for (auto p = it.value().begin(); p != it.value().end(); ++p) {
            if (props.contains(p.key()) && props[p.key()] != p.value())
              return fail(bptr + "/properties/" + pointer_token(p.key()), "a property that two allOf branches define differently is not supported");
            props[p.key()] = p.value();
          }
        } else if (key == "required") {
          json& req = merged["required"];
          if (req.is_null()) req = json::array();
          for (const auto& r : it.value())
            if (std::find(req.begin(), req.end(), r) == req.end()) req.push_back(r);
        } else if (merged.contains(key) && merged[key] != it.value()) {
          return fail(bptr + "/" + key, fmt::format("'{}' differs between allOf branches; merging it is not supported", key));
        } else {
          merged[key] = it.value();
        }
      }
    }
    return merged;
  }
};

// The converter walks a schema recursively (several frames per level); a schema nested past
// this many JSON levels is refused before the walk, so a request cannot overflow the stack (a
// 30000-level `format` crashed the server). Real schemas stay within a few dozen.
constexpr int kMaxSchemaDepth = 256;

// The deepest nesting of objects and arrays in s, counted without recursion; stops counting
// past `limit`.
int schema_depth(const json& s, int limit) {
  std::vector<std::pair<const json*, int>> stack{{&s, 1}};
  int deepest = 0;
  while (!stack.empty()) {
    auto [v, d] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d);
    if (deepest > limit) return deepest;
    for (const auto& c : *v) stack.emplace_back(&c, d + 1);
  }
  return deepest;
}

std::optional<Error> check_depth(const json& s, const std::string& where) {
  if (schema_depth(s, kMaxSchemaDepth) > kMaxSchemaDepth)
    return make_error("json-schema{}: nested more than {} levels deep (objects and arrays), the most this converter takes",
                      where, kMaxSchemaDepth);
  return std::nullopt;
}

}  // namespace

Expected<std::string> json_schema_to_gbnf(std::string_view schema_json) { return json_schema_rules(schema_json, "root", {}); }

Expected<std::string> json_schema_rules(std::string_view schema_json, const std::string& root_name,
                                        const std::vector<std::string>& reserved) {
  json schema;
  try {
    schema = json::parse(schema_json);
  } catch (const json::exception& e) {
    return make_error("json-schema: not valid JSON: {}", e.what());
  }
  if (auto e = check_depth(schema, "")) return *e;
  auto text = Converter(schema, root_name, reserved).run();
  if (!text) return text;
  const std::string check = root_name == "root" ? *text : "root ::= " + root_name + "\n" + *text;
  if (auto g = parse_gbnf(check); !g) {
    if (g.error().message.find("left recursion") != std::string::npos || g.error().message.find("matches nothing") != std::string::npos)
      return make_error("json-schema: the schema refers to itself before any text is written ({})", g.error().message);
    return make_error("json-schema: internal error: the grammar made from the schema does not parse ({})", g.error().message);
  }
  return text;
}

void rebase_schema_refs(nlohmann::ordered_json& s, const std::string& def) {
  if (s.is_object()) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() == "$ref" && it.value().is_string()) {
        const std::string ref = it.value().get<std::string>();
        if (ref == "#") it.value() = "#/$defs/" + def;
        else if (ref.starts_with("#/")) it.value() = "#/$defs/" + def + ref.substr(1);
      } else {
        rebase_schema_refs(it.value(), def);
      }
    }
  } else if (s.is_array()) {
    for (auto& v : s) rebase_schema_refs(v, def);
  }
}

Expected<std::string> json_schema_rules_many(const std::vector<std::string>& schemas_json, const std::vector<std::string>& roots,
                                             const std::vector<std::string>& reserved) {
  MINFER_ASSERT(schemas_json.size() == roots.size());
  json all = {{"$defs", json::object()}};
  std::vector<std::string> keys, names = reserved;
  for (size_t i = 0; i < schemas_json.size(); ++i) {
    json schema;
    try {
      schema = json::parse(schemas_json[i]);
    } catch (const json::exception& e) {
      return make_error("json-schema {}: not valid JSON: {}", i, e.what());
    }
    if (auto e = check_depth(schema, fmt::format(" {}", i))) return *e;
    keys.push_back(fmt::format("s{}", i));
    rebase_schema_refs(schema, keys.back());
    all["$defs"][keys.back()] = std::move(schema);
    names.push_back(roots[i]);
  }
  auto text = Converter(all, "root", names).run_defs(keys, roots);
  if (!text) return text;
  std::string check = "root ::= " + (roots.empty() ? std::string("\"\"") : roots[0]) + "\n";
  for (size_t i = 1; i < roots.size(); ++i) check += "x-" + roots[i] + " ::= " + roots[i] + "\n";
  if (auto g = parse_gbnf(check + *text); !g)
    return make_error("json-schema: internal error: the grammar made from the schemas does not parse ({})", g.error().message);
  return text;
}

std::string json_value_gbnf(bool object_only) {
  const json none = json::object();
  return Converter(none).any(object_only);
}

}  // namespace minfer
