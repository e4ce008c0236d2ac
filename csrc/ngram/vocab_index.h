// VocabIndex: word string -> WordIndex, a flat open-addressing table over words stored elsewhere
// (the ARPA text while parsing, the vocabulary blob of a model). Power-of-two buckets at most
// half full; each bucket keeps the word's 64-bit hash so a probe compares strings only on a hash
// match. O(1) expected per lookup, 12 bytes per bucket. Used where std::unordered_map's node
// chasing dominated ARPA loading (a third of the time on wt2_kn4).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "ngram/hash_table.h"
#include "ngram/model.h"

namespace dl::ngram {

inline uint64_t HashWord(std::string_view word) {
  uint64_t h = 0x243F6A8885A308D3ull ^ word.size();
  size_t i = 0;
  for (; i + 8 <= word.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, word.data() + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, word.data() + i, word.size() - i);
  return Mix64(h ^ tail);
}

class VocabIndex {
 public:
  VocabIndex() = default;
  explicit VocabIndex(size_t expected) { Reserve(expected); }

  // The index of `word`, or kNoWord; `word_of(i)` returns the text of word i.
  template <typename WordOf>
  WordIndex Find(std::string_view word, const WordOf& word_of) const {
    if (slots_.empty()) return kNoWord;
    const uint64_t h = HashWord(word);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == kNoWord) return kNoWord;
      if (hashes_[i] == h && word_of(slots_[i]) == word) return slots_[i];
    }
  }
  // Adds word `index`; returns false (and changes nothing) if the word is already present.
  template <typename WordOf>
  bool Insert(std::string_view word, WordIndex index, const WordOf& word_of) {
    if ((size_ + 1) * 2 > slots_.size()) Grow(word_of);
    const uint64_t h = HashWord(word);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == kNoWord) {
        slots_[i] = index;
        hashes_[i] = h;
        ++size_;
        return true;
      }
      if (hashes_[i] == h && word_of(slots_[i]) == word) return false;
    }
  }

 private:
  void Reserve(size_t expected) {
    size_t buckets = 16;
    while (buckets < expected * 2 + 2) buckets *= 2;
    slots_.assign(buckets, kNoWord);
    hashes_.assign(buckets, 0);
    mask_ = buckets - 1;
  }
  template <typename WordOf>
  void Grow(const WordOf& word_of) {
    std::vector<WordIndex> old = std::move(slots_);
    Reserve(size_ + 1);
    if (slots_.size() <= old.size()) Reserve(old.size());
    size_ = 0;
    for (WordIndex w : old)
      if (w != kNoWord) Insert(word_of(w), w, word_of);
  }

  std::vector<WordIndex> slots_;
  std::vector<uint64_t> hashes_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace dl::ngram
