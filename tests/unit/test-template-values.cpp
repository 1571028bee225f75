// Values of the Jinja runtime: Python str()/repr(), float repr, equality and ordering, dict
// keys, JSON in (key order kept) and out (json.dumps byte for byte), Python str helpers.
#include <gtest/gtest.h>

#include <cmath>

#include "template/builtins.h"
#include "template/error.h"
#include "template/filters-impl.h"
#include "template/template.h"
#include "template/text.h"
#include "template/value.h"

namespace minfer::jinja {
namespace {

TEST(templateValues, FloatReprMatchesPython) {
  EXPECT_EQ(float_repr(1.0), "1.0");
  EXPECT_EQ(float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(float_repr(1e-5), "1e-05");
  EXPECT_EQ(float_repr(0.0001), "0.0001");
  EXPECT_EQ(float_repr(-0.0), "-0.0");
  EXPECT_EQ(float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(float_repr(123456789.123456789), "123456789.12345679");
  EXPECT_EQ(float_repr(INFINITY), "inf");
  EXPECT_EQ(float_repr(NAN), "nan");
}

TEST(templateValues, StrAndReprMatchPython) {
  EXPECT_EQ(Value::none().to_str(), "None");
  EXPECT_EQ(Value(true).to_str(), "True");
  EXPECT_EQ(Value().to_str(), "");  // undefined prints nothing
  Value l = Value::list({Value(int64_t{1}), Value("a'b"), Value::none(), Value(2.5), Value::tuple({Value(1)})});
  EXPECT_EQ(l.to_str(), "[1, \"a'b\", None, 2.5, (1,)]");
  Value d = Value::dict();
  d.dict_obj().set("k", Value("v\n"));
  d.dict_obj().set(Value(int64_t{2}), Value::list());
  EXPECT_EQ(d.to_str(), "{'k': 'v\\n', 2: []}");
  EXPECT_EQ(string_repr("\xc3\xa9\xc2\xa0\x01"), "'\xc3\xa9\\xa0\\x01'");  // é printable, nbsp not
  EXPECT_EQ(Value::markup("<b>").repr(), "Markup('<b>')");
  EXPECT_EQ(Value::view({Value(1)}, "dict_keys").to_str(), "dict_keys([1])");
}

TEST(templateValues, EqualityAndHashKeysFollowPython) {
  EXPECT_TRUE(values_equal(Value(int64_t{1}), Value(1.0)));
  EXPECT_TRUE(values_equal(Value(true), Value(int64_t{1})));
  EXPECT_FALSE(values_equal(Value::list({Value(1)}), Value::tuple({Value(1)})));
  EXPECT_TRUE(values_equal(Value(), Value()));  // Undefined == Undefined
  // 1, 1.0 and True are one dict key.
  DictObj d;
  d.set(Value(int64_t{1}), Value("int"));
  d.set(Value(1.0), Value("float"));
  d.set(Value(true), Value("bool"));
  EXPECT_EQ(d.size(), 1u);
  EXPECT_EQ(d.find(Value(int64_t{1}))->str(), "bool");
  EXPECT_THROW(d.set(Value::list(), Value()), JinjaError);  // unhashable
}

TEST(templateValues, OrderingRefusesMixedTypes) {
  EXPECT_LT(values_compare(Value("a"), Value("b")), 0);
  EXPECT_LT(values_compare(Value::list({Value(1), Value(2)}), Value::list({Value(1), Value(3)})), 0);
  EXPECT_GT(values_compare(Value(2.5), Value(int64_t{2})), 0);
  EXPECT_THROW(values_compare(Value("a"), Value(int64_t{1})), JinjaError);
  EXPECT_THROW(values_compare(Value::none(), Value::none()), JinjaError);
}

TEST(templateValues, NestingIsBounded) {
  Value v = Value::list();
  EXPECT_THROW(
      {
        for (int i = 0; i < kMaxNesting + 2; ++i) v = Value::list({v});
      },
      JinjaError);
}

TEST(templateValues, JsonInputKeepsKeyOrderAndTypes) {
  auto v = value_from_json(R"({"b": 1, "a": [1.0, 2, null, true, "x"], "c": {"z": 1, "y": 2}})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->to_str(), "{'b': 1, 'a': [1.0, 2, None, True, 'x'], 'c': {'z': 1, 'y': 2}}");
  EXPECT_FALSE(value_from_json("{oops"));
}

std::string dumps(std::string_view json, JsonOptions o = {}) { return json_dumps(*value_from_json(json), o); }

TEST(templateValues, JsonDumpsMatchesPython) {
  EXPECT_EQ(dumps(R"({"a": [1, 2.5, null], "b": "\u00e9\n\"", "c": {}})"),
            "{\"a\": [1, 2.5, null], \"b\": \"\xc3\xa9\\n\\\"\", \"c\": {}}");
  JsonOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(dumps(R"(["\u00e9\ud83d\ude00\u007f"])", ascii), "[\"\\u00e9\\ud83d\\ude00\\u007f\"]");
  JsonOptions indent;
  indent.has_indent = true;
  indent.indent = "  ";
  indent.item_sep = ",";
  EXPECT_EQ(dumps(R"({"a": [1, []], "b": {}})", indent), "{\n  \"a\": [\n    1,\n    []\n  ],\n  \"b\": {}\n}");
  JsonOptions sorted;
  sorted.sort_keys = true;
  sorted.item_sep = ",";
  sorted.key_sep = ":";
  EXPECT_EQ(dumps(R"({"b": 1, "a": 2})", sorted), "{\"a\":2,\"b\":1}");
  EXPECT_EQ(dumps("[1e16, 1.0, 0.5]"), "[1e+16, 1.0, 0.5]");
  EXPECT_THROW(json_dumps(Value(), {}), JinjaError);  // Undefined is not serializable
}

TEST(templateValues, PythonStringHelpers) {
  EXPECT_EQ(py_strip("  a b \t\n", true, true, nullptr), "a b");
  std::string chars = "xy";
  EXPECT_EQ(py_strip("xyaxy", true, false, &chars), "axy");
  EXPECT_EQ(py_split("a,b,,c", ","), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(py_rsplit("a,b,c", ",", 1), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_EQ(py_split_ws(" a  b c ", 1, false), (std::vector<std::string>{"a", "b c "}));
  EXPECT_EQ(py_splitlines("a\r\nb\rc\n", false), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(py_replace("abc", "", "-", -1), "-a-b-c-");
  EXPECT_EQ(jinja_title("hello wORLD-foo(bar"), "Hello World-Foo(Bar");
  EXPECT_EQ(py_title("they're bill's"), "They'Re Bill'S");
  EXPECT_EQ(str_upper("stra\xc3\x9f" "e \xc3\xa9"), "STRASSE \xc3\x89");
  EXPECT_EQ(parse_py_int(" -1_000 ", 10).value(), -1000);
  EXPECT_EQ(parse_py_int("0x1f", 0).value(), 31);
  EXPECT_FALSE(parse_py_int("1.5", 10));
  EXPECT_DOUBLE_EQ(parse_py_float(" 1e3 ").value(), 1000.0);
  EXPECT_FALSE(parse_py_float("1e"));
  EXPECT_EQ(py_round(Value(2.675), 2).to_str(), "2.67");  // the binary value is below 2.675
  EXPECT_EQ(py_round(Value(2.5), 0).to_str(), "2.0");      // half to even
}

TEST(templateValues, Utf8Helpers) {
  EXPECT_EQ(utf8_length("h\xc3\xa9llo \xf0\x9f\x98\x80"), 7u);
  EXPECT_EQ(utf8_invalid_at("ok\xc3"), 2u);
  EXPECT_EQ(utf8_invalid_at("\xed\xa0\x80"), 0u);  // a surrogate
  EXPECT_EQ(utf8_invalid_at("fine \xe2\x9c\x93"), std::string_view::npos);
}

}  // namespace
}  // namespace minfer::jinja
