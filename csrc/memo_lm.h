// MemoLm: a TokenLm seen through an LmMemo (lm_memo.h), for the search of nbest.h / compose.h.
//
// Same scores, states and bounds as the TokenLm (an entry is a function of the LM and its key),
// answered from the memo when an earlier call of the decoding loop asked the same question, and
// computed by the TokenLm and remembered otherwise. Batches keep the LM's overlapped probes: the
// memo lines of a batch are prefetched together, and its misses go to the TokenLm as one batch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "lm_memo.h"
#include "ngram/token_lm.h"

namespace dl {

class MemoLm {
 public:
  // `memo` must outlive this view, and no other thread may use it meanwhile.
  MemoLm(const TokenLm& lm, LmMemo* memo) : lm_(lm), memo_(*memo) { memo_.Claim(lm.serial()); }

  LmState Start(const int32_t* context, size_t n, bool bos) const {
    return lm_.Start(context, n, bos);
  }
  void CheckTokens(const int32_t* tokens, size_t n, const char* what) const {
    lm_.CheckTokens(tokens, n, what);
  }
  void CheckState(const LmState& state) const { lm_.CheckState(state); }

  float ScoreToken(const LmState& in, int32_t token, LmState* out) const {
    float lm_ln;
    LmState next;
    ScoreTokens(in, &token, 1, &lm_ln, &next);
    *out = next;
    return lm_ln;
  }

  // TokenLm::ScoreTokens; `outs` must not alias `in`.
  void ScoreTokens(const LmState& in, const int32_t* tokens, int n, float* lm_ln,
                   LmState* outs) const {
    if (in.length > LmMemo::kMaxWords) return lm_.ScoreTokens(in, tokens, n, lm_ln, outs);
    tags_.resize(n);
    for (int i = 0; i < n; ++i) {
      tags_[i] = LmMemo::ArcTag(in, tokens[i]);
      __builtin_prefetch(&memo_.Arc(tags_[i]));
    }
    misses_.clear();
    miss_tokens_.clear();
    for (int i = 0; i < n; ++i) {
      const LmMemo::ArcSlot& slot = memo_.Arc(tags_[i]);
      if (LmMemo::Holds(slot, tags_[i], in, tokens[i])) {
        lm_ln[i] = slot.lm_ln;
        Restore(in, slot, &outs[i]);
      } else {
        misses_.push_back(i);
        miss_tokens_.push_back(tokens[i]);
      }
    }
    const int m = static_cast<int>(misses_.size());
    memo_.arc_lookups += n;
    memo_.arc_hits += n - m;
    if (m == 0) return;
    miss_ln_.resize(m);
    miss_states_.resize(m);
    lm_.ScoreTokens(in, miss_tokens_.data(), m, miss_ln_.data(), miss_states_.data());
    for (int a = 0; a < m; ++a) {
      const int i = misses_[a];
      lm_ln[i] = miss_ln_[a];
      outs[i] = miss_states_[a];
      Remember(in, tokens[i], tags_[i], miss_ln_[a], miss_states_[a]);
    }
  }

