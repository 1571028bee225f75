// GGUF writer -> reader round trips, split files, and corrupt-input handling.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "gguf/reader.h"
#include "gguf/writer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using S = GgufValue::Storage;

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / fmt::format("minfer-test-gguf-{}", ::getpid());
  fs::create_directories(d);
  return d;
}

// Removes the scratch folder when the test binary ends.
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(temp_dir(), ec);
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_all(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

GgufWriter sample_writer() {
  GgufWriter w;
  w.add("general.architecture", GgufValue::make_string("llama"));
  w.add("t.u8", GgufValue(S(uint8_t{200})));
  w.add("t.i8", GgufValue(S(int8_t{-100})));
  w.add("t.u16", GgufValue(S(uint16_t{60000})));
  w.add("t.i16", GgufValue(S(int16_t{-30000})));
  w.add("t.u32", GgufValue(S(uint32_t{4000000000u})));
  w.add("t.i32", GgufValue(S(int32_t{-2000000000})));
  w.add("t.f32", GgufValue(S(1.5f)));
  w.add("t.bool", GgufValue(S(true)));
  w.add("t.string", GgufValue::make_string(std::string("h\xc3\xa9llo\0x", 8)));
  w.add("t.u64", GgufValue(S(uint64_t{1} << 60)));
  w.add("t.i64", GgufValue(S(int64_t{-1} << 60)));
  w.add("t.f64", GgufValue(S(0.1)));
  w.add("t.strings", GgufValue::make_string_array({"a", "", "ccc"}));
  w.add("t.ints", GgufValue::make_array(GgufType::I32, {GgufValue(S(int32_t{1})), GgufValue(S(int32_t{-2}))}));
  w.add("t.nested", GgufValue::make_array(
                        GgufType::ARRAY,
                        {GgufValue::make_array(GgufType::U8, {GgufValue(S(uint8_t{7}))}),
                         GgufValue::make_string_array({"x", "y"}),
                         GgufValue::make_array(GgufType::F32, {})}));
  w.add("t.bools", GgufValue::make_array(GgufType::BOOL, {GgufValue(S(true)), GgufValue(S(false))}));
  w.add("t.u64s", GgufValue(S(GgufArray::of(std::vector<uint64_t>{uint64_t{1} << 63, 5}))));
  w.add("t.f64s", GgufValue(S(GgufArray::of(std::vector<double>{0.25, -1e300}))));
  std::vector<uint8_t> a(4 * 8 * 3), b(18 * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(255 - i);
  w.add_tensor("w.a", DType::F32, {8, 3}, a);
  w.add_tensor("w.b", DType::Q4_0, {32, 2}, b);
  w.add_tensor("w.c", DType::F16, {5}, std::vector<uint8_t>(10, 0x3c));
  return w;
}

TEST(Gguf, RoundTripAllValueTypes) {
  const fs::path p = temp_dir() / "rt.gguf";
  ASSERT_TRUE(sample_writer().write(p.string()));
  auto f = GgufFile::open(p.string());
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_uint("t.u8"), 200u);
  EXPECT_EQ(*f->get_int("t.i8"), -100);
  EXPECT_EQ(*f->get_uint("t.u16"), 60000u);
  EXPECT_EQ(*f->get_int("t.i16"), -30000);
  EXPECT_EQ(*f->get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(*f->get_int("t.i32"), -2000000000);
  EXPECT_EQ(*f->get_float("t.f32"), 1.5);
  EXPECT_EQ(*f->get_bool("t.bool"), true);
  EXPECT_EQ(*f->get_string("t.string"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(*f->get_uint("t.u64"), uint64_t{1} << 60);
  EXPECT_EQ(*f->get_int("t.i64"), int64_t{-1} << 60);
  EXPECT_EQ(*f->get_float("t.f64"), 0.1);
  const GgufArray* strs = *f->get_array("t.strings");
  ASSERT_EQ(strs->size(), 3u);
  EXPECT_EQ(strs->string_at(2), "ccc");
  EXPECT_EQ(strs->string_at(1), "");
  EXPECT_EQ(*strs->at(0).as_string(), "a");
  EXPECT_EQ(strs->int_at(0), std::nullopt);
  EXPECT_EQ(f->find("t.strings")->to_display(), R"([string; 3] ["a", "", "ccc"])");
  const GgufArray* ints = *f->get_array("t.ints");
  EXPECT_EQ(ints->elem_type(), GgufType::I32);
  EXPECT_EQ(ints->int_at(1), -2);
  EXPECT_EQ(ints->float_at(0), 1.0);
  EXPECT_EQ(ints->at(1).type(), GgufType::I32);
  const GgufArray* nested = *f->get_array("t.nested");
  ASSERT_EQ(nested->elem_type(), GgufType::ARRAY);
  ASSERT_EQ(nested->size(), 3u);
  EXPECT_EQ(nested->array_at(0).as_array()->at(0).as_uint(), 7u);
  EXPECT_EQ(nested->array_at(1).as_array()->string_at(1), "y");
  EXPECT_TRUE(nested->array_at(2).as_array()->empty());
  EXPECT_EQ(nested->array_at(2).as_array()->elem_type(), GgufType::F32);
  const GgufArray* bools = *f->get_array("t.bools");
  EXPECT_EQ(bools->at(0).as_bool(), true);
  EXPECT_EQ(bools->at(1).as_bool(), false);
  EXPECT_EQ(bools->int_at(0), std::nullopt);  // as GgufValue::as_int: a bool is not an integer
  const GgufArray* u64s = *f->get_array("t.u64s");
  EXPECT_EQ(u64s->at(0).as_uint(), uint64_t{1} << 63);
  EXPECT_EQ(u64s->int_at(0), std::nullopt);  // does not fit in int64
  EXPECT_EQ(u64s->int_at(1), 5);
  EXPECT_EQ((*f->get_array("t.f64s"))->float_at(1), -1e300);

  ASSERT_EQ(f->tensors().size(), 3u);
  const GgufTensor* a = f->find_tensor("w.a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(a->n_bytes, 96u);
  EXPECT_EQ(a->data[5], static_cast<uint8_t>(35));
  const GgufTensor* b = f->find_tensor("w.b");
  EXPECT_EQ(b->offset % 32, 0u);
  EXPECT_EQ(b->n_bytes, 36u);
  EXPECT_EQ(b->data[0], 255);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % 32, 0u);  // zero-copy, aligned in the map
  // Wrong-type lookups name the key.
  auto bad = f->get_string("t.u8");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("t.u8"), std::string::npos);
  EXPECT_FALSE(f->get_uint("missing.key"));
}

// Reading a file and writing its metadata and tensors back gives the same bytes.
TEST(Gguf, ReadWriteIsByteIdentical) {
  const fs::path p = temp_dir() / "rw1.gguf", q = temp_dir() / "rw2.gguf";
  ASSERT_TRUE(sample_writer().write(p.string()));
  auto f = GgufFile::open(p.string());
  ASSERT_TRUE(f) << f.error().message;
  GgufWriter w;
  for (const GgufKV& kv : f->metadata()) w.add(kv.key, kv.value);
  for (const GgufTensor& t : f->tensors()) w.add_tensor_view(t.name, t.type, t.shape, t.data);
  ASSERT_TRUE(w.write(q.string()));
  EXPECT_EQ(read_all(p), read_all(q));
}

TEST(Gguf, ArrayBuilders) {
  const GgufArray s = GgufArray::strings({"ab", "", "c"});
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.text_bytes(), 3u);
  EXPECT_EQ(s.string_at(0), "ab");
  EXPECT_EQ(s.string_at(2), "c");
  GgufArray b = GgufArray::of(std::vector<bool>{true, false, true});
  EXPECT_EQ(b.elem_type(), GgufType::BOOL);
  EXPECT_EQ(b.scalar_bytes(), std::string_view("\x01\x00\x01", 3));
  b.push_back(GgufValue(S(false)));
  EXPECT_EQ(b.size(), 4u);
  const GgufArray f = GgufArray::of(std::vector<float>{1.5f, -2.0f});
  EXPECT_EQ(f.float_at(1), -2.0);
  EXPECT_EQ(GgufValue(S(f)).to_display(1), "[f32; 2] [1.5, ...]");
}

TEST(Gguf, CustomAlignment) {
  const fs::path p = temp_dir() / "align.gguf";
  GgufWriter w = sample_writer();
  w.set_alignment(64);
  ASSERT_TRUE(w.write(p.string()));
  auto f = GgufFile::open(p.string());
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->alignment(), 64u);
  for (const GgufTensor& t : f->tensors()) EXPECT_EQ(t.offset % 64, 0u);
  EXPECT_EQ(f->parts()[0].data_offset % 64, 0u);
}

TEST(Gguf, SplitRoundTrip) {
  const fs::path dir = temp_dir();
  auto paths = sample_writer().write_split((dir / "sp").string(), {.max_tensors = 1});
  ASSERT_TRUE(paths) << paths.error().message;
  ASSERT_EQ(paths->size(), 3u);
  EXPECT_EQ(fs::path((*paths)[1]).filename(), "sp-00002-of-00003.gguf");
  auto f = GgufFile::open((*paths)[0]);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->parts().size(), 3u);
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->tensors()[2].part, 2u);
  EXPECT_EQ(f->find_tensor("w.b")->data[1], 254);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  // Opening a later part is refused with a hint.
  auto later = GgufFile::open((*paths)[1]);
  ASSERT_FALSE(later);
  EXPECT_NE(later.error().message.find("first part"), std::string::npos);
  // A missing part is named.
  fs::remove((*paths)[2]);
  auto missing = GgufFile::open((*paths)[0]);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("part 3 of 3"), std::string::npos) << missing.error().message;
}

