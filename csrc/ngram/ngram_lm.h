// NgramLM: the backoff n-gram model (model.h), stored as per-order probing hash tables.
//
// Scoring (exact Katz backoff, see model.h): for word w after state words h_1..h_L (most recent
// first), probe the suffix lengths j = 1..L, take the longest listed match m and add the
// backoffs of the contexts longer than m, which the state carries. O(L) probes per word.
// Early stop: when the model is suffix-closed (every stored n-gram's suffix is stored, as in
// lmplz output; detected at ARPA load, kept by the binary format), no n-gram "h_j' .. w" with
// j' > j can exist once "h_j .. w" is absent, so probing stops there. Otherwise (inconsistently
// pruned models) every length is probed. ScoreBatch scores several words after one state,
// computing all keys of an order and prefetching their buckets before resolving any, so that
// the cache misses of the candidates overlap; a per-order Bloom filter built at load
// (key_filter.h) answers most probes of unlisted n-grams without touching the table.
//
// word_bound_ln(w) >= ln p(w | h) for every history h (word_bound.h), for search heuristics;
// BoundsAfter bounds ln p(w | h) for the histories ending in a given word, tighter where the
// model has pair bounds (pair_bound.h, built with suffix-closed models, kept by .dlm version 3).
//
// State minimisation: a history suffix s is kept iff s is a proper prefix of a listed n-gram or
// s is listed with a nonzero backoff (flag kFlagContext, set at build time; missing prefixes get
// "blank" entries so that they can be found). The state is the longest such suffix.
//
// Storage is either owned vectors (built by NgramBuilder, builder.h: from ARPA text or from the LM
// builder's model) or a memory-mapped binary file (binary.h); the model reads both through the
// same views.
#pragma once

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ngram/hash_table.h"
#include "ngram/key_filter.h"
#include "ngram/model.h"
#include "ngram/vocab_index.h"

namespace dl {

class NgramLM {
 public:
  // Everything a model consists of, as built by the ARPA reader.
  struct Parts {
    int order = 0;
    std::vector<uint64_t> counts;         // listed n-grams per order
    std::string vocab_blob;               // all words, concatenated
    std::vector<uint64_t> vocab_offsets;  // size V + 1: word i = blob[off[i], off[i+1])
    std::vector<ngram::Entry> unigrams;   // size V, indexed by WordIndex (key = flags only)
    std::vector<std::vector<ngram::Entry>> tables;  // tables[i]: buckets of order i + 2
    std::unordered_map<std::string, std::string> metadata;
    bool suffix_closed = false;             // every stored n-gram's suffix is stored
    std::vector<float> word_bounds;         // size V (word_bound.h)
    std::vector<float> pair_bounds;         // size = bigram buckets, or empty (pair_bound.h)
    std::vector<float> word_slack;          // size V with pair_bounds: slack_v(2) (pair_bound.h)
    std::vector<uint64_t> extension_masks;  // size = bigram buckets, or empty (pair_bound.h)
    std::string source_format = "arpa";     // what the parts were built from ("arpa", "lmbuild")
  };
  // Read-only views over storage owned elsewhere (binary file mapping); `keep_alive` owns it.
  struct Views {
    int order = 0;
    std::vector<uint64_t> counts;
    const char* vocab_blob = nullptr;
    const uint64_t* vocab_offsets = nullptr;
    uint64_t vocab_size = 0;
    const ngram::Entry* unigrams = nullptr;
    std::vector<ngram::TableView> tables;
    std::unordered_map<std::string, std::string> metadata;
    bool suffix_closed = false;
    const float* word_bounds = nullptr;  // size V; nullptr: derive a (weaker) bound from the tables
    const float* pair_bounds = nullptr;  // size = bigram buckets; nullptr: none (pair_bound.h)
    const float* word_slack = nullptr;   // size V, with pair_bounds
    const uint64_t* extension_masks = nullptr;  // size = bigram buckets, with pair_bounds, or null
    std::shared_ptr<const void> keep_alive;
  };

