#include "server/prom-text.h"

#include <fmt/format.h>

#include <cmath>

namespace minfer::server {

std::string prom_label(std::string_view key, std::string_view value) {
  std::string o(key);
  o += "=\"";
  for (const char c : value) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  o += '"';
  return o;
}

std::string prom_join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "," + b;
}

PromText::Family& PromText::family(const std::string& name, const char* type, const char* help) {
  const auto [it, added] = index_.emplace(name, families_.size());
  if (added) families_.push_back({fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n", name, help, type), {}});
  return families_[it->second];
}

void PromText::add(const std::string& name, const char* type, const char* help, double v, const std::string& labels) {
  sample(name, type, help, "", labels, v);
}

void PromText::sample(const std::string& name, const char* type, const char* help, const char* suffix, const std::string& labels, double v) {
  std::string& o = family(name, type, help).samples;
  o += name;
  o += suffix;
  if (!labels.empty()) o += fmt::format("{{{}}}", labels);
  // The format's spellings of the special values; the shortest round-trip text otherwise.
  if (std::isnan(v)) o += " NaN\n";
  else if (std::isinf(v)) o += v > 0 ? " +Inf\n" : " -Inf\n";
  else o += fmt::format(" {}\n", v);
}

std::string PromText::str() const {
  std::string o;
  for (const Family& f : families_) o += f.head + f.samples;
  return o;
}

}  // namespace minfer::server
