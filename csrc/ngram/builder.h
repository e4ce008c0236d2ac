// NgramBuilder: assembles an NgramLM from its n-grams, given order by order (1-grams first), with
// natural-log probabilities and backoffs. Used by the ARPA reader (arpa.h) and by the LM builder
// (lmbuild/to_ngram.h), which hands over the trainer's values without a text round trip.
//
// It flags the contexts (proper prefixes of listed n-grams, adding blank entries for missing
// ones, and listed n-grams with a nonzero backoff), detects suffix closure, computes the per-word
// bounds (word_bound.h, clamped by the largest context mass of context_mass.h) and, for
// suffix-closed models, the per-bigram bounds (pair_bound.h), and lays out the hash tables.
// Inserts are pipelined: the keys of the next kPipeline n-grams are computed and their buckets
// prefetched before the oldest is inserted. Errors: FormatError "NAME:LINE: problem" for a
// duplicate 1-gram or n-gram and for a word without a 1-gram (`line` is the caller's position, e.g.
// the ARPA line; 0 when there is none).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "errors.h"
#include "ngram/context_mass.h"
#include "ngram/hash_table.h"
#include "ngram/ngram_lm.h"
#include "ngram/pair_bound.h"
#include "ngram/vocab_index.h"
#include "ngram/word_bound.h"

namespace dl {

class NgramBuilder {
 public:
  // counts[n - 1]: number of n-grams of order n (1 <= order <= kMaxOrder, counts[0] >= 1).
  // `presize`: the most entries per order allocated before they are added (the tables grow
  // past it), for counts nobody has checked yet (an ARPA stream's header). The model is the
  // same either way, byte for byte.
  NgramBuilder(std::vector<uint64_t> counts, std::unordered_map<std::string, std::string> metadata,
               std::string name, uint64_t presize = ~uint64_t{0});

  int order() const { return parts_.order; }
  // The word is copied (the caller's buffer may change after the call).
  void AddUnigram(std::string_view word, float prob_ln, float backoff_ln, size_t line);
  // words[0..n): the n-gram, oldest first; each must have been added as a 1-gram.
  void AddNgram(int n, const std::string_view* words, float prob_ln, float backoff_ln, size_t line);
  // After the last n-gram of order n (inserts the pipeline's rest).
  void EndOrder(int n);
  // The model; `source_format` names where the n-grams came from ("arpa", "lmbuild").
  std::unique_ptr<NgramLM> Finish(const std::string& source_format);

 private:
  struct Pending {
    WordIndex ids[kMaxOrder];
    int n;
    float prob, backoff;
    uint64_t key, prefix_key, suffix_key;
    size_t line_no;
  };
  static constexpr int kPipeline = 16;

  // Word i of the 1-grams added so far (in parts_.vocab_blob; vocab_offsets has no end entry
  // until Finish).
  struct WordOfFn {
    const NgramLM::Parts* parts;
    std::string_view operator()(WordIndex i) const {
      const uint64_t end = i + 1 < parts->vocab_offsets.size() ? parts->vocab_offsets[i + 1]
                                                               : parts->vocab_blob.size();
      const uint64_t begin = parts->vocab_offsets[i];
      return std::string_view(parts->vocab_blob).substr(begin, end - begin);
    }
  };
  WordOfFn WordOf() const { return WordOfFn{&parts_}; }

  template <typename... Parts>
  [[noreturn]] void Fail(size_t line, const Parts&... parts) const {
    throw FormatError(Message(name_, ":", line, ": ", parts...));
  }

  void StartWordBounds();
  void Insert(const Pending& p);
  bool CheckDeferredSuffixes();
  float MarkPrefix(const WordIndex* ids, int m);
  void MarkBackoffContexts();
  static uint64_t KeyOf(const WordIndex* ids, int n);

  std::string name_;
  NgramLM::Parts parts_;
  std::vector<ngram::TableBuilder> tables_;  // tables_[i]: order i + 2
  // The builders sized by the vocabulary start after the 1-grams (StartWordBounds).
  std::optional<ngram::WordBoundBuilder> bounds_;
  std::optional<ngram::ContextMassBuilder> mass_;  // clamps the word bounds (context_mass.h)
  bool mass_decided_ = false;  // whether mass_ is kept: decided at the first 3-gram
  std::optional<ngram::PairBoundBuilder> pair_bounds_;    // order >= 2
  std::vector<std::vector<uint64_t>> deferred_suffixes_;  // [m - 1]: keys of m-grams to check
  Pending pending_[kPipeline];
  int pending_head_ = 0;   // next slot to fill
  int pending_count_ = 0;  // filled slots not yet inserted
  uint64_t presize_;
  // [n - 2]: the keys of the order-n n-grams in insertion order, for a table presized below its
  // count (EndOrder replays them into a table of the final size).
  std::vector<std::vector<uint64_t>> insertion_order_;
  ngram::VocabIndex index_;
};

}  // namespace dl
