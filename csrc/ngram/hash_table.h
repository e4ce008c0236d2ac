// Open-addressing (linear probing) hash tables of n-gram entries, KenLM "probing" style.
//
// An n-gram w_1 .. w_n is keyed by a 64-bit hash built from its LAST word backwards:
//   key(w_n) = Seed(w_n), key(w_j .. w_n) = Extend(key(w_{j+1} .. w_n), w_j),
// so scoring extends the key one history word at a time (O(1) per order). Words themselves are
// not stored: a 62-bit hash collision between two n-grams of one order is detected at build time
// (it reads as a duplicate) and is astronomically rare (about n^2 / 2^63).
//
// Entry layout (16 bytes, little-endian in the binary format): key with its two low bits used as
// flags, log-prob and log-backoff (natural log). An empty bucket has key 0. Buckets = entries *
// kLoadFactor; the home bucket is the high half of key * buckets ("fastrange", no modulo).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hash.h"

namespace dl::ngram {

constexpr uint64_t kFlagListed = 1;   // the n-gram is in the file (else a blank context entry)
constexpr uint64_t kFlagContext = 2;  // as a history suffix it can change a later score
constexpr uint64_t kFlagMask = 3;
constexpr double kLoadFactor = 1.5;

struct Entry {
  uint64_t key;  // hash with the low two bits replaced by flags; 0 = empty bucket
  float prob_ln;
  float backoff_ln;

  bool listed() const { return key & kFlagListed; }
  bool context() const { return key & kFlagContext; }
};
static_assert(sizeof(Entry) == 16, "Entry is part of the binary format");

inline uint64_t SeedKey(uint32_t word) { return Mix64(word + 0x9E3779B97F4A7C15ull); }
inline uint64_t ExtendKey(uint64_t key, uint32_t word) {
  return Mix64(key ^ (uint64_t{word} * 0xD6E8FEB86659FD93ull + 0x2545F4914F6CDD1Dull));
}
// The stored form of a key: flags cleared; never 0 (0 marks an empty bucket).
inline uint64_t StoredKey(uint64_t key) {
  key &= ~kFlagMask;
  return key ? key : 4;
}

inline uint64_t BucketsFor(uint64_t entries) {
  return entries > (uint64_t{1} << 61)
             ? uint64_t{1} << 62
             : static_cast<uint64_t>(static_cast<double>(entries) * kLoadFactor) + 1;
}

// Asks the kernel for transparent huge pages over a large table: random probes into a table of
// tens of MB otherwise miss the TLB on nearly every access. A hint only.
void AdviseHugePages(void* data, size_t bytes);

// Read-only view of one order's table (owned by a vector or a memory-mapped file).
class TableView {
 public:
  TableView() = default;
  TableView(const Entry* buckets, uint64_t size) : buckets_(buckets), size_(size) {}

  // The entry for `key` (a raw key from SeedKey/ExtendKey), or nullptr.
  const Entry* Find(uint64_t key) const {
    if (size_ == 0) return nullptr;
    const uint64_t want = StoredKey(key);
    uint64_t i = HomeOf(want);
    while (true) {
      const Entry& e = buckets_[i];
      if ((e.key & ~kFlagMask) == want) return &e;
      if (e.key == 0) return nullptr;
      if (++i == size_) i = 0;
    }
  }
  // Starts loading the home bucket of `key`, so that a later Find hits the cache.
  void Prefetch(uint64_t key) const {
    if (size_ != 0) __builtin_prefetch(&buckets_[HomeOf(StoredKey(key))]);
  }
  uint64_t size() const { return size_; }
  const Entry* data() const { return buckets_; }
  // The home bucket of `key` (a raw key): where its probe starts, and mostly where it ends.
  uint64_t Home(uint64_t key) const { return HomeOf(StoredKey(key)); }

 private:
  uint64_t HomeOf(uint64_t want) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(want) * size_) >> 64);
  }

  const Entry* buckets_ = nullptr;
  uint64_t size_ = 0;
};

// Mutable table used while building; Insert returns the entry (existing or new).
class TableBuilder {
 public:
  explicit TableBuilder(uint64_t expected_entries) { Allocate(BucketsFor(expected_entries)); }

  // Finds or inserts `key`; *inserted tells which. Grows if the table gets too full.
  Entry* FindOrInsert(uint64_t key, bool* inserted) {
    const uint64_t want = StoredKey(key);
    while (true) {
      uint64_t i = Home(want);
      while (buckets_[i].key != 0 && (buckets_[i].key & ~kFlagMask) != want)
        if (++i == buckets_.size()) i = 0;
      Entry& e = buckets_[i];
      *inserted = e.key == 0;
      if (!*inserted) return &e;
      // Grow only when a new entry would push the load past 1 / kLoadFactor.
      if (used_ + 1 > static_cast<uint64_t>(static_cast<double>(buckets_.size()) / kLoadFactor)) {
        Grow();
        continue;
      }
      e.key = want;
      ++used_;
      return &e;
    }
  }
  void Prefetch(uint64_t key) const { __builtin_prefetch(&buckets_[Home(StoredKey(key))], 1); }
  // Shrinks the table back to kLoadFactor x entries if blank entries made it grow past that.
  void Compact() {
    if (buckets_.size() > BucketsFor(used_) + BucketsFor(used_) / 8) Rehash(BucketsFor(used_));
  }
  // Rebuilds the table with BucketsFor(keys.size()) buckets by inserting its entries again in the
  // order of `keys` (raw keys, each entry's once): after growing from a small start, the table
  // becomes the one a table presized for them gets from the same inserts, bucket for bucket.
  void Replay(const std::vector<uint64_t>& keys) {
    TableBuilder fresh(keys.size());
    for (const uint64_t key : keys) {
      bool inserted = false;
      *fresh.FindOrInsert(key, &inserted) = *Find(key);
    }
    *this = std::move(fresh);
  }
  Entry* Find(uint64_t key) {
    return const_cast<Entry*>(TableView(buckets_.data(), buckets_.size()).Find(key));
  }
  uint64_t used() const { return used_; }
  std::vector<Entry>& buckets() { return buckets_; }

 private:
  uint64_t Home(uint64_t want) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(want) * buckets_.size()) >> 64);
  }
  void Grow() { Rehash(BucketsFor(buckets_.size())); }
  void Rehash(uint64_t size) {
    std::vector<Entry> old;
    old.swap(buckets_);
    Allocate(size);
    for (const Entry& e : old) {
      if (e.key == 0) continue;
      uint64_t i = Home(e.key & ~kFlagMask);
      while (buckets_[i].key != 0)
        if (++i == buckets_.size()) i = 0;
      buckets_[i] = e;
    }
  }

  void Allocate(uint64_t size) {
    buckets_ = std::vector<Entry>();
    buckets_.reserve(size);
    AdviseHugePages(buckets_.data(), size * sizeof(Entry));
    buckets_.assign(size, Entry{0, 0.0f, 0.0f});
  }

  std::vector<Entry> buckets_;
  uint64_t used_ = 0;
};

}  // namespace dl::ngram
