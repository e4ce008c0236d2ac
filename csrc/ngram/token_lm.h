// TokenLm: an n-gram model seen through model token ids (what lattices and decoders carry).
//
// Mapping: with `vocab` (strings, index = token id) token i is the LM word vocab[i]; without it,
// LM words that are canonical decimal integers are token ids. The map is a dense table over the
// ids below kDenseSlotsPerWord * V (the hot path: one load), and a sorted list of the few larger
// ids (binary search): numeric words of whitespace LMs such as "220194953" must not size a dense
// table by their value (that cost 880 MB on a 579k-word Wikipedia LM). Memory is O(V) either
// way. A token the LM does not know scores as <unk> when the model has one, else `oov_ln`
// (natural log) and the state resets to the null context. Scores are natural log. ScoreToken
// is O(order) hash probes, no allocation; ScoreTokens scores several tokens after one state with
// overlapped probes (NgramLM::ScoreBatch).
// TokenBound(t) >= ScoreToken(any state, t): an upper bound for admissible search heuristics.
// Preconditions: ScoreToken accepts any int32 (out-of-range ids score as unknown); callers that
// must reject them use CheckTokens (InvalidArgument naming the token and its position).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ngram/ngram_lm.h"

namespace dl {

class TokenLm {
 public:
  // Throws InvalidArgument if `vocab` misses an LM word (other than <s>, </s>, <unk>) or if
  // oov_ln is NaN or positive.
  TokenLm(std::shared_ptr<const NgramLM> model, std::optional<std::vector<std::string>> vocab,
          float oov_ln);

  int order() const { return model_->order(); }
  // The state after "<s>" (when bos) followed by `context` (only its last order-1 tokens matter).
  LmState Start(const int32_t* context, size_t n, bool bos) const;
  // The state after `tokens` following `state` (the committed text advanced by new tokens).
  LmState Advance(LmState state, const int32_t* tokens, size_t n) const {
    for (size_t i = 0; i < n; ++i) ScoreToken(state, tokens[i], &state);
    return state;
  }
  // Natural-log probability of `token` after `in`; `out` may alias `in`.
  float ScoreToken(const LmState& in, int32_t token, LmState* out) const {
    return model_->Score(in, WordOf(token), out, oov_ln_);
  }
  // ScoreToken for tokens[0..n) after the same state; `outs` must not alias `in`.
  void ScoreTokens(const LmState& in, const int32_t* tokens, int n, float* lm_ln,
                   LmState* outs) const {
    constexpr int kChunk = 64;
    WordIndex words[kChunk];
    for (int base = 0; base < n; base += kChunk) {
      const int m = n - base < kChunk ? n - base : kChunk;
      for (int i = 0; i < m; ++i) words[i] = WordOf(tokens[base + i]);
      model_->ScoreBatch(in, words, m, oov_ln_, lm_ln + base, outs + base);
    }
  }
  // Upper bound of ScoreToken(state, token) over every state.
  float TokenBound(int32_t token) const {
    const WordIndex word = WordOf(token);
    return word == kNoWord ? oov_ln_ : model_->word_bound_ln(word);
  }
  // out[i * n + j] >= ScoreToken(state, tokens[j]) for every state reached by a history ending in
  // token prev_tokens[i] (NgramLM::BoundsAfter), i < rows, j < n.
  void BoundsAfter(const int32_t* prev_tokens, int rows, const int32_t* tokens, int n,
                   float* out) const {
    constexpr int kChunk = 64;
    WordIndex prev[kChunk], words[kChunk];
    for (int rb = 0; rb < rows; rb += kChunk) {
      const int rm = rows - rb < kChunk ? rows - rb : kChunk;
      for (int i = 0; i < rm; ++i) prev[i] = WordOf(prev_tokens[rb + i]);
      for (int cb = 0; cb < n; cb += kChunk) {
        const int cm = n - cb < kChunk ? n - cb : kChunk;
        for (int j = 0; j < cm; ++j) words[j] = WordOf(tokens[cb + j]);
        model_->BoundsAfter(prev, rm, words, cm, oov_ln_, out + static_cast<size_t>(rb) * n + cb,
                            n);
      }
    }
  }
  // The same, tighter, for histories whose word before prev_tokens[i] is one of
  // before_tokens[0..n_before) (NgramLM::BoundsAfter's `before`: in a lattice, the candidates of
  // the head before), with may_precede [n_before x rows] the previous layer's may_pair (or null);
  // may_pair [rows x n] (or null) gets whether "prev_tokens[i] tokens[j]" may be stored (1) or
  // certainly is not (0). Past 64 rows, columns or words before: the plain bounds, may_pair all 1.
  void BoundsAfter(const int32_t* before_tokens, int n_before, const uint8_t* may_precede,
                   const int32_t* prev_tokens, int rows, const int32_t* tokens, int n, float* out,
                   uint8_t* may_pair) const {
    if (n_before > kRefineMax)
      return BoundsAfterRefined(nullptr, prev_tokens, rows, tokens, n, out, may_pair);
    WordIndex before[kRefineMax];
    for (int i = 0; i < n_before; ++i) before[i] = WordOf(before_tokens[i]);
    const NgramLM::Before words{before, n_before, may_precede};
    BoundsAfterRefined(&words, prev_tokens, rows, tokens, n, out, may_pair);
  }
  // ... for histories that are `state` followed by prev_tokens[i] (the word before is the state's
  // most recent word; none when the state is empty).
  void BoundsAfter(const LmState& state, const int32_t* prev_tokens, int rows,
                   const int32_t* tokens, int n, float* out, uint8_t* may_pair) const {
    const WordIndex last = state.length > 0 ? state.words[0] : kNoWord;
    const NgramLM::Before words{&last, state.length > 0 ? 1 : 0, nullptr};
    BoundsAfterRefined(&words, prev_tokens, rows, tokens, n, out, may_pair);
  }
  // The same for `state` (bounded by its most recent word only): out[j] for tokens[j].
  void BoundsAfter(const LmState& state, const int32_t* tokens, int n, float* out) const {
    constexpr int kChunk = 64;
    WordIndex words[kChunk];
    const WordIndex prev = state.length > 0 ? state.words[0] : kNoWord;
    for (int cb = 0; cb < n; cb += kChunk) {
      const int cm = n - cb < kChunk ? n - cb : kChunk;
      for (int j = 0; j < cm; ++j) words[j] = WordOf(tokens[cb + j]);
      model_->BoundsAfter(&prev, 1, words, cm, oov_ln_, out + cb, n);
    }
  }
  // Natural-log probability of </s> after `in` (oov_ln if the model has no </s>).
  float ScoreEos(const LmState& in, LmState* out) const {
    return model_->Score(in, model_->eos(), out, oov_ln_);
  }
  // The LM word of a token: kNoWord... only when unknown and the model has no <unk>.
  WordIndex WordOf(int32_t token) const {
    if (token >= 0 && static_cast<size_t>(token) < token_to_word_.size())
      return token_to_word_[token];
    return token < 0 || large_ids_.empty() ? fallback_ : LargeWordOf(token);
  }
  // Throws InvalidArgument unless `state` is a state of this model (NgramLM::CheckState).
  void CheckState(const LmState& state) const { model_->CheckState(state); }
  // Throws InvalidArgument for a negative id, or an id >= vocab size when a vocab was given.
  void CheckTokens(const int32_t* tokens, size_t n, const char* what) const;

