// Backoff n-gram language model with exact Katz backoff (failure) semantics.
//
// Computes log p(w | h) (natural log) for an ARPA-defined model:
//   p(w | h) = p(w | h)              if the n-gram "h w" is listed,
//            = bo(h) * p(w | h')     otherwise, h' = h without its oldest word, recursively;
// never the epsilon approximation. A missing backoff is 0 (log). Models may be pruned
// inconsistently (an n-gram listed while its prefix or suffix is not); scoring stays exact.
//
// Scoring is by explicit state (KenLM style): Score(in, word, &out). A state keeps only the
// words that can still influence a future score, so equal states merge in hash maps during
// composition. Cost of Score: O(order) hash probes.
//
// Preconditions: word indices come from this model's vocabulary (Index()), or kNoWord.
//
// THIS INTERFACE IS SHARED by compose/nbest/sample (csrc/*.h) and the trainer: change it only
// together with its users.
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

class NgramModel {
 public:
  virtual ~NgramModel() = default;

  virtual int order() const = 0;
  // Number of listed n-grams per order, counts()[0] = unigrams.
  virtual std::vector<uint64_t> counts() const = 0;
  // Index of an ARPA word, or kNoWord.
  virtual WordIndex Index(std::string_view word) const = 0;
  virtual size_t vocab_size() const = 0;
  virtual std::string_view Word(WordIndex index) const = 0;
  // Index of <unk>, <s>, </s> (kNoWord if the model lacks them).
  virtual WordIndex unk() const = 0;
  virtual WordIndex bos() const = 0;
  virtual WordIndex eos() const = 0;
  // Metadata from "# key: value" lines before \data\ (kept by the binary format).
  virtual const std::unordered_map<std::string, std::string>& metadata() const = 0;

  // The empty history.
  virtual LmState NullContextState() const = 0;
  // The history "<s>".
  virtual LmState BeginSentenceState() const = 0;
  // Natural-log probability of `word` after `in`; writes the successor state to `out`
  // (`out` may alias `in`). `word` == kNoWord scores `oov_ln` and resets to the null context.
  virtual float Score(const LmState& in, WordIndex word, LmState* out,
                      float oov_ln) const = 0;
};

}  // namespace dl