  explicit NgramLM(Parts parts);
  explicit NgramLM(Views views);

  int order() const { return order_; }
  // Number of listed n-grams per order, counts()[0] = unigrams.
  std::vector<uint64_t> counts() const { return counts_; }
  // Index of an ARPA word, or kNoWord.
  WordIndex Index(std::string_view word) const;
  size_t vocab_size() const { return vocab_size_; }
  std::string_view Word(WordIndex index) const;
  // Index of <unk>, <s>, </s> (kNoWord if the model lacks them).
  WordIndex unk() const { return unk_; }
  WordIndex bos() const { return bos_; }
  WordIndex eos() const { return eos_; }
  // Metadata from "# key: value" lines before \data\ (kept by the binary format).
  const std::unordered_map<std::string, std::string>& metadata() const { return metadata_; }
  // The empty history, and the history "<s>".
  LmState NullContextState() const { return LmState{}; }
  LmState BeginSentenceState() const { return begin_; }
  // Natural-log probability of `word` after `in`; writes the successor state to `out`
  // (`out` may alias `in`). `word` == kNoWord scores `oov_ln` and resets to the null context.
  // Precondition: `word` comes from Index() or is kNoWord; `in` is valid (CheckState).
  float Score(const LmState& in, WordIndex word, LmState* out, float oov_ln) const;
  // Throws InvalidArgument unless `state` can come from this model (length <= order - 1,
  // word ids < vocab_size()): a state of another model must not index past the tables.
  void CheckState(const LmState& state) const;
  // Score for n words after the same state: probs_ln[i] and outs[i] as Score(in, words[i], ...).
  // `outs` must not alias `in`.
  void ScoreBatch(const LmState& in, const WordIndex* words, int n, float oov_ln, float* probs_ln,
                  LmState* outs) const;
  // Upper bounds after a known previous word: out[i * stride + j] >= ln p(words[j] | h) for every
  // history h that ends in prev[i] (prev[i] == kNoWord: every history whose state is the null
  // context, e.g. after a word the model does not know). A word of kNoWord gets oov_ln. In a
  // suffix-closed model, when "prev w" is not stored (the bigram key filter says so; no table
  // probe), no longer n-gram ending in "prev w" is stored either, so ln p(w | h) = ln p(w) + the
  // backoffs of the contexts of h <= ln p(w) + bo(prev) + the largest positive backoffs of the
  // longer contexts (those of the contexts ending in prev when the model has pair bounds,
  // pair_bound.h); after a null state it is exactly ln p(w). When "prev w" is stored and the
  // model has pair bounds, min(word_bound_ln(w), the pair's bound), at the cost of one bigram
  // table probe. Otherwise word_bound_ln(w).
  //
  // With `before` (not null): every history bounded also has, right before prev[i], one of the
  // words before->words[0..n) (the search's histories: the candidates of the head before, or the
  // context's last word), or a word after which the state is prev[i] alone. A stored pair
  // "prev w" is then bounded by the bigram's own probability plus slack_v(2) (pair_bound.h)
  // instead of its pair bound (which covers every n-gram ending in "prev w", often a 4-gram in
  // which w is nearly certain) unless its extension mask (pair_bound.h, format version 4) has
  // the bit of some u of `before` whose "u prev" may be stored (before->may_precede, or the
  // bigram key filter when it is null): only a listed n-gram ending in "u prev w" can match past
  // the bigram. With `may_pair` (not null): may_pair[i * n + j] = 0 where "prev[i] words[j]" is
  // certainly not stored, 1 where it may be (the next layer's may_precede).
  struct Before {
    const WordIndex* words = nullptr;
    int n = 0;
    const uint8_t* may_precede = nullptr;  // [n x rows]: may "words[b] prev[i]" be stored; or null
  };
  void BoundsAfter(const WordIndex* prev, int rows, const WordIndex* words, int n, float oov_ln,
                   float* out, size_t stride, const Before* before = nullptr,
                   uint8_t* may_pair = nullptr) const;
  bool suffix_closed() const { return suffix_closed_; }
  // Upper bound of ln p(word | any history); `word` < vocab_size().
  float word_bound_ln(WordIndex word) const { return word_bounds_[word]; }
  const float* word_bounds() const { return word_bounds_; }
  // One bound per bucket of the bigram table and slack_v(2) per word (pair_bound.h), or nullptr
  // when the model has none.
  const float* pair_bounds() const { return pair_bounds_; }
  const float* word_slack() const { return word_slack_; }
  // One extension mask per bucket of the bigram table (pair_bound.h), or nullptr.
  const uint64_t* extension_masks() const { return extension_masks_; }