  // TokenLm::BoundsAfter after previous tokens, pairs answered from the memo where it can.
  void BoundsAfter(const int32_t* prev_tokens, int rows, const int32_t* tokens, int n,
                   float* out) const {
    miss_tokens_.resize(n);
    misses_.resize(n);
    miss_ln_.resize(n);
    for (int r = 0; r < rows; ++r) {
      float* row = out + static_cast<size_t>(r) * n;
      int m = 0;
      for (int j = 0; j < n; ++j) {
        const uint64_t key = LmMemo::PairKey(prev_tokens[r], tokens[j]);
        const LmMemo::PairSlot& slot = memo_.Pair(key);
        if (slot.key == key) {
          row[j] = slot.bound;
        } else {
          misses_[m] = j;
          miss_tokens_[m++] = tokens[j];
        }
      }
      memo_.pair_lookups += n;
      memo_.pair_hits += n - m;
      if (m == 0) continue;
      lm_.BoundsAfter(&prev_tokens[r], 1, miss_tokens_.data(), m, miss_ln_.data());
      for (int a = 0; a < m; ++a) {
        row[misses_[a]] = miss_ln_[a];
        const uint64_t key = LmMemo::PairKey(prev_tokens[r], miss_tokens_[a]);
        memo_.Pair(key) = {key, miss_ln_[a]};
      }
    }
  }
  // The bounds refined by the word before (TokenLm) depend on the lattice's candidates, not on
  // the pair alone: the memo answers with the pair's own bound instead (admissible, looser), which
  // in decoding costs less than the refined bound's cold LM probes (bench/drafting_share.py:
  // 1-best 4.7-4.8% of a step this way, 5.1-5.2% refined without the memo).
  void BoundsAfter(const int32_t*, int, const uint8_t*, const int32_t* prev_tokens, int rows,
                   const int32_t* tokens, int n, float* out, uint8_t* may_pair) const {
    PairOnlyBounds(prev_tokens, rows, tokens, n, out, may_pair);
  }
  void BoundsAfter(const LmState&, const int32_t* prev_tokens, int rows, const int32_t* tokens,
                   int n, float* out, uint8_t* may_pair) const {
    PairOnlyBounds(prev_tokens, rows, tokens, n, out, may_pair);
  }
  // After a state: a few pairs per lattice, state-dependent; not remembered.
  void BoundsAfter(const LmState& state, const int32_t* tokens, int n, float* out) const {
    lm_.BoundsAfter(state, tokens, n, out);
  }

 private:
  // The memo's pair bounds, and every pair marked as possibly stored (nothing is refined here).
  void PairOnlyBounds(const int32_t* prev_tokens, int rows, const int32_t* tokens, int n,
                      float* out, uint8_t* may_pair) const {
    BoundsAfter(prev_tokens, rows, tokens, n, out);
    if (may_pair != nullptr) std::fill(may_pair, may_pair + static_cast<size_t>(rows) * n, 1);
  }
  // The next state of a remembered arc: its word, then the in-state's words (as NgramLM writes
  // it), the remembered backoffs, zeros past its length.
  static void Restore(const LmState& in, const LmMemo::ArcSlot& slot, LmState* out) {
    *out = LmState{};
    out->length = slot.next_length;
    for (int i = 0; i < slot.next_length; ++i) {
      out->words[i] = i == 0 ? slot.next_word : in.words[i - 1];
      out->backoff_ln[i] = slot.next_backoff[i];
    }
  }
  void Remember(const LmState& in, int32_t token, uint64_t tag, float lm_ln,
                const LmState& next) const {
    // The next state is (word, in.words...) truncated, as NgramLM builds it; one of more words
    // than the memo keeps (impossible for in.length <= kMaxWords - 1) is not remembered.
    if (next.length > LmMemo::kMaxWords) return;
    LmMemo::ArcSlot& slot = memo_.Arc(tag);
    slot.tag = tag;
    for (int i = 0; i < in.length; ++i) slot.in_words[i] = in.words[i];
    slot.token = token;
    slot.lm_ln = lm_ln;
    slot.next_word = next.length > 0 ? next.words[0] : 0;
    for (int i = 0; i < next.length; ++i) slot.next_backoff[i] = next.backoff_ln[i];
    slot.in_length = in.length;
    slot.next_length = next.length;
  }

  const TokenLm& lm_;
  LmMemo& memo_;
  // Per-call scratch (a MemoLm lives for one call).
  mutable std::vector<uint64_t> tags_;
  mutable std::vector<int> misses_;
  mutable std::vector<int32_t> miss_tokens_;
  mutable std::vector<float> miss_ln_;
  mutable std::vector<LmState> miss_states_;
};

// search(view) with the memo's view of `lm` (a MemoLm) when `memo` is given and no other thread
// holds it, else with `lm` itself: the result is the same either way, and going without the memo
// is faster than waiting for it.
template <typename Search>
auto WithMemo(const TokenLm& lm, LmMemo* memo, Search search) {
  if (memo != nullptr) {
    std::unique_lock<std::mutex> lock(memo->mutex(), std::try_to_lock);
    if (lock.owns_lock()) return search(MemoLm(lm, memo));
  }
  return search(lm);
}

}  // namespace dl
