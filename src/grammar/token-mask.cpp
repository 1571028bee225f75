#include "grammar/token-mask.h"

#include <algorithm>
#include <limits>

namespace minfer {

TokenTrie::TokenTrie(const GrammarVocab& v)
    : pieces_(v.pieces), eog_(v.eog), n_vocab_(static_cast<int32_t>(v.pieces.size())) {
  std::vector<int32_t> order;
  for (int32_t id : eog_)  // allowed by the match being complete, not by their bytes
    if (id >= 0 && id < n_vocab_) pieces_[static_cast<size_t>(id)].clear();
  for (int32_t id = 0; id < n_vocab_; ++id)
    if (!pieces_[static_cast<size_t>(id)].empty()) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)] || (pieces_[static_cast<size_t>(a)] == pieces_[static_cast<size_t>(b)] && a < b);
  });
  ids_ = order;  // sorted by bytes: the tokens ending at a node are a run of ids_
  nodes_.push_back({});
  // Node n covers the sorted run [lo, hi) of tokens whose first `depth` bytes are its path.
  struct Todo {
    int32_t node;
    size_t lo, hi, depth;
  };
  std::vector<Todo> todo{{0, 0, order.size(), 0}};
  while (!todo.empty()) {
    const Todo t = todo.back();
    todo.pop_back();
    size_t i = t.lo;
    while (i < t.hi && pieces_[static_cast<size_t>(order[i])].size() == t.depth) ++i;  // end here
    nodes_[static_cast<size_t>(t.node)].tok_begin = static_cast<int32_t>(t.lo);
    nodes_[static_cast<size_t>(t.node)].tok_end = static_cast<int32_t>(i);
    const auto first = static_cast<int32_t>(nodes_.size());
    std::vector<Todo> kids;
    while (i < t.hi) {
      const auto b = static_cast<uint8_t>(pieces_[static_cast<size_t>(order[i])][t.depth]);
      size_t j = i;
      while (j < t.hi && static_cast<uint8_t>(pieces_[static_cast<size_t>(order[j])][t.depth]) == b) ++j;
      Node n;
      n.byte = b;
      nodes_.push_back(n);
      kids.push_back({static_cast<int32_t>(nodes_.size() - 1), i, j, t.depth + 1});
      i = j;
    }
    nodes_[static_cast<size_t>(t.node)].first_child = first;
    nodes_[static_cast<size_t>(t.node)].n_children = static_cast<int32_t>(nodes_.size()) - first;
    todo.insert(todo.end(), kids.begin(), kids.end());
  }
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> tokens)
    : tokens_(std::move(tokens)), m_(std::move(g)) {}

