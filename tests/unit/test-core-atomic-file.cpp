// write_file_atomic (core/atomic-file.h): whole files only, and writers of one path at once (two
// requests saving the same slot file) each get a temporary file of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic-file.h"

namespace minfer {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(AtomicFile, ConcurrentWritersOfOnePathAllSucceedAndOneWholeFileRemains) {
  const auto dir = std::filesystem::temp_directory_path() / ("minfer-atomic-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "slot.bin").string();
  std::vector<std::string> contents;
  for (int i = 0; i < 8; ++i) contents.push_back(std::string(100000 + i, static_cast<char>('a' + i)));
  std::vector<Status> results(contents.size());
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> writers;
    for (size_t i = 0; i < contents.size(); ++i)
      writers.emplace_back([&, i] { results[i] = write_file_atomic(path, contents[i]); });
    for (auto& t : writers) t.join();
    for (const Status& st : results) ASSERT_TRUE(st) << st.error().message;
    const std::string got = read_all(path);
    EXPECT_NE(std::find(contents.begin(), contents.end(), got), contents.end()) << "a mixed or cut file of " << got.size() << " bytes";
  }
  size_t n_files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n_files;
  EXPECT_EQ(n_files, 1u) << "temporary files left behind";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace minfer
