// Streaming n-gram counting over sentences (one input line = one sentence).
//
// Each sentence w_1..w_m is counted as <s> w_1 .. w_m </s>: every n-gram of order 1..N that ends
// at w_1..w_m or </s> gets +1 (raw counts at every order, as OpenGrm's ngramcount), and the
// unigram <s> counts the sentences. <s> is only a context, never predicted.
//
// Storage: word ids are dense, in order of first appearance, with <s> = 0 and </s> = 1 (the
// order OpenGrm's symbol table gives, which fixes the ARPA line order). An n-gram of order
// k >= 2 is the pair (index of its (k-1)-word prefix at order k-1, last word), so every order is
// a flat array of (prefix, word, count) records plus an open-addressing hash index over the
// packed pair. Memory is about 28 bytes per distinct n-gram, independent of the corpus size.
// Cost: N-1 hash probes per token.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dl::lmbuild {

using WordId = uint32_t;
constexpr WordId kBos = 0;  // <s>
constexpr WordId kEos = 1;  // </s>

// Open-addressing hash from a packed (prefix, word) pair to a dense index.
class PairIndex {
 public:
  PairIndex();
  // Index of (prefix, word); inserts it as `next_index` when absent (and sets *inserted).
  uint32_t FindOrInsert(uint32_t prefix, uint32_t word, uint32_t next_index, bool* inserted);
  // Index of (prefix, word) or kAbsent.
  uint32_t Find(uint32_t prefix, uint32_t word) const;
  size_t size() const { return size_; }
  size_t memory_bytes() const { return keys_.capacity() * 12; }
  void Clear();
  static constexpr uint32_t kAbsent = 0xFFFFFFFFu;

 private:
  static uint64_t Pack(uint32_t prefix, uint32_t word) {
    return (static_cast<uint64_t>(prefix) << 32) | word;
  }
  void Grow();
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> values_;
  size_t size_ = 0;
  uint64_t mask_ = 0;
};

// The n-grams of one order k >= 2: parallel arrays indexed by the n-gram's index.
struct CountTable {
  std::vector<uint32_t> prefix;  // index of the (k-1)-gram prefix (a word id when k = 2)
  std::vector<WordId> word;      // last word
  std::vector<uint64_t> count;
  PairIndex index;
  size_t size() const { return word.size(); }
};

class NgramCounter {
 public:
  explicit NgramCounter(int order);  // 1 <= order <= kMaxTrainOrder
  // Throws InvalidArgument unless 1 <= order <= kMaxTrainOrder.
  static void CheckOrder(int order);

  int order() const { return order_; }
  // Whitespace mode: `text` holds lines separated by '\n'; words are separated by ASCII
  // whitespace. Lines without words are skipped. Precondition: valid UTF-8 (checked by caller).
  void AddText(std::string_view text);
  // Token mode: one sentence of token ids (each >= 0); words are their decimal spellings.
  // An empty sentence is skipped. Mixing with AddText in one counter is an error.
  void AddTokens(const int32_t* ids, size_t n);

  uint64_t sentences() const { return sentences_; }
  uint64_t tokens() const { return tokens_; }          // words counted, </s> excluded
  size_t vocab_size() const { return words_.size(); }  // including <s> and </s>
  const std::string& Word(WordId id) const { return words_[id]; }
  // Number of distinct n-grams of order k (k = 1 counts <s> and </s>).
  uint64_t NumNgrams(int k) const;
  uint64_t UnigramCount(WordId w) const { return unigram_count_[w]; }
  const std::vector<uint64_t>& unigram_counts() const { return unigram_count_; }
  const CountTable& table(int k) const { return tables_[k - 2]; }  // k >= 2
  size_t memory_bytes() const;
  // Releases the hash indices (the records stay); counting is over afterwards.
  void FreeIndices();

  static constexpr int kMaxTrainOrder = 8;

 private:
  void AddSentence(const WordId* words, size_t n);
  WordId InternWord(std::string_view word);
  WordId InternToken(int32_t token);

  int order_;
  uint64_t sentences_ = 0;
  uint64_t tokens_ = 0;
  int mode_ = 0;  // 0 unset, 1 text, 2 tokens
  std::vector<std::string> words_;
  std::deque<std::string> word_storage_;
  std::unordered_map<std::string_view, WordId> word_ids_;
  std::vector<WordId> token_ids_;  // token id -> word id (kNone when unseen)
  std::vector<uint64_t> unigram_count_;
  std::vector<CountTable> tables_;
  std::vector<WordId> sentence_;  // scratch
};

}  // namespace dl::lmbuild