size_t GrammarConstraint::KeyHash::operator()(const std::vector<int32_t>& k) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t v : k) h = (h ^ static_cast<uint32_t>(v)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

bool GrammarConstraint::is_eog(int32_t id) const {
  const auto& e = tokens_->eog();
  return std::find(e.begin(), e.end(), id) != e.end();
}

int32_t GrammarConstraint::intern(const GrammarStacks& s) {
  std::vector<int32_t> k;
  for (const GrammarStack& st : s) {
    k.push_back(static_cast<int32_t>(st.size()));
    k.insert(k.end(), st.begin(), st.end());
  }
  auto [it, added] = ids_.emplace(std::move(k), static_cast<int32_t>(states_.size()));
  if (added) states_.push_back(s);
  return it->second;
}

int32_t GrammarConstraint::step(int32_t state, uint32_t cp) {
  // ASCII (most token bytes): a dense row per state; other code points: a hash map.
  const size_t slot = static_cast<size_t>(state) * 128 + cp;
  if (cp < 128 && slot < ascii_.size() && ascii_[slot] != kUnknown) return ascii_[slot];
  const uint64_t k = (static_cast<uint64_t>(state) << 21) | cp;
  if (cp >= 128)
    if (auto it = next_.find(k); it != next_.end()) return it->second;
  const GrammarStacks next = m_.advance(states_[static_cast<size_t>(state)], cp);
  const int32_t id = next.empty() ? -1 : intern(next);
  if (cp < 128) {
    if (ascii_.size() < states_.size() * 128) ascii_.resize(states_.size() * 128, kUnknown);
    ascii_[slot] = id;
  } else {
    next_.emplace(k, id);
  }
  return id;
}

// Depth-first over the trie with an explicit stack; an ASCII byte outside a UTF-8 sequence (most
// of them) takes the dense transition row without a call.
void GrammarConstraint::walk(int32_t root, int32_t root_state, const Utf8Partial& root_u, std::vector<uint64_t>& bits) {
  const TokenTrie::Node* nodes = tokens_->nodes().data();
  const int32_t* ids = tokens_->ids().data();
  std::vector<WalkFrame>& todo = walk_stack_;
  todo.clear();
  todo.push_back({root, root_state, root_u});
  while (!todo.empty()) {
    const WalkFrame f = todo.back();
    todo.pop_back();
    const TokenTrie::Node& n = nodes[f.node];
    for (int32_t c = n.first_child; c < n.first_child + n.n_children; ++c) {
      const TokenTrie::Node& child = nodes[c];
      Utf8Partial v = f.u;
      int32_t next = f.state;
      if (v.need == 0 && child.byte < 0x80) {
        const size_t slot = static_cast<size_t>(f.state) * 128 + child.byte;
        next = slot < ascii_.size() ? ascii_[slot] : kUnknown;
        if (next == kUnknown) next = step(f.state, child.byte);
        if (next < 0) continue;
      } else {
        int64_t cp;
        if (!GrammarMatcher::utf8_step(v, child.byte, &cp)) continue;
        if (cp >= 0) {
          next = step(f.state, static_cast<uint32_t>(cp));
          if (next < 0) continue;
        } else if (!m_.feasible(states_[static_cast<size_t>(f.state)], v)) {
          continue;
        }
      }
      for (int32_t i = child.tok_begin; i < child.tok_end; ++i) {
        const int32_t id = ids[i];
        bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
      }
      if (child.n_children > 0) todo.push_back({c, next, v});
    }
  }
}

std::vector<int32_t> GrammarConstraint::key() const {
  std::vector<int32_t> k{static_cast<int32_t>(m_.partial().bits), m_.partial().need, m_.partial().len};
  for (const GrammarStack& s : m_.stacks()) {
    k.push_back(static_cast<int32_t>(s.size()));
    k.insert(k.end(), s.begin(), s.end());
  }
  return k;
}

const std::vector<uint64_t>& GrammarConstraint::mask() {
  std::vector<int32_t> key = this->key();
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= 4096) cache_.clear();  // a grammar with unbounded distinct states
  if (states_.size() >= (1u << 20)) {         // the same, for the transitions
    ids_.clear();
    states_.clear();
    next_.clear();
    ascii_.clear();
  }
  std::vector<uint64_t> bits(static_cast<size_t>(tokens_->n_vocab() + 63) / 64, 0);
  if (!m_.must_end()) walk(0, intern(m_.stacks()), m_.partial(), bits);
  if (m_.can_end())
    for (int32_t id : tokens_->eog()) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  return cache_.emplace(std::move(key), std::move(bits)).first->second;
}

void GrammarConstraint::apply(std::span<float> logits) {
  const std::vector<uint64_t>& bits = mask();
  const size_t n = std::min(logits.size(), static_cast<size_t>(tokens_->n_vocab()));
  for (size_t i = 0; i < n; ++i)
    if (!((bits[i / 64] >> (i % 64)) & 1)) logits[i] = -std::numeric_limits<float>::infinity();
  for (size_t i = n; i < logits.size(); ++i) logits[i] = -std::numeric_limits<float>::infinity();
}

bool GrammarConstraint::allows(int32_t id) {
  if (id < 0 || id >= tokens_->n_vocab()) return false;
  if (auto it = cache_.find(key()); it != cache_.end()) return (it->second[static_cast<size_t>(id) / 64] >> (id % 64)) & 1;
  if (is_eog(id)) return m_.can_end();
  const std::string& p = tokens_->piece(id);
  if (p.empty() || m_.must_end()) return false;
  GrammarMatcher copy = m_;
  return copy.accept(p);
}

bool GrammarConstraint::accept(int32_t id) {
  if (id < 0 || id >= tokens_->n_vocab()) return false;
  if (is_eog(id)) return m_.can_end();
  const std::string& p = tokens_->piece(id);
  return !p.empty() && !m_.must_end() && m_.accept(p);
}

bool GrammarConstraint::accept_text(std::string_view text) { return text.empty() || m_.accept(text); }

}  // namespace minfer
