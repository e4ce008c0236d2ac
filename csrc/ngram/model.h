// Word indices and the scoring state of the backoff n-gram model (ngram_lm.h).
//
// The model computes log p(w | h) (natural log) with exact Katz backoff (failure) semantics:
//   p(w | h) = p(w | h)              if the n-gram "h w" is listed,
//            = bo(h) * p(w | h')     otherwise, h' = h without its oldest word, recursively;
// never the epsilon approximation. A missing backoff is 0 (log). Models may be pruned
// inconsistently (an n-gram listed while its prefix or suffix is not); scoring stays exact.
//
// Scoring is by explicit state (KenLM style): Score(in, word, &out). A state keeps only the
// words that can still influence a future score, so equal states merge in hash maps during
// composition. The state after a history depends only on its last order-1 words (and on <s>
// while the history is shorter), so advancing a state token by token gives the same state as
// starting from the last order-1 tokens.
//
// THESE TYPES ARE SHARED by compose/nbest/sample (csrc/*.h) and the LM builder: change them only
// together with their users.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dl {

using WordIndex = uint32_t;                 // index into the LM's own vocabulary
constexpr WordIndex kNoWord = 0xFFFFFFFFu;  // a word the LM does not know (and no <unk>)
constexpr int kMaxOrder = 8;

struct LmState {
  // The retained history, most recent word first: the longest suffix of the history that
  // can still change a future score. Only words[0..length) are meaningful.
  std::array<WordIndex, kMaxOrder - 1> words{};
  // backoff_ln[i] = natural-log backoff weight of the context words[0..i] (derived from the
  // words; not part of equality).
  std::array<float, kMaxOrder - 1> backoff_ln{};
  uint8_t length = 0;

  bool operator==(const LmState& other) const {
    if (length != other.length) return false;
    for (int i = 0; i < length; ++i)
      if (words[i] != other.words[i]) return false;
    return true;
  }
  bool operator!=(const LmState& other) const { return !(*this == other); }
};

struct LmStateHash {
  size_t operator()(const LmState& state) const {
    uint64_t hash = 0x9E3779B97F4A7C15ull ^ state.length;
    for (int i = 0; i < state.length; ++i) {
      hash ^= state.words[i] + 0x9E3779B97F4A7C15ull + (hash << 6) + (hash >> 2);
    }
    return static_cast<size_t>(hash);
  }
};

}  // namespace dl
