// NgramLM: the backoff n-gram model behind NgramModel, stored as per-order probing hash tables.
//
// Scoring (exact Katz backoff, see model.h): for word w after state words h_1..h_L (most recent
// first), probe every suffix length j = 0..L (no early stop: pruned models may list "h_j .. w"
// while a shorter one is missing), take the longest listed match m and add the backoffs of the
// contexts longer than m, which the state carries. O(L) probes per word.
//
// State minimisation: a history suffix s is kept iff s is a proper prefix of a listed n-gram or
// s is listed with a nonzero backoff (flag kFlagContext, set at build time; missing prefixes get
// "blank" entries so that they can be found). The state is the longest such suffix.
//
// Storage is either owned vectors (ARPA load) or a memory-mapped binary file (binary.h); the model
// reads both through the same views.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ngram/hash_table.h"
#include "ngram/model.h"
#include "ngram/vocab_index.h"

namespace dl {

class NgramLM final : public NgramModel {
 public:
  // Everything a model consists of, as built by the ARPA reader.
  struct Parts {
    int order = 0;
    std::vector<uint64_t> counts;          // listed n-grams per order
    std::string vocab_blob;                // all words, concatenated
    std::vector<uint64_t> vocab_offsets;   // size V + 1: word i = blob[off[i], off[i+1])
    std::vector<ngram::Entry> unigrams;    // size V, indexed by WordIndex (key = flags only)
    std::vector<std::vector<ngram::Entry>> tables;  // tables[i]: buckets of order i + 2
    std::unordered_map<std::string, std::string> metadata;
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
    std::shared_ptr<const void> keep_alive;
  };

  explicit NgramLM(Parts parts);
  explicit NgramLM(Views views);

  int order() const override { return order_; }
  std::vector<uint64_t> counts() const override { return counts_; }
  WordIndex Index(std::string_view word) const override;
  size_t vocab_size() const override { return vocab_size_; }
  std::string_view Word(WordIndex index) const override;
  WordIndex unk() const override { return unk_; }
  WordIndex bos() const override { return bos_; }
  WordIndex eos() const override { return eos_; }
  const std::unordered_map<std::string, std::string>& metadata() const override {
    return metadata_;
  }
  LmState NullContextState() const override { return LmState{}; }
  LmState BeginSentenceState() const override { return begin_; }
  float Score(const LmState& in, WordIndex word, LmState* out, float oov_ln) const override;

  // Raw storage, for the binary writer.
  const char* vocab_blob() const { return vocab_blob_; }
  const uint64_t* vocab_offsets() const { return vocab_offsets_; }
  const ngram::Entry* unigrams() const { return unigrams_; }
  const ngram::TableView& table(int n) const { return tables_[n - 1]; }  // n >= 2
  // "arpa" or "binary": where the model came from.
  const std::string& source_format() const { return source_format_; }
  void set_source_format(std::string format) { source_format_ = std::move(format); }

 private:
  void Finish();  // builds the word index, special words and the begin state

  int order_ = 0;
  std::vector<uint64_t> counts_;
  const char* vocab_blob_ = nullptr;
  const uint64_t* vocab_offsets_ = nullptr;
  uint64_t vocab_size_ = 0;
  const ngram::Entry* unigrams_ = nullptr;
  ngram::TableView tables_[kMaxOrder];  // tables_[j] holds order j + 1 (tables_[0] unused)
  std::unordered_map<std::string, std::string> metadata_;
  ngram::VocabIndex index_;
  WordIndex unk_ = kNoWord, bos_ = kNoWord, eos_ = kNoWord;
  LmState begin_;
  std::string source_format_ = "arpa";

  Parts owned_;                          // storage when built from ARPA
  std::shared_ptr<const void> mapped_;   // storage when mapped from a binary file
};

}  // namespace dl