TEST(Gguf, SplitNames) {
  auto n = parse_split_name("/m/x-00002-of-00010.gguf");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->prefix, "/m/x");
  EXPECT_EQ(n->index, 2);
  EXPECT_EQ(n->count, 10);
  EXPECT_FALSE(parse_split_name("x-00011-of-00010.gguf"));
  EXPECT_FALSE(parse_split_name("x-0001-of-00010.gguf"));
  EXPECT_FALSE(parse_split_name("model.gguf"));
  EXPECT_EQ(make_split_name("a/b", 3, 12), "a/b-00003-of-00012.gguf");
}

TEST(Gguf, EveryTruncationIsAnError) {
  const fs::path p = temp_dir() / "trunc.gguf";
  ASSERT_TRUE(sample_writer().write(p.string()));
  const std::vector<uint8_t> bytes = read_all(p);
  // The last tensor ends before the final padding; anything cut before its end must fail.
  auto full = gguf_parse(bytes.data(), bytes.size(), "full");
  ASSERT_TRUE(full);
  const GgufTensor& last = full->tensors.back();
  const size_t needed = static_cast<size_t>(last.data - bytes.data()) + last.n_bytes;
  for (size_t n = 0; n < needed; ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    auto r = gguf_parse(cut.data(), cut.size(), "cut");
    ASSERT_FALSE(r) << "truncated to " << n << " bytes parsed";
    EXPECT_NE(r.error().message.find("'cut'"), std::string::npos);
  }
}

