// Open-addressing hash tables for the tokenizer's hot lookups: text -> token id and
// (left id, right id) -> merge. Built once at load, read-only afterwards (thread-safe reads).
//
//   StringIdMap m;  m.reserve(n);  m.insert_or_assign("hello", 42);
//   int32_t id = m.find("hello");                  // -1 when absent
//   PairMap p;  p.reserve(n);  p.insert_if_absent(pair_key(3, 4), value);
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace minfer {

inline uint64_t hash_bytes(const char* s, size_t n) {
  // FNV-1a over 8-byte words, then a final mix: fast for the short strings tokens are.
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t w = 0;
  if (n > i) std::memcpy(&w, s + i, n - i);
  h = (h ^ w) * 0x100000001b3ull;
  h ^= h >> 32;
  h *= 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

// Slots for n keys: a power of two with the load at most 2/3 (linear probing stays short;
// 262,144 slots = 4 MiB for a 150k vocabulary, where a 1/2 bound would double that).
inline size_t table_capacity(size_t n) {
  size_t cap = 16;
  while (cap * 2 < n * 3) cap <<= 1;
  return cap;
}

inline uint64_t hash_u64(uint64_t x) {
  x *= 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 31);
}

// Keys are views into storage the owner keeps alive (the vocabulary's text buffer).
class StringIdMap {
 public:
  void reserve(size_t n) {
    const size_t cap = table_capacity(n);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Later inserts of the same text win, like a std::map assignment.
  void insert_or_assign(std::string_view key, int32_t id) {
    Slot& s = slots_[probe(key)];
    if (s.id < 0) ++size_;
    s = {key.data(), static_cast<uint32_t>(key.size()), id};
  }
  int32_t find(std::string_view key) const { return slots_[probe(key)].id; }
  size_t size() const { return size_; }

 private:
  struct Slot {
    const char* key = nullptr;
    uint32_t len = 0;
    int32_t id = -1;
  };
  // Index of the slot holding key, or of the empty slot where it would go.
  size_t probe(std::string_view key) const {
    size_t i = hash_bytes(key.data(), key.size()) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.id < 0) return i;
      if (s.len == key.size() && std::memcmp(s.key, key.data(), key.size()) == 0) return i;
      i = (i + 1) & mask_;
    }
  }
  std::vector<Slot> slots_{16};
  size_t mask_ = 15;
  size_t size_ = 0;
};

inline uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }

// uint64 key -> uint64 value; kEmpty is never a valid key (ids are < 2^31).
class PairMap {
 public:
  static constexpr uint64_t kEmpty = ~0ull;
  void reserve(size_t n) {
    const size_t cap = table_capacity(n);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // First insert of a key wins (llama.cpp keeps the first rank of a duplicated merge).
  bool insert_if_absent(uint64_t key, uint64_t value) {
    size_t i = hash_u64(key) & mask_;
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == key) return false;
      i = (i + 1) & mask_;
    }
    slots_[i] = {key, value};
    return true;
  }
  // Value for key, or kEmpty.
  uint64_t find(uint64_t key) const {
    size_t i = hash_u64(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.value;
      if (s.key == kEmpty) return kEmpty;
      i = (i + 1) & mask_;
    }
  }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    uint64_t value = 0;
  };
  std::vector<Slot> slots_{16};
  size_t mask_ = 15;
};

}  // namespace minfer
