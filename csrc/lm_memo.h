// LmMemo: LM results remembered across the drafting calls of one decoding loop (MemoLm,
// memo_lm.h, reads and fills it).
//
// Why: a drafting step runs right after the target's forward pass, which evicts the LM's lines
// from the caches, so each LM probe of the search is a cache miss: the search took 76 us of a
// 1-best drafting step cold against 34 us warm (default model, 7x8 lattices, katz4). Yet the
// decoding loop asks the same questions again and again, because each step's lattice continues
// the text the last one drafted:
//  - of the candidate pairs of adjacent heads whose search bounds a lattice needs, 74% were in
//    the previous lattice and 96% in some earlier one (1,300 distinct pairs over 293 lattices);
//  - of the arcs (LM state, token) the search scored, 63% were scored in the previous call and
//    96% in some earlier one (7,053 distinct arcs over 572 calls).
// A remembered answer costs one line of a small table instead of several lines of the LM.
//
// Two direct-mapped tables: pair bounds keyed by the (previous token, token) ids, and arc scores
// keyed by the state's words, its length and the token (verified exactly), plus a 64-bit hash of
// the state's backoffs (which the LM derives from the words; hashed only so that a state not made
// by this LM cannot answer for one that was). An entry is a function of the LM and its key only,
// so a hit is exact. Arcs are remembered for states of up to kMaxWords words (LMs of order <= 5)
// so that an entry fits one cache line. The memo belongs to one TokenLm at a time (by serial
// number: unique per constructed model, and a TokenLm never changes); handed another, it forgets
// everything first. Not thread-safe: one user at a time (the binding holds mutex() around a call,
// and goes without the memo when another thread holds it).
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "hash.h"
#include "ngram/model.h"

namespace dl {

class LmMemo {
 public:
  static constexpr int kPairSlots = 4096;  // 64 KiB
  static constexpr int kArcSlots = 8192;   // 512 KiB
  static constexpr int kMaxWords = 4;      // longest state whose arcs are remembered

  struct PairSlot {
    uint64_t key = kEmptyPair;  // (previous token << 32) | token
    float bound = 0;
  };
  struct alignas(64) ArcSlot {
    uint64_t tag = 0;  // ArcTag; 0 = empty
    WordIndex in_words[kMaxWords];
    int32_t token;
    float lm_ln;
    WordIndex next_word;  // the next state's words[0] (its others are the in-state's)
    float next_backoff[kMaxWords];
    uint8_t in_length, next_length;
  };
  static_assert(sizeof(ArcSlot) == 64, "one cache line per arc");

  LmMemo() : pairs_(kPairSlots), arcs_(kArcSlots) {}

  // Forgets everything unless the entries belong to the TokenLm of serial `owner`.
  void Claim(uint64_t owner) {
    if (owner == owner_) return;
    pairs_.assign(kPairSlots, PairSlot{});
    arcs_.assign(kArcSlots, ArcSlot{});
    owner_ = owner;
  }

  static uint64_t PairKey(int32_t prev, int32_t token) {
    return uint64_t{static_cast<uint32_t>(prev)} << 32 | static_cast<uint32_t>(token);
  }
  PairSlot& Pair(uint64_t key) { return pairs_[Mix64(key) & (kPairSlots - 1)]; }

  // Nonzero tag of the arc (state, token); the state holds <= kMaxWords words.
  static uint64_t ArcTag(const LmState& in, int32_t token) {
    // Multiply-xor steps, one full mix at the end: a hit must cost less than the LM's probes.
    uint64_t hash = uint64_t{static_cast<uint32_t>(token)} << 8 | in.length;
    for (int i = 0; i < in.length; ++i) {
      uint32_t backoff;
      std::memcpy(&backoff, &in.backoff_ln[i], sizeof backoff);
      hash = (hash ^ (uint64_t{in.words[i]} << 32 | backoff)) * 0x9E3779B97F4A7C15ull;
    }
    return Mix64(hash) | 1;
  }
  ArcSlot& Arc(uint64_t tag) { return arcs_[(tag >> 1) & (kArcSlots - 1)]; }
  // Whether `slot` holds the arc (in, token) of tag `tag`.
  static bool Holds(const ArcSlot& slot, uint64_t tag, const LmState& in, int32_t token) {
    if (slot.tag != tag || slot.token != token || slot.in_length != in.length) return false;
    for (int i = 0; i < in.length; ++i)
      if (slot.in_words[i] != in.words[i]) return false;
    return true;
  }

  // Lookups and hits since construction (for tests and benchmarks).
  int64_t pair_lookups = 0, pair_hits = 0, arc_lookups = 0, arc_hits = 0;
  std::mutex& mutex() { return mutex_; }

 private:
  // Token ids are validated non-negative before a search, so no pair's key is this.
  static constexpr uint64_t kEmptyPair = ~uint64_t{0};

  std::vector<PairSlot> pairs_;
  std::vector<ArcSlot> arcs_;
  uint64_t owner_ = 0;  // serial of the TokenLm the entries belong to; 0: none (serials start at 1)
  std::mutex mutex_;
};

}  // namespace dl
