#include "hub/env.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "hub/http-client.h"

namespace minfer::hub {

std::string env_var(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string home_dir() {
  const std::string h = env_var("HOME");
  return h.empty() ? "." : h;
}

bool env_truthy(const char* name) {
  std::string l = env_var(name);
  for (char& c : l) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return l == "1" || l == "ON" || l == "YES" || l == "TRUE";
}

std::string read_trimmed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

int retry_base_ms() {
  const std::string e = env_var("MINFER_HTTP_RETRY_MS");
  return e.empty() ? 1000 : std::max(1, std::atoi(e.c_str()));
}

void backoff_sleep(int ms) {
  for (int slept = 0; slept < ms && !http_cancelled(); slept += 50)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, ms - slept)));
}

void with_retries(int max_tries, const std::function<bool(std::string* why)>& attempt) {
  int backoff = retry_base_ms();
  for (int t = 1;; ++t) {
    std::string why;
    if (attempt(&why) || t >= max_tries || http_cancelled()) return;
    std::fprintf(stderr, "%s; retrying in %.1f s\n", why.c_str(), backoff / 1000.0);
    backoff_sleep(backoff);
    backoff = std::min(backoff * 2, 30000);
  }
}

std::vector<std::filesystem::path> dir_entries(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::filesystem::path> tree_files(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2)) out.push_back(it->path());  // follows links; dangling ones drop out
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool safe_relative_path(std::string_view p) {
  if (p.empty() || p.front() == '/' || p.find('\\') != std::string_view::npos || p.find('\0') != std::string_view::npos)
    return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = p.find('/', start);
    const std::string_view seg = p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

}  // namespace minfer::hub
