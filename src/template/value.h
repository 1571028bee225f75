// Values of the Jinja runtime, with Python semantics: what jinja2 sees after json.loads of the
// render arguments, plus the objects templates create (tuples, namespaces, macros, loop).
//
//   Value d = Value::dict();
//   d.dict_obj().set(Value("role"), Value("user"));
//   Value l = Value::list({Value(int64_t{1}), Value(2.5)});
//   l.to_str();            // "[1, 2.5]"   (Python str())
//   Value("a'b").repr();   // "\"a'b\""    (Python repr())
//
// Lists, dicts and namespaces have reference semantics (shared), like Python objects; strings
// are immutable and shared. Integers are int64: an overflow is an error, not a bignum.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace minfer::jinja {

class Value;
class Interp;
using ValueList = std::vector<Value>;

// A list, tuple or iterator body. `view` names a dict view or range when printed
// ("dict_keys([...])", "range(0, 3)"); an iterator (a jinja2 generator) is single-pass.
struct ListObj {
  ValueList items;
  int depth = 1;          // nesting depth of containers (bounded: see kMaxNesting)
  std::string view;      // "" | "dict_keys" | "dict_values" | "dict_items" | "range(a, b[, s])"
  bool consumed = false;  // iterators only
  // A generator whose body failed: jinja2 raises when it is iterated, not when it is made
  // (printing or testing it does not raise). Kind is an ErrorKind; empty message: none.
  int error_kind = 0;
  std::string error;
};

class DictObj;

// Containers nest at most this deep (JSON input, literals, values built in loops); repr,
// equality and tojson are bounded by it, and so is the stack of a value's destructor.
constexpr int kMaxNesting = 512;
int nesting_depth(const Value& v);    // 0 for scalars
void check_nesting(int depth);        // limit error past kMaxNesting

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Anything callable from a template: builtins, bound methods ('x'.upper), macros, loop().
struct Callable {
  enum class Type { kBuiltin, kMethod, kMacro };
  Type type = Type::kBuiltin;
  std::string name;
  std::function<Value(Interp&, CallArgs&)> fn;
};

struct LoopObj;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace,
    kIterator, kCallable, kLoop,
  };

  Value() = default;  // undefined, no hint
  explicit Value(bool b) : kind_(Kind::kBool), p_(b) {}
  explicit Value(int64_t i) : kind_(Kind::kInt), p_(i) {}
  explicit Value(int i) : kind_(Kind::kInt), p_(int64_t{i}) {}
  explicit Value(double f) : kind_(Kind::kFloat), p_(f) {}
  explicit Value(std::string s) : kind_(Kind::kString), p_(std::make_shared<const std::string>(std::move(s))) {}
  explicit Value(const char* s) : Value(std::string(s)) {}
  explicit Value(std::string_view s) : Value(std::string(s)) {}

  // An undefined value; `hint` is the message of the error its misuse raises.
  static Value undefined(std::string hint);
  static Value none();
  static Value markup(std::string s);  // jinja2 Markup (from |safe, |escape)
  static Value list(ValueList items = {});
  static Value tuple(ValueList items);
  static Value iterator(ValueList items);
  static Value view(ValueList items, std::string view);
  static Value dict();
  static Value dict(std::shared_ptr<DictObj> d);
  static Value ns();
  static Value callable(std::shared_ptr<Callable> c);
  static Value builtin(std::string name, std::function<Value(Interp&, CallArgs&)> fn);
  static Value loop(std::shared_ptr<LoopObj> l);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_iterator() const { return kind_ == Kind::kIterator; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_loop() const { return kind_ == Kind::kLoop; }

  bool get_bool() const { return std::get<bool>(p_); }
  int64_t get_int() const { return kind_ == Kind::kBool ? int64_t{std::get<bool>(p_)} : std::get<int64_t>(p_); }
  double as_double() const;  // any number
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(p_); }
  const std::string& undefined_hint() const;
  ListObj& list_obj() const { return *std::get<std::shared_ptr<ListObj>>(p_); }
  ValueList& items() const { return list_obj().items; }
  const std::shared_ptr<ListObj>& list_ptr() const { return std::get<std::shared_ptr<ListObj>>(p_); }
  DictObj& dict_obj() const { return *std::get<std::shared_ptr<DictObj>>(p_); }
  const std::shared_ptr<DictObj>& dict_ptr() const { return std::get<std::shared_ptr<DictObj>>(p_); }
  Callable& callable_obj() const { return *std::get<std::shared_ptr<Callable>>(p_); }
  LoopObj& loop_obj() const { return *std::get<std::shared_ptr<LoopObj>>(p_); }
  const void* identity() const;  // object identity for `is sameas` and hashing of objects

  bool truthy() const;
  std::string type_name() const;  // Python's type(x).__name__
  std::string to_str() const;      // Python str(x)
  std::string repr() const;        // Python repr(x)

 private:
  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<ListObj>, std::shared_ptr<DictObj>, std::shared_ptr<Callable>,
               std::shared_ptr<LoopObj>>
      p_;
};

// The Python hash identity of a key: equal keys (1, 1.0, True) give the same string;
// nullopt for unhashable values (lists, dicts).
std::optional<std::string> hash_key(const Value& v);

// Insertion-ordered dict with Python key equality.
class DictObj {
 public:
  const Value* find(const Value& key) const;  // type error for unhashable keys
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
  void set(std::string_view key, Value value) { set(Value(key), std::move(value)); }
  bool erase(const Value& key);
  void clear() { entries_.clear(); index_.clear(); }
  size_t size() const { return entries_.size(); }
  int depth() const { return depth_; }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;  // hash_key -> position in entries_
  int depth_ = 1;
};

// `loop` inside a for block.
struct LoopObj {
  std::shared_ptr<ListObj> items;  // the (filtered) sequence
  int64_t index0 = 0;
  int64_t depth0 = 0;
  Value recurse;   // callable for `loop(children)` in recursive loops; undefined otherwise
  Value last_changed;
  bool changed_called = false;
};

// A copy sharing nothing mutable with `v` (lists, tuples, dicts copied recursively).
Value deep_copy(const Value& v);

// Python ==, and <-style ordering (throws a type error for unorderable pairs).
bool values_equal(const Value& a, const Value& b);
int values_compare(const Value& a, const Value& b);

// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string float_repr(double f);
// Python repr() of a str.
std::string string_repr(std::string_view s);

}  // namespace minfer::jinja
