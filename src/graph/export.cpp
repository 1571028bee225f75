#include "graph/export.h"

#include <fmt/format.h>

namespace minfer {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

// A JSON string literal; bytes that are not UTF-8 (a file name, a tensor name) become U+FFFD.
std::string json_string(std::string_view s) {
  std::string o = "\"";
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i);
    if (n == 0) {
      o += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (n > 1) {
      o.append(s.substr(i, n));
      i += n;
      continue;
    }
    const char c = s[i++];
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) o += fmt::format("\\u{:04x}", c);
        else o += c;
    }
  }
  return o + "\"";
}

std::string dot_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '{' || c == '}' || c == '|' || c == '<' || c == '>' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

std::string backend_of(const Node& n, const std::vector<std::string>& names) {
  if (n.backend < 0 || n.backend >= static_cast<int>(names.size())) return "";
  return names[static_cast<size_t>(n.backend)];
}

const char* kind_name(TensorMemory::Kind k) {
  switch (k) {
    case TensorMemory::kArena: return "arena";
    case TensorMemory::kExternal: return "external";
    case TensorMemory::kPersistent: return "persistent";
    case TensorMemory::kNone: break;
  }
  return "none";
}

// The op-specific parameters, as a JSON object body.
std::string params_json(const Node& n) {
  const OpParams& p = n.params;
  switch (n.op) {
    case Op::kRmsNorm:
    case Op::kRmsNormMul: return fmt::format("\"eps\":{}", p.eps);
    case Op::kRope:
      return fmt::format("\"mode\":\"{}\",\"n_rot\":{},\"freq_base\":{},\"freq_scale\":{}",
                         p.rope_mode == RopeMode::kNeox ? "neox" : "norm", p.n_rot, p.rope_freq_base,
                         p.rope_freq_scale);
    case Op::kAttn: {
      std::string o = fmt::format("\"layer\":{},\"n_head_kv\":{},\"scale\":{}", p.layer, p.n_head_kv, p.attn_scale);
      if (p.attn_window > 0) o += fmt::format(",\"window\":{}", p.attn_window);
      if (p.attn_ring > 0) o += fmt::format(",\"ring\":{}", p.attn_ring);
      if (p.attn_softcap > 0) o += fmt::format(",\"softcap\":{}", p.attn_softcap);
      return o;
    }
    case Op::kScale: return fmt::format("\"scale\":{}", p.scale);
    case Op::kSoftcap: return fmt::format("\"cap\":{}", p.scale);
    case Op::kHadamard: return fmt::format("\"n\":{}", p.block);
    case Op::kTopK: return fmt::format("\"k\":{}", p.top_k);
    case Op::kMoeWeights: return fmt::format("\"norm\":{}", p.moe_norm ? "true" : "false");
    case Op::kKvCache:
    case Op::kKvStore: return fmt::format("\"layer\":{},\"kv\":\"{}\"", p.layer, p.is_value ? "v" : "k");
    default: return "";
  }
}

}  // namespace

std::string graph_to_dot(const Graph& g, const MemoryPlan* plan, const std::vector<std::string>& backend_names) {
  std::string o = "digraph minfer {\n  rankdir=LR;\n  node [shape=record, style=filled, fontname=\"monospace\"];\n";
  std::vector<bool> is_out(g.nodes.size(), false);
  for (int id : g.outputs) is_out[static_cast<size_t>(id)] = true;
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    const std::string be = backend_of(n, backend_names);
    const char* fill = n.op == Op::kWeight ? "gray90" : be == "cpu" ? "lightyellow" : be.empty() ? "white" : "lightblue";
    std::string label = fmt::format("{}|{} {} {}", dot_escape(n.name), op_name(n.op), dtype_name(n.type), shape_string(n.ne));
    if (plan && plan->nodes[static_cast<size_t>(n.id)].kind == TensorMemory::kArena) {
      const TensorMemory& m = plan->nodes[static_cast<size_t>(n.id)];
      label += fmt::format("|{}@{:#x}+{}", be, m.offset, m.size);
    }
    const char* shape = n.op == Op::kInput || is_out[static_cast<size_t>(n.id)] ? ", shape=Mrecord, peripheries=2" : "";
    o += fmt::format("  n{} [label=\"{{{}}}\", fillcolor={}{}{}];\n", n.id, label, fill,
                     n.fused ? ", style=\"filled,dashed\"" : "", shape);
  }
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    for (int s : n.src) {
      const bool kv = g.nodes[static_cast<size_t>(s)].op == Op::kKvStore || g.nodes[static_cast<size_t>(s)].op == Op::kKvCache;
      o += fmt::format("  n{} -> n{}{};\n", s, n.id, kv ? " [style=dashed]" : "");
    }
  }
  return o + "}\n";
}

std::string graph_to_json(const Graph& g, const MemoryPlan* plan, const std::vector<std::string>& backend_names,
                          const GraphExportInfo& info) {
  auto ids = [](const std::vector<int>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? "," : "", v[i]);
    return s + "]";
  };
  std::string o = fmt::format("{{\"format\":\"minfer-graph\",\"version\":1,\"model\":{},\"arch\":{},\"kind\":{},",
                              json_string(info.model), json_string(info.arch), json_string(info.kind));
  o += "\"params\":{";
  for (size_t i = 0; i < info.params.size(); ++i)
    o += fmt::format("{}{}:{}", i ? "," : "", json_string(info.params[i].first), info.params[i].second);
  o += "},\"backends\":[";
  for (size_t i = 0; i < backend_names.size(); ++i) o += fmt::format("{}{}", i ? "," : "", json_string(backend_names[i]));
  o += "],";
  if (plan) {
    o += "\"arenas\":[";
    for (size_t i = 0; i < plan->arena_bytes.size(); ++i)
      o += fmt::format("{}{{\"backend\":{},\"bytes\":{}}}", i ? "," : "",
                       json_string(i < backend_names.size() ? backend_names[i] : ""), plan->arena_bytes[i]);
    o += fmt::format("],\"naive_bytes\":{},", plan->naive_bytes);
  }
  o += fmt::format("\"inputs\":{},\"outputs\":{},\"nodes\":[\n", ids(g.inputs), ids(g.outputs));
  bool first = true;
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    const std::string be = backend_of(n, backend_names);
    o += fmt::format("{}{{\"id\":{},\"name\":{},\"op\":\"{}\",\"shape\":[{},{},{},{}],\"dtype\":\"{}\",\"backend\":{},"
                     "\"inputs\":{},\"fused\":{},\"params\":{{{}}}",
                     first ? "" : ",\n", n.id, json_string(n.name), op_name(n.op), n.ne[0], n.ne[1], n.ne[2], n.ne[3],
                     dtype_name(n.type), be.empty() ? "null" : json_string(be), ids(n.src), n.fused ? "true" : "false",
                     params_json(n));
    if (plan) {
      const TensorMemory& m = plan->nodes[static_cast<size_t>(n.id)];
      o += fmt::format(",\"buffer\":{{\"kind\":\"{}\",\"offset\":{},\"size\":{},\"root\":{},\"live\":[{},{}]}}",
                       kind_name(m.kind), m.offset, m.size, m.root, m.first,
                       m.last == INT32_MAX ? -1 : m.last);
    }
    o += "}";
    first = false;
  }
  return o + "\n]}\n";
}

}  // namespace minfer