TEST(Gguf, RandomCorruptionNeverCrashes) {
  const fs::path p = temp_dir() / "corrupt.gguf";
  ASSERT_TRUE(sample_writer().write(p.string()));
  const std::vector<uint8_t> bytes = read_all(p);
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> m = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % 400 % m.size()] = static_cast<uint8_t>(rng());
    auto r = gguf_parse(m.data(), m.size(), "mut");
    if (!r) {
      ++rejected;
      continue;
    }
    for (const GgufTensor& t : r->tensors) {  // accepted: every view lies inside the buffer
      ASSERT_GE(t.data, m.data());
      ASSERT_LE(t.data + t.n_bytes, m.data() + m.size());
    }
  }
  EXPECT_GT(rejected, 1000);
}

struct BadCase {
  const char* what;
  std::vector<uint8_t> bytes;
  const char* expect;  // substring of the error
};

std::vector<uint8_t> header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
  std::vector<uint8_t> b(24);
  const uint32_t magic = kGgufMagic;
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, &version, 4);
  std::memcpy(b.data() + 8, &n_tensors, 8);
  std::memcpy(b.data() + 16, &n_kv, 8);
  return b;
}

template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof(T));
}

void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// A file of one key 'k' holding an array of n `elem`s; the caller appends the items.
std::vector<uint8_t> array_kv(GgufType elem, uint64_t n) {
  auto b = header(3, 0, 1);
  put_str(b, "k");
  put<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
  put<uint32_t>(b, static_cast<uint32_t>(elem));
  put<uint64_t>(b, n);
  return b;
}

