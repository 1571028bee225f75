#include "hub/gguf-pick.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace minfer::hub {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// TAG followed by '.' or '-' anywhere in the path, ignoring case.
bool tag_matches(const std::string& path, const std::string& tag) {
  const std::string p = lower(path), t = lower(tag);
  for (size_t at = p.find(t); at != std::string::npos; at = p.find(t, at + 1)) {
    const size_t end = at + t.size();
    if (end < p.size() && (p[end] == '.' || p[end] == '-')) return true;
  }
  return false;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A picked first part and every part of its split.
Expected<GgufPick> with_parts(const std::vector<std::string>& files, const std::string& first) {
  GgufPick pick;
  const GgufSplitName s = gguf_split_name(first);
  pick.tag = s.tag;
  if (s.count <= 1) {
    pick.files = {first};
    return pick;
  }
  for (int i = 1; i <= s.count; ++i) {
    const std::string part = fmt::format("{}-{:05d}-of-{:05d}.gguf", s.prefix, i, s.count);
    if (std::find(files.begin(), files.end(), part) == files.end())
      return make_error("split model '{}' has {} parts but '{}' is missing", first, s.count, part);
    pick.files.push_back(part);
  }
  return pick;
}

bool first_part(const std::string& path) { return gguf_split_name(path).index == 1; }

}  // namespace

GgufSplitName gguf_split_name(const std::string& path) {
  GgufSplitName s;
  const std::string lp = lower(path);
  if (!lp.ends_with(".gguf")) return s;
  s.is_gguf = true;
  std::string prefix = path.substr(0, path.size() - 5);
  // "-00001-of-00003"
  if (prefix.size() > 15) {
    const std::string tail = prefix.substr(prefix.size() - 15);
    if (tail[0] == '-' && lower(tail.substr(6, 4)) == "-of-" && all_digits(tail.substr(1, 5)) && all_digits(tail.substr(10, 5))) {
      s.index = std::stoi(tail.substr(1, 5));
      s.count = std::stoi(tail.substr(10, 5));
      prefix = prefix.substr(0, prefix.size() - 15);
    }
  }
  s.prefix = prefix;
  // The trailing [-.]TAG of the file name part ([A-Za-z0-9_]+).
  const std::string name = base_name(prefix);
  size_t i = name.size();
  while (i > 0 && (std::isalnum(static_cast<unsigned char>(name[i - 1])) || name[i - 1] == '_')) --i;
  if (i > 0 && i < name.size() && (name[i - 1] == '-' || name[i - 1] == '.')) s.tag = upper(name.substr(i));
  return s;
}

bool gguf_is_model_file(const std::string& path) {
  if (!lower(path).ends_with(".gguf")) return false;
  const std::string name = lower(base_name(path));
  for (const char* side : {"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"})
    if (name.find(side) != std::string::npos) return false;
  return true;
}

Expected<GgufPick> pick_gguf(const std::vector<std::string>& files, const std::string& tag) {
  std::vector<std::string> models;
  for (const std::string& f : files)
    if (gguf_is_model_file(f)) models.push_back(f);
  auto listing = [&] {
    std::string s;
    for (const std::string& m : models)
      if (first_part(m)) s += "\n  " + m;
    return s.empty() ? std::string(" (none)") : s;
  };
  if (lower(tag).ends_with(".gguf")) {
    if (std::find(files.begin(), files.end(), tag) == files.end())
      return make_error("no file '{}' in the repository; its GGUF models:{}", tag, listing());
    const GgufSplitName s = gguf_split_name(tag);
    if (s.count > 1 && s.index != 1)
      return with_parts(files, fmt::format("{}-{:05d}-of-{:05d}.gguf", s.prefix, 1, s.count));
    return with_parts(files, tag);
  }
  const std::vector<std::string> tags = tag.empty() ? std::vector<std::string>{"Q4_K_M", "Q8_0"} : std::vector<std::string>{tag};
  for (const std::string& t : tags)
    for (const std::string& m : models)
      if (first_part(m) && tag_matches(m, t)) return with_parts(files, m);
  if (tag.empty())
    for (const std::string& m : models)
      if (first_part(m)) return with_parts(files, m);
  if (tag.empty()) return make_error("the repository has no GGUF model file");
  return make_error("no GGUF model file matches the tag '{}'; the repository has:{}", tag, listing());
}

}  // namespace minfer::hub
