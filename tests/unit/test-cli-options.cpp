// parse_memory_size: the sizes --models-memory takes, and the errors that name the value.
#include <gtest/gtest.h>

#include "cli/options.h"

using minfer::cli::parse_memory_size;

TEST(MemorySize, BytesAndBinaryUnits) {
  EXPECT_EQ(*parse_memory_size("800000000"), 800000000u);
  EXPECT_EQ(*parse_memory_size("512K"), 512u * 1024);
  EXPECT_EQ(*parse_memory_size("1536M"), 1536ull << 20);
  EXPECT_EQ(*parse_memory_size("12G"), 12ull << 30);
  EXPECT_EQ(*parse_memory_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*parse_memory_size("2gb"), 2ull << 30);
  EXPECT_EQ(*parse_memory_size("1T"), 1ull << 40);
  EXPECT_EQ(*parse_memory_size("64B"), 64u);
}

TEST(MemorySize, RefusedWithTheValueNamed) {
  for (const char* bad : {"", "G", "-1G", "0", "12X", "12 G", "1e30", "abc", "12iB"}) {
    auto r = parse_memory_size(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos) << r.error().message;
  }
}
