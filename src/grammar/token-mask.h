// Which tokens a grammar allows next, exactly: a token is allowed iff its bytes can continue
// the text (across several terminals and code points, ending inside a UTF-8 sequence if the
// grammar can still take some character it could become). End-of-generation tokens are allowed
// iff the text is a complete match, and are the only ones once nothing else can follow.
//
//   GrammarVocab v{pieces, eog_ids};                 // pieces[id]: the bytes id decodes to
//   auto tokens = std::make_shared<const TokenTrie>(v);   // once per vocabulary
//   GrammarConstraint c(grammar, tokens);            // once per generation
//   c.apply(logits);                                 // disallowed tokens -> -inf
//   if (!c.accept(id)) ...                           // false: id was not allowed
//
// The mask walks a trie of the token bytes, so tokens sharing a prefix share its matching, and
// is cached per matcher state (stacks + pending UTF-8): a state seen again (every character
// inside a JSON string returns to the same state) costs one lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace minfer {

struct GrammarVocab {
  std::vector<std::string> pieces;  // [n_vocab] bytes of each token; empty: never allowed
  std::vector<int32_t> eog;         // end-of-generation ids
};

class TokenTrie {
 public:
  explicit TokenTrie(const GrammarVocab& v);
  struct Node {
    int32_t first_child = 0, n_children = 0;
    int32_t tok_begin = 0, tok_end = 0;  // ids_[tok_begin, tok_end): tokens ending here
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // [0] is the root
  const std::vector<int32_t>& ids() const { return ids_; }
  int32_t n_vocab() const { return n_vocab_; }
  const std::vector<int32_t>& eog() const { return eog_; }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  int32_t n_vocab_ = 0;
};

class GrammarConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> tokens);

  // logits [n_vocab]: every token the grammar does not allow now becomes -inf.
  void apply(std::span<float> logits);
  // Whether `id` may come next: the cached mask's bit, else its bytes on a copy of the matcher
  // (cheap: a greedy caller checks its argmax first and masks only when that is refused).
  bool allows(int32_t id);
  // Advances past `id` (an end-of-generation token: only if the match is complete).
  bool accept(int32_t id);
  // Advances past text that is already in the output (a lazy grammar's trigger text).
  bool accept_text(std::string_view text);
  const GrammarMatcher& matcher() const { return m_; }
  size_t n_cached_states() const { return cache_.size(); }
  size_t n_states() const { return states_.size(); }

 private:
  std::shared_ptr<const TokenTrie> tokens_;
  GrammarMatcher m_;
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& k) const;
  };
  // Stack sets interned as ids, the code point transitions between them, and the mask of each
  // (state, pending UTF-8) seen: a walk mostly follows cached transitions.
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> ids_;
  std::vector<GrammarStacks> states_;
  std::unordered_map<uint64_t, int32_t> next_;  // (state << 21 | cp) -> state, -1: refused (cp >= 128)
  static constexpr int32_t kUnknown = -2;
  std::vector<int32_t> ascii_;                  // [state][128] the same for ASCII; kUnknown: not yet
  std::unordered_map<std::vector<int32_t>, std::vector<uint64_t>, KeyHash> cache_;  // [n_vocab] bits
  const std::vector<uint64_t>& mask();
  std::vector<int32_t> key() const;
  int32_t intern(const GrammarStacks& s);
  int32_t step(int32_t state, uint32_t cp);
  void walk(int32_t node, int32_t state, const Utf8Partial& u, std::vector<uint64_t>& bits);
  struct WalkFrame {
    int32_t node, state;
    Utf8Partial u;
  };
  std::vector<WalkFrame> walk_stack_;
  bool is_eog(int32_t id) const;
};

}  // namespace minfer