  // Unique per constructed TokenLm (copies share it: a TokenLm never changes, so equal serials
  // mean equal scores and bounds), never 0; what LmMemo keys its owner by.
  uint64_t serial() const { return serial_; }
  const NgramLM& ngram() const { return *model_; }
  std::shared_ptr<const NgramLM> shared_model() const { return model_; }
  float oov_ln() const { return oov_ln_; }
  // Number of token ids of the vocab, or -1 when none was given.
  int64_t vocab_limit() const { return vocab_limit_; }
  // Number of LM words reachable from some token id.
  size_t mapped_words() const { return mapped_words_; }
  // Bytes of the token -> word map (both parts), for memory accounting.
  size_t map_bytes() const {
    return token_to_word_.capacity() * sizeof(WordIndex) +
           large_ids_.capacity() * sizeof(large_ids_[0]);
  }

  // Dense-table slots per LM word (numeric mode): ids at or past max(kMinDenseSlots, this x V)
  // go to the sorted list.
  static constexpr size_t kDenseSlotsPerWord = 4;
  static constexpr size_t kMinDenseSlots = size_t{1} << 16;

 private:
  WordIndex LargeWordOf(int32_t token) const;
  static constexpr int kRefineMax = 64;  // rows, columns and words before of a refined bound
  void BoundsAfterRefined(const NgramLM::Before* before, const int32_t* prev_tokens, int rows,
                          const int32_t* tokens, int n, float* out, uint8_t* may_pair) const {
    if (rows > kRefineMax || n > kRefineMax) {
      BoundsAfter(prev_tokens, rows, tokens, n, out);
      if (may_pair != nullptr) std::fill(may_pair, may_pair + static_cast<size_t>(rows) * n, 1);
      return;
    }
    WordIndex prev[kRefineMax], words[kRefineMax];
    for (int i = 0; i < rows; ++i) prev[i] = WordOf(prev_tokens[i]);
    for (int j = 0; j < n; ++j) words[j] = WordOf(tokens[j]);
    model_->BoundsAfter(prev, rows, words, n, oov_ln_, out, n, before, may_pair);
  }

  std::shared_ptr<const NgramLM> model_;
  std::vector<WordIndex> token_to_word_;                  // dense: index = token id
  std::vector<std::pair<int32_t, WordIndex>> large_ids_;  // sorted by id, all >= the dense size
  WordIndex fallback_ = kNoWord;
  float oov_ln_ = -1000.0f;
  int64_t vocab_limit_ = -1;
  size_t mapped_words_ = 0;
  uint64_t serial_ = 0;
};

}  // namespace dl
