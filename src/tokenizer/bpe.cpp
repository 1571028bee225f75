#include "tokenizer/bpe.h"

#include <algorithm>
#include <unordered_map>

#include "tokenizer/unicode.h"

namespace minfer {

ByteLevel::ByteLevel() {
  // Printable Latin-1 bytes map to themselves; the other 68 bytes, in order, to U+0100...
  std::fill(std::begin(cp_to_byte), std::end(cp_to_byte), int16_t{-1});
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    byte_to_cp[b] = printable ? b : next++;
    cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
  }
}

bool ByteLevel::decode(std::string_view text, std::string& out) const {
  for (size_t i = 0; i < text.size();) {
    size_t len;
    const uint32_t cp = utf8_decode(text.data() + i, text.size() - i, &len);
    if (cp >= 324 || cp_to_byte[cp] < 0) return false;  // also rejects invalid UTF-8 (U+FFFD)
    out.push_back(static_cast<char>(cp_to_byte[cp]));
    i += len;
  }
  return true;
}

const ByteLevel& byte_level() {
  static const ByteLevel b;
  return b;
}

Expected<BpeModel> BpeModel::build(const Vocab& v, const std::vector<std::string_view>& merges,
                                   bool whole_words) {
  BpeModel m;
  m.whole_words_ = whole_words;
  m.n_vocab_ = v.n;
  m.n_merges_ = merges.size();
  const ByteLevel& bl = byte_level();

  // Symbol of a byte-level text: its vocabulary id, else an extra id past n_vocab.
  std::unordered_map<std::string, uint32_t> extra_ids;
  auto intern = [&](std::string_view text) -> uint32_t {
    const int32_t id = v.by_text.find(text);
    if (id >= 0) return static_cast<uint32_t>(id);
    auto [it, added] = extra_ids.emplace(std::string(text), static_cast<uint32_t>(v.n + m.extra_.size()));
    if (added) {
      std::string raw;
      if (!bl.decode(text, raw)) raw.clear();
      m.extra_.push_back(std::move(raw));
    }
    return it->second;
  };

  for (uint32_t b = 0; b < 256; ++b) {
    char buf[4];
    const size_t n = utf8_encode(bl.byte_to_cp[b], buf);
    m.byte_sym_[b] = intern(std::string_view(buf, n));
    m.byte_token_[b] = m.byte_sym_[b] < uint32_t(v.n) ? static_cast<int32_t>(m.byte_sym_[b]) : -1;
  }

  m.merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view line = merges[rank];
    // "left right": split at the first space after the first byte (llama.cpp's rule); a line
    // without one is a pair of empty strings, which no word can form.
    const size_t sp = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
    if (sp == std::string_view::npos) continue;
    const std::string_view left = line.substr(0, sp), right = line.substr(sp + 1);
    joined.assign(left);
    joined.append(right);
    const uint32_t l = intern(left), r = intern(right), res = intern(joined);
    m.merges_.insert_if_absent(pair_key(l, r), (uint64_t(rank) << 32) | res);
  }

  // Raw bytes -> id for the Llama 3 whole-word rule: a word matches a token whose byte-level
  // text equals the word's encoding, i.e. whose decoded text equals the word.
  if (!whole_words) return m;
  std::vector<uint32_t> raw_off;
  std::vector<int32_t> raw_id;
  for (int32_t i = 0; i < v.n; ++i) {
    const size_t before = m.raw_text_.size();
    if (!bl.decode(v.token(i), m.raw_text_)) {
      m.raw_text_.resize(before);
      continue;
    }
    raw_off.push_back(static_cast<uint32_t>(before));
    raw_id.push_back(i);
  }
  raw_off.push_back(static_cast<uint32_t>(m.raw_text_.size()));
  m.raw_to_id_.reserve(raw_id.size());
  for (size_t k = 0; k < raw_id.size(); ++k) {
    m.raw_to_id_.insert_or_assign(
        std::string_view(m.raw_text_.data() + raw_off[k], raw_off[k + 1] - raw_off[k]), raw_id[k]);
  }
  return m;
}

