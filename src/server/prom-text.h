// Prometheus text exposition (format 0.0.4) built family by family: each metric family's HELP
// and TYPE lines once, then its series in the order they were added, so that several sources
// (the server, then each model of a pool) can add series to the same family.
//
//   PromText t;
//   t.add("minfer_slots_busy", "gauge", "Slots generating or prefilling.", 3);            // minfer_slots_busy 3
//   t.add("minfer_slots_busy", "gauge", "Slots generating or prefilling.", 1, prom_label("model", "a"));
//   t.sample("minfer_request_duration_seconds", "histogram", "Latency.", "_bucket", "le=\"0.5\"", 2);
//   std::string text = t.str();
//
// Names may hold colons (llama-server's `llamacpp:`, vLLM's `vllm:`): legal in the format.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::server {

// `key="value"` with the value escaped as the format says (backslash, double quote, newline).
std::string prom_label(std::string_view key, std::string_view value);
// Label lists joined with commas (an empty one is left out).
std::string prom_join(const std::string& a, const std::string& b);

class PromText {
 public:
  // The family `name` (type: counter, gauge, histogram, summary) listed even with no series yet.
  void declare(const std::string& name, const char* type, const char* help) { family(name, type, help); }
  // One series `name{labels} v` of the family `name`.
  void add(const std::string& name, const char* type, const char* help, double v, const std::string& labels = "");
  // One sample of a family whose sample names add a suffix (`_bucket`, `_sum`, `_count`).
  void sample(const std::string& family, const char* type, const char* help, const char* suffix, const std::string& labels, double v);
  std::string str() const;

 private:
  struct Family {
    std::string head;     // its HELP and TYPE lines
    std::string samples;  // its sample lines, in order
  };
  Family& family(const std::string& name, const char* type, const char* help);
  std::vector<Family> families_;       // in the order first added
  std::map<std::string, size_t> index_;  // name -> families_ index
};

}  // namespace minfer::server
