// Python methods of list, tuple and dict. In the immutable sandbox (transformers' default)
// the mutating ones (append, pop, update...) are refused as jinja2 refuses them: the
// attribute is "unsafe" and calling it is a security error.
#include <algorithm>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/filters-impl.h"
#include "template/interp.h"

namespace minfer::jinja {
namespace {

int64_t norm_index(int64_t i, size_t n) { return i < 0 ? i + static_cast<int64_t>(n) : i; }

Value l_append(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("append", a, {"*object"});
  in.check_size(self.items().size() + 1);
  self.items().push_back(b.v[0]);
  return Value::none();
}

Value l_extend(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("extend", a, {"*iterable"});
  ValueList more = in.iterate(b.v[0]);
  in.check_size(self.items().size() + more.size());
  self.items().insert(self.items().end(), more.begin(), more.end());
  return Value::none();
}

Value l_insert(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("insert", a, {"*index", "*object"});
  ValueList& items = self.items();
  in.check_size(items.size() + 1);
  int64_t i = norm_index(to_index(b.v[0], "index"), items.size());
  i = std::clamp<int64_t>(i, 0, static_cast<int64_t>(items.size()));
  items.insert(items.begin() + i, b.v[1]);
  return Value::none();
}

Value l_pop(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("pop", a, {"index"});
  ValueList& items = self.items();
  if (items.empty()) fail(ErrorKind::kType, "pop from empty list");
  const int64_t i = b.has(0) ? norm_index(to_index(b.v[0], "index"), items.size()) : static_cast<int64_t>(items.size()) - 1;
  if (i < 0 || i >= static_cast<int64_t>(items.size())) fail(ErrorKind::kType, "pop index out of range");
  Value v = items[static_cast<size_t>(i)];
  items.erase(items.begin() + i);
  return v;
}

Value l_remove(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("remove", a, {"*value"});
  ValueList& items = self.items();
  for (size_t i = 0; i < items.size(); ++i) {
    if (values_equal(items[i], b.v[0])) {
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
      return Value::none();
    }
  }
  fail(ErrorKind::kType, "list.remove(x): x not in list");
}

Value l_clear(Interp&, const Value& self, CallArgs& a) {
  bind_args("clear", a, {});
  self.items().clear();
  return Value::none();
}

Value l_copy(Interp&, const Value& self, CallArgs& a) {
  bind_args("copy", a, {});
  return Value::list(self.items());
}

Value l_count(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("count", a, {"*value"});
  return Value(static_cast<int64_t>(std::count_if(self.items().begin(), self.items().end(),
                                                  [&](const Value& x) { return values_equal(x, b.v[0]); })));
}

Value l_index(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("index", a, {"*value", "start", "stop"});
  const ValueList& items = self.items();
  const auto n = static_cast<int64_t>(items.size());
  auto clamp = [n](int64_t x) { return x < 0 ? std::max<int64_t>(0, x + n) : std::min(x, n); };
  const int64_t start = b.has(1) ? clamp(to_index(b.v[1], "start")) : 0;
  const int64_t stop = b.has(2) ? clamp(to_index(b.v[2], "stop")) : n;
  for (int64_t i = start; i < stop; ++i)
    if (values_equal(items[static_cast<size_t>(i)], b.v[0])) return Value(i);
  fail(ErrorKind::kType, fmt::format("{} is not in {}", b.v[0].repr(), self.is_tuple() ? "tuple" : "list"));
}

Value l_reverse(Interp&, const Value& self, CallArgs& a) {
  bind_args("reverse", a, {});
  std::reverse(self.items().begin(), self.items().end());
  return Value::none();
}

Value l_sort(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("sort", a, {"key", "reverse"});
  if (b.has(0) && !b.v[0].is_none()) fail(ErrorKind::kUnsupported, "list.sort(key=...) is not supported");
  sort_values(in, self.items(), [](const Value& x) { return x; }, b.has(1) && b.v[1].truthy());
  return Value::none();
}

Value d_keys(Interp&, const Value& self, CallArgs& a) {
  bind_args("keys", a, {});
  ValueList out;
  for (const auto& [k, v] : self.dict_obj().entries()) out.push_back(k);
  return Value::view(std::move(out), "dict_keys");
}

Value d_values(Interp&, const Value& self, CallArgs& a) {
  bind_args("values", a, {});
  ValueList out;
  for (const auto& [k, v] : self.dict_obj().entries()) out.push_back(v);
  return Value::view(std::move(out), "dict_values");
}

Value d_items(Interp&, const Value& self, CallArgs& a) {
  bind_args("items", a, {});
  ValueList out;
  for (const auto& [k, v] : self.dict_obj().entries()) out.push_back(Value::tuple({k, v}));
  return Value::view(std::move(out), "dict_items");
}

Value d_get(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("get", a, {"*key", "default"});
  if (const Value* v = self.dict_obj().find(b.v[0])) return *v;
  return b.get(1, Value::none());
}

Value d_copy(Interp&, const Value& self, CallArgs& a) {
  bind_args("copy", a, {});
  Value out = Value::dict();
  for (const auto& [k, v] : self.dict_obj().entries()) out.dict_obj().set(k, v);
  return out;
}

Value d_pop(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("pop", a, {"*key", "default"});
  if (const Value* v = self.dict_obj().find(b.v[0])) {
    Value out = *v;
    self.dict_obj().erase(b.v[0]);
    return out;
  }
  if (b.has(1)) return b.v[1];
  fail(ErrorKind::kType, fmt::format("KeyError: {}", b.v[0].repr()));
}

Value d_popitem(Interp&, const Value& self, CallArgs& a) {
  bind_args("popitem", a, {});
  if (self.dict_obj().size() == 0) fail(ErrorKind::kType, "popitem(): dictionary is empty");
  auto last = self.dict_obj().entries().back();
  self.dict_obj().erase(last.first);
  return Value::tuple({last.first, last.second});
}

Value d_setdefault(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("setdefault", a, {"*key", "default"});
  if (const Value* v = self.dict_obj().find(b.v[0])) return *v;
  Value d = b.get(1, Value::none());
  self.dict_obj().set(b.v[0], d);
  return d;
}

Value d_update(Interp& in, const Value& self, CallArgs& a) {
  if (a.pos.size() > 1) type_error("update expected at most 1 argument");
  if (!a.pos.empty()) {
    const Value& other = a.pos[0];
    if (other.is_dict()) {
      auto entries = other.dict_obj().entries();
      for (const auto& [k, v] : entries) self.dict_obj().set(k, v);
    } else {
      for (const Value& pair : in.iterate(other)) {
        ValueList kv = in.iterate(pair);
        if (kv.size() != 2) type_error("dictionary update sequence element has wrong length; 2 is required");
        self.dict_obj().set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kw) self.dict_obj().set(k, v);
  in.check_size(self.dict_obj().size());
  return Value::none();
}

Value d_clear(Interp&, const Value& self, CallArgs& a) {
  bind_args("clear", a, {});
  self.dict_obj().clear();
  return Value::none();
}

const MethodDef kListMethods[] = {
    {"append", l_append, true}, {"extend", l_extend, true}, {"insert", l_insert, true},
    {"pop", l_pop, true}, {"remove", l_remove, true}, {"clear", l_clear, true},
    {"reverse", l_reverse, true}, {"sort", l_sort, true}, {"copy", l_copy, false},
    {"count", l_count, false}, {"index", l_index, false},
};
const MethodDef kTupleMethods[] = {{"count", l_count, false}, {"index", l_index, false}};
const MethodDef kDictMethods[] = {
    {"keys", d_keys, false}, {"values", d_values, false}, {"items", d_items, false},
    {"get", d_get, false}, {"copy", d_copy, false}, {"pop", d_pop, true},
    {"popitem", d_popitem, true}, {"setdefault", d_setdefault, true}, {"update", d_update, true},
    {"clear", d_clear, true},
};

template <size_t N>
Value bind(const MethodDef (&table)[N], const Value& receiver, const std::string& name, bool immutable) {
  for (const MethodDef& m : table) {
    if (name != m.name) continue;
    if (immutable && m.mutating)
      return Value::undefined(
          fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, receiver.type_name()));
    auto c = std::make_shared<Callable>();
    c->type = Callable::Type::kMethod;
    c->name = name;
    Method fn = m.fn;
    Value self = receiver;
    const bool mutating = m.mutating;
    c->fn = [fn, self, mutating](Interp& in, CallArgs& a) {
      Value out = fn(in, self, a);
      if (mutating) {
        in.track(self);
        if (self.is_list()) {
          ListObj& l = self.list_obj();
          for (const Value& x : a.pos) l.depth = std::max(l.depth, nesting_depth(x) + 1);
          check_nesting(l.depth);
        }
      }
      return out;
    };
    return Value::callable(std::move(c));
  }
  return Value();
}

}  // namespace

Value find_container_method(const Value& receiver, const std::string& name, bool immutable) {
  if (receiver.is_list() && receiver.list_obj().view.empty()) return bind(kListMethods, receiver, name, immutable);
  if (receiver.is_tuple()) return bind(kTupleMethods, receiver, name, immutable);
  if (receiver.is_dict()) return bind(kDictMethods, receiver, name, immutable);
  return Value();
}

}  // namespace minfer::jinja