void BpeModel::emit(uint32_t sym, std::vector<int32_t>& out) const {
  if (sym < uint32_t(n_vocab_)) {
    out.push_back(static_cast<int32_t>(sym));
    return;
  }
  // A merge result missing from the vocabulary: its bytes as byte tokens.
  for (char c : extra_[sym - n_vocab_]) {
    const int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id >= 0) out.push_back(id);
  }
}

// Short words: keep the rank of every adjacent pair in an array, merge the lowest rank
// (leftmost on ties), and refresh only the two pairs next to the merge.
void BpeModel::merge_scan(BpeScratch& s) const {
  auto& sym = s.sym;
  auto& rank = s.rank;
  auto& res = s.res;
  size_t m = sym.size();
  rank.resize(m);
  res.resize(m);
  auto refresh = [&](size_t i) {
    const uint64_t v = lookup(sym[i], sym[i + 1]);
    rank[i] = v == PairMap::kEmpty ? kNoMerge : uint32_t(v >> 32);
    res[i] = uint32_t(v);
  };
  for (size_t i = 0; i + 1 < m; ++i) refresh(i);
  while (m > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < m; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    if (rank[best] == kNoMerge) break;
    sym[best] = res[best];
    for (size_t i = best + 1; i + 1 < m; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      res[i] = res[i + 1];
    }
    --m;
    if (best > 0) refresh(best - 1);
    if (best + 1 < m) refresh(best);
  }
  sym.resize(m);
}

// Long words: a min-heap of candidate pairs over a linked list of symbols. Entries whose
// symbols changed since they were pushed are skipped when popped.
void BpeModel::merge_heap(BpeScratch& s) const {
  auto& sym = s.sym;
  const int32_t m = static_cast<int32_t>(sym.size());
  s.prev.resize(m);
  s.next.resize(m);
  for (int32_t i = 0; i < m; ++i) {
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < m ? i + 1 : -1;
  }
  auto& heap = s.heap;
  heap.clear();
  auto later = [](const BpeScratch::Pair& a, const BpeScratch::Pair& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  auto push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint64_t v = lookup(sym[l], sym[r]);
    if (v == PairMap::kEmpty) return;
    heap.push_back({uint32_t(v >> 32), uint32_t(l), uint32_t(r), sym[l], sym[r], uint32_t(v)});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < m; ++i) push(i, i + 1);
  constexpr uint32_t kDead = 0xFFFFFFFFu;  // a symbol merged into its left neighbour
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::Pair p = heap.back();
    heap.pop_back();
    const int32_t l = int32_t(p.left), r = int32_t(p.right);
    if (s.next[l] != r || sym[l] != p.left_sym || sym[r] != p.right_sym) continue;  // stale
    sym[l] = p.res;
    sym[r] = kDead;
    s.next[l] = s.next[r];
    if (s.next[r] >= 0) s.prev[s.next[r]] = l;
    push(s.prev[l], l);
    push(l, s.next[l]);
  }
  size_t k = 0;
  for (int32_t i = 0; i >= 0; i = s.next[i]) sym[k++] = sym[i];  // symbol 0 is never merged away
  sym.resize(k);
}

void BpeModel::encode_word(std::string_view word, bool ignore_merges, BpeScratch& s,
                           std::vector<int32_t>& out, size_t heap_from) const {
  if (ignore_merges) {
    MINFER_ASSERT(whole_words_ && "BpeModel: ignore_merges needs a model built with whole_words");
    const int32_t id = raw_to_id_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() == 1) {
    emit(byte_sym_[static_cast<uint8_t>(word[0])], out);
    return;
  }
  s.sym.resize(word.size());
  for (size_t i = 0; i < word.size(); ++i) s.sym[i] = byte_sym_[static_cast<uint8_t>(word[i])];
  if (word.size() < heap_from) merge_scan(s);
  else merge_heap(s);
  for (uint32_t sym : s.sym) emit(sym, out);
}

}  // namespace minfer