  // Raw storage, for the binary writer.
  const char* vocab_blob() const { return vocab_blob_; }
  const uint64_t* vocab_offsets() const { return vocab_offsets_; }
  const ngram::Entry* unigrams() const { return unigrams_; }
  const ngram::TableView& table(int n) const { return tables_[n - 1]; }  // n >= 2
  // "arpa", "lmbuild" (the trainer's model) or "binary": where the model came from.
  const std::string& source_format() const { return source_format_; }

 private:
  void Finish();  // builds the word index, special words and the begin state
  // ScoreBatch for states of kLength words: every loop over the state's words has a constant
  // trip count, so it unrolls (the search's per-arc cost is mostly instructions once the LM's
  // lines are in cache).
  template <int kLength>
  void ScoreBatchOf(const LmState& in, const WordIndex* words, int n, float oov_ln, float* probs_ln,
                    LmState* outs) const;
  using ScoreBatchFn = void (NgramLM::*)(const LmState&, const WordIndex*, int, float, float*,
                                         LmState*) const;
  template <size_t... L>
  static constexpr std::array<ScoreBatchFn, sizeof...(L)> ScoreBatchTable(
      std::index_sequence<L...>) {
    return {&NgramLM::ScoreBatchOf<static_cast<int>(L)>...};
  }
  // Resolves one word from the entries found at each suffix length (nullptr = absent).
  template <int kLength>
  float Resolve(const LmState& in, WordIndex word, const ngram::Entry* const* found,
                LmState* out) const;
  // `bound` rounded up to a float with a margin: Score sums the terms of a bound in float, which
  // may round above their exact sum. -inf (an impossible word) stays -inf, not NaN.
  static float WithMargin(double bound) {
    return static_cast<float>(bound == -HUGE_VAL ? bound : bound + 1e-5 * (1.0 + std::fabs(bound)));
  }

  int order_ = 0;
  std::vector<uint64_t> counts_;
  const char* vocab_blob_ = nullptr;
  const uint64_t* vocab_offsets_ = nullptr;
  uint64_t vocab_size_ = 0;
  const ngram::Entry* unigrams_ = nullptr;
  ngram::TableView tables_[kMaxOrder];   // tables_[j] holds order j + 1 (tables_[0] unused)
  ngram::KeyFilter filters_[kMaxOrder];  // filters_[j]: the keys of tables_[j] (key_filter.h)
  std::unordered_map<std::string, std::string> metadata_;
  ngram::VocabIndex index_;
  WordIndex unk_ = kNoWord, bos_ = kNoWord, eos_ = kNoWord;
  LmState begin_;
  bool suffix_closed_ = false;
  const float* word_bounds_ = nullptr;
  const float* pair_bounds_ = nullptr;  // with word_slack_, or neither
  const float* word_slack_ = nullptr;
  const uint64_t* extension_masks_ = nullptr;  // with pair_bounds_ (format version >= 4), or null
  // Sum over context lengths i >= 2 of max(0, largest backoff of an i-word context), natural log.
  double backoff_slack2_ln_ = 0;
  std::vector<float> derived_bounds_;  // when a version-1 binary file has none
  std::string source_format_;

  Parts owned_;                         // storage when built from ARPA
  std::shared_ptr<const void> mapped_;  // storage when mapped from a binary file
};

}  // namespace dl
