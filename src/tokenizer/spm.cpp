#include "tokenizer/spm.h"

#include <algorithm>

namespace minfer {

int parse_byte_token(std::string_view t) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

SpmModel::SpmModel(const Vocab& v) {
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = v.by_text.find(std::string_view(name, 6));
    if (id < 0) {
      const char c = static_cast<char>(b);
      id = v.by_text.find(std::string_view(&c, 1));
    }
    byte_token_[b] = id;
  }
}

void SpmModel::encode(const Vocab& v, std::string_view text, SpmScratch& s, std::vector<int32_t>& out) const {
  auto& sym = s.sym;
  sym.clear();
  // Characters by their lead byte's length (a stray continuation byte is one character).
  for (size_t i = 0; i < text.size();) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    const size_t want = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    const size_t len = std::min(want, text.size() - i);
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({uint32_t(i), uint32_t(len), k - 1, i + len < text.size() ? k + 1 : -1});
    i += len;
  }
  if (sym.empty()) return;

  auto& heap = s.heap;
  heap.clear();
  // Highest score first, then the leftmost pair.
  auto later = [](const SpmScratch::Pair& a, const SpmScratch::Pair& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  auto push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;  // adjacent symbols: one contiguous range
    const int32_t id = v.by_text.find(text.substr(sym[l].start, len));
    if (id < 0) return;
    heap.push_back({v.score[id], l, r, len});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < int32_t(sym.size()); ++i) push(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const SpmScratch::Pair p = heap.back();
    heap.pop_back();
    SpmScratch::Sym& l = sym[p.left];
    SpmScratch::Sym& r = sym[p.right];
    if (l.len == 0 || r.len == 0 || l.next != p.right || l.len + r.len != p.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    push(l.prev, p.left);
    push(p.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].start, sym[i].len);
    const int32_t id = v.by_text.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {  // no entry: byte fallback, else the unknown token
      const int32_t b = byte_token_[static_cast<uint8_t>(c)];
      if (b >= 0) out.push_back(b);
      else if (v.unk >= 0) out.push_back(v.unk);
    }
  }
}

}  // namespace minfer