TEST(Gguf, SpecificErrorsNameTheField) {
  std::vector<BadCase> cases;
  cases.push_back({"bad magic", {'G', 'G', 'U', 'X', 3, 0, 0, 0}, "bad magic"});
  cases.push_back({"v1", header(1, 0, 0), "version 1"});
  cases.push_back({"v4", header(4, 0, 0), "newer"});
  cases.push_back({"endianness", header(0x03000000, 0, 0), "endianness"});
  cases.push_back({"huge kv count", header(3, 0, int64_t{1} << 60), "metadata count"});
  cases.push_back({"negative tensors", header(3, -1, 0), "tensor count"});
  {
    auto b = header(3, 0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 99);
    cases.push_back({"bad value type", b, "invalid value type 99"});
  }
  {
    auto b = header(3, 0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 8);
    put<uint64_t>(b, 1000);
    cases.push_back({"string past end", b, "runs past end"});
  }
  cases.push_back({"array too long", array_kv(GgufType::U32, uint64_t{1} << 62), "array of"});
  {
    auto b = array_kv(GgufType::BOOL, 3);
    b.insert(b.end(), {1, 0, 2});
    cases.push_back({"bool array", b, "key 'k': bool value 2 is not 0 or 1"});
  }
  {
    auto b = array_kv(GgufType::STRING, 2);
    put_str(b, "ok");
    put<uint64_t>(b, 100);
    cases.push_back({"string item past end", b, "key 'k' string length 100 at offset 0x"});
  }
  {
    auto b = array_kv(GgufType::ARRAY, 1);  // an array of arrays of arrays...
    for (int d = 0; d < 9; ++d) {
      put<uint32_t>(b, static_cast<uint32_t>(GgufType::ARRAY));
      put<uint64_t>(b, 1);
    }
    b.resize(b.size() + 12, 0);
    cases.push_back({"nesting", b, "arrays nested deeper than 8"});
  }
  {
    auto b = header(3, 0, 1);
    put_str(b, "general.alignment");
    put<uint32_t>(b, 4);
    put<uint32_t>(b, 48);
    cases.push_back({"alignment", b, "not a power of two"});
  }
  {
    auto b = header(3, 0, 2);
    put_str(b, "k");
    put<uint32_t>(b, 0);
    put<uint8_t>(b, 1);
    put_str(b, "k");
    put<uint32_t>(b, 0);
    put<uint8_t>(b, 1);
    cases.push_back({"duplicate key", b, "duplicate metadata key 'k'"});
  }
  auto tensor = [](std::vector<uint8_t>& b, const std::string& name, std::vector<int64_t> ne,
                   uint32_t type, uint64_t off) {
    put_str(b, name);
    put<uint32_t>(b, static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) put<int64_t>(b, d);
    put<uint32_t>(b, type);
    put<uint64_t>(b, off);
  };
  {
    auto b = header(3, 1, 0);
    tensor(b, "t", {32}, 2, 0);
    b.resize(64 + 10, 0);
    cases.push_back({"tensor past end", b, "tensor 't' (18 bytes at data offset 0x0) ends at"});
  }
  {
    auto b = header(3, 1, 0);
    tensor(b, "t", {30}, 2, 0);
    b.resize(128, 0);
    cases.push_back({"block multiple", b, "not a multiple of the block size 32"});
  }
  {
    auto b = header(3, 1, 0);
    tensor(b, "t", {4}, 77, 0);
    cases.push_back({"unknown type", b, "unknown type id 77"});
  }
  {
    auto b = header(3, 1, 0);
    tensor(b, "t", {4, 4, 4, 4, 4}, 0, 0);
    cases.push_back({"dims", b, "5 dimensions"});
  }
  {
    auto b = header(3, 1, 0);
    tensor(b, "t", {int64_t{1} << 40, int64_t{1} << 40}, 0, 0);
    cases.push_back({"overflow", b, "overflows"});
  }
  {
    auto b = header(3, 2, 0);
    tensor(b, "a", {8}, 0, 0);
    tensor(b, "b", {8}, 0, 0);
    b.resize(256, 0);
    cases.push_back({"overlap", b, "overlap"});
  }
  {
    auto b = header(3, 1, 0);
    tensor(b, "a", {8}, 0, 4);
    b.resize(256, 0);
    cases.push_back({"misaligned", b, "not a multiple of the alignment"});
  }
  {
    // Found by the fuzzer: a zero-element tensor in a file with no data section must not get a
    // view past the end of the buffer.
    auto b = header(3, 1, 0);
    tensor(b, "empty", {32, 0}, 2, 0);
    auto r = gguf_parse(b.data(), b.size(), "zero.gguf");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_LE(r->tensors[0].data, b.data() + b.size());
  }
  for (const BadCase& c : cases) {
    auto r = gguf_parse(c.bytes.data(), c.bytes.size(), "bad.gguf");
    ASSERT_FALSE(r) << c.what;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
        << c.what << ": " << r.error().message;
    EXPECT_NE(r.error().message.find("'bad.gguf'"), std::string::npos) << c.what;
  }
}

TEST(Gguf, OpenErrorsNameTheFile) {
  auto r = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/dir/model.gguf"), std::string::npos);
  const fs::path empty = temp_dir() / "empty.gguf";
  write_all(empty, {});
  auto e = GgufFile::open(empty.string());
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("truncated"), std::string::npos) << e.error().message;
}

}  // namespace
}  // namespace minfer
