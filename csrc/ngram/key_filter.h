// A blocked Bloom filter over the keys of one order's n-gram table (hash_table.h), so that most
// probes of n-grams that are NOT listed are answered from a small array instead of the table.
//
// Why: scoring a word probes one table per order until the first absent order (suffix-closed
// models) or through every order; the absent probe is a cache and TLB miss into a table of tens
// of MB plus a linear-probing scan to an empty bucket. The filter holds kBitsPerKey bits per
// stored key (about 0.8 MB for the 0.6 M bigrams of wt2_kn4, small enough to stay in L2/L3), in
// 64-byte blocks: one cache line per query, kHashes bits of it. No false negatives (a stored key
// always answers "maybe"), so scoring stays exact; false positives (about 1-2%) just fall
// through to the table probe as before.
//
// Cost: built once per model from the table's non-empty buckets, O(buckets); memory
// kBitsPerKey / 8 bytes per stored key. Queries take a key as SeedKey/ExtendKey return it.
#pragma once

#include <cstdint>
#include <vector>

#include "ngram/hash_table.h"

namespace dl::ngram {

class KeyFilter {
 public:
  static constexpr int kBitsPerKey = 10;
  static constexpr int kHashes = 3;

  KeyFilter() = default;
  // Every key stored in `table` (blank context entries included: they are probed too).
  explicit KeyFilter(const TableView& table) {
    uint64_t stored = 0;
    for (uint64_t i = 0; i < table.size(); ++i) stored += table.data()[i].key != 0;
    if (stored == 0) return;
    num_blocks_ = (stored * kBitsPerKey + kBlockBits - 1) / kBlockBits;
    words_.assign(num_blocks_ * kWordsPerBlock, 0);
    for (uint64_t i = 0; i < table.size(); ++i) {
      const uint64_t key = table.data()[i].key;
      if (key == 0) continue;
      uint64_t* block = Block(key & ~kFlagMask);
      for (int h = 0; h < kHashes; ++h) {
        const uint32_t bit = Bit(key & ~kFlagMask, h);
        block[bit >> 6] |= uint64_t{1} << (bit & 63);
      }
    }
  }

  // False only if `key` is certainly not in the table.
  bool MayContain(uint64_t key) const {
    if (num_blocks_ == 0) return false;
    const uint64_t want = StoredKey(key);
    const uint64_t* block = Block(want);
    for (int h = 0; h < kHashes; ++h) {
      const uint32_t bit = Bit(want, h);
      if (!(block[bit >> 6] & (uint64_t{1} << (bit & 63)))) return false;
    }
    return true;
  }
  void Prefetch(uint64_t key) const {
    if (num_blocks_ != 0) __builtin_prefetch(Block(StoredKey(key)));
  }
  size_t bytes() const { return words_.size() * sizeof(uint64_t); }

 private:
  static constexpr int kBlockBits = 512;  // one 64-byte cache line
  static constexpr int kWordsPerBlock = kBlockBits / 64;

  // The block comes from the key's high bits (fastrange), the bits inside it from its low bits
  // (the two flag bits excluded), so the two choices are independent.
  const uint64_t* Block(uint64_t stored) const { return &words_[Index(stored) * kWordsPerBlock]; }
  uint64_t* Block(uint64_t stored) { return &words_[Index(stored) * kWordsPerBlock]; }
  uint64_t Index(uint64_t stored) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(stored) * num_blocks_) >> 64);
  }
  static uint32_t Bit(uint64_t stored, int h) {
    return static_cast<uint32_t>(stored >> (2 + 9 * h)) & (kBlockBits - 1);
  }

  std::vector<uint64_t> words_;  // num_blocks_ blocks of kWordsPerBlock words
  uint64_t num_blocks_ = 0;
};

}  // namespace dl::ngram
