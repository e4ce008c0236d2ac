#include "lmbuild/counts.h"

#include <algorithm>

#include "errors.h"
#include "hash.h"

namespace dl::lmbuild {
namespace {
constexpr uint64_t kEmptyKey = ~0ull;
constexpr WordId kNone = 0xFFFFFFFFu;

inline bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}
}  // namespace

PairIndex::PairIndex() { Clear(); }

void PairIndex::Clear() {
  keys_.assign(1024, kEmptyKey);
  values_.assign(1024, 0);
  keys_.shrink_to_fit();
  values_.shrink_to_fit();
  mask_ = 1023;
  size_ = 0;
}

void PairIndex::Grow() {
  std::vector<uint64_t> old_keys;
  std::vector<uint32_t> old_values;
  old_keys.swap(keys_);
  old_values.swap(values_);
  keys_.assign(old_keys.size() * 2, kEmptyKey);
  values_.assign(old_keys.size() * 2, 0);
  mask_ = keys_.size() - 1;
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == kEmptyKey) continue;
    uint64_t slot = Mix64(old_keys[i]) & mask_;
    while (keys_[slot] != kEmptyKey) slot = (slot + 1) & mask_;
    keys_[slot] = old_keys[i];
    values_[slot] = old_values[i];
  }
}

uint32_t PairIndex::FindOrInsert(uint32_t prefix, uint32_t word, uint32_t next_index,
                                 bool* inserted) {
  const uint64_t key = Pack(prefix, word);
  uint64_t slot = Mix64(key) & mask_;
  while (true) {
    const uint64_t k = keys_[slot];
    if (k == key) {
      *inserted = false;
      return values_[slot];
    }
    if (k == kEmptyKey) break;
    slot = (slot + 1) & mask_;
  }
  if ((size_ + 1) * 10 > keys_.size() * 7) {  // load factor 0.7
    Grow();
    slot = Mix64(key) & mask_;
    while (keys_[slot] != kEmptyKey) slot = (slot + 1) & mask_;
  }
  keys_[slot] = key;
  values_[slot] = next_index;
  ++size_;
  *inserted = true;
  return next_index;
}

uint32_t PairIndex::Find(uint32_t prefix, uint32_t word) const {
  const uint64_t key = Pack(prefix, word);
  uint64_t slot = Mix64(key) & mask_;
  while (true) {
    const uint64_t k = keys_[slot];
    if (k == key) return values_[slot];
    if (k == kEmptyKey) return kAbsent;
    slot = (slot + 1) & mask_;
  }
}

void NgramCounter::CheckOrder(int order) {
  if (order < 1 || order > kMaxTrainOrder)
    throw InvalidArgument(Message("n-gram order must be in 1..", kMaxTrainOrder, ", got ", order));
}

NgramCounter::NgramCounter(int order) : order_(order) {
  CheckOrder(order);
  words_ = {"<s>", "</s>"};
  unigram_count_ = {0, 0};
  tables_.resize(order - 1);
}

WordId NgramCounter::InternWord(std::string_view word) {
  auto it = word_ids_.find(word);
  if (it != word_ids_.end()) return it->second;
  if (words_.size() >= 0xFFFFFFF0u) throw InvalidArgument("vocabulary exceeds 2^32 words");
  const WordId id = static_cast<WordId>(words_.size());
  word_storage_.emplace_back(word);
  word_ids_.emplace(std::string_view(word_storage_.back()), id);
  words_.emplace_back(word);
  unigram_count_.push_back(0);
  return id;
}

WordId NgramCounter::InternToken(int32_t token) {
  if (token < 0) throw InvalidArgument(Message("token ids must be >= 0, got ", token));
  const size_t t = static_cast<size_t>(token);
  if (t >= token_ids_.size()) token_ids_.resize(std::max(t + 1, token_ids_.size() * 2), kNone);
  WordId& id = token_ids_[t];
  if (id == kNone) {
    id = static_cast<WordId>(words_.size());
    words_.push_back(std::to_string(token));
    unigram_count_.push_back(0);
  }
  return id;
}

void NgramCounter::AddText(std::string_view text) {
  if (mode_ == 2) throw InvalidArgument("this counter already holds token ids, not words");
  mode_ = 1;
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    sentence_.clear();
    while (pos < n && text[pos] != '\n') {
      while (pos < n && text[pos] != '\n' && IsSpace(text[pos])) ++pos;
      const size_t start = pos;
      while (pos < n && !IsSpace(text[pos])) ++pos;
      if (pos > start) sentence_.push_back(InternWord(text.substr(start, pos - start)));
    }
    ++pos;  // the '\n'
    if (!sentence_.empty()) AddSentence(sentence_.data(), sentence_.size());
  }
}

void NgramCounter::AddTokens(const int32_t* ids, size_t n) {
  if (mode_ == 1) throw InvalidArgument("this counter already holds words, not token ids");
  mode_ = 2;
  if (n == 0) return;
  sentence_.clear();
  for (size_t i = 0; i < n; ++i) sentence_.push_back(InternToken(ids[i]));
  AddSentence(sentence_.data(), sentence_.size());
}

void NgramCounter::AddSentence(const WordId* words, size_t n) {
  ++sentences_;
  tokens_ += n;
  ++unigram_count_[kBos];
  // prev[k] = index of the order-(k+1) n-gram ending at the previous position.
  uint32_t prev[kMaxTrainOrder];
  uint32_t cur[kMaxTrainOrder];
  int prev_len = 1;
  prev[0] = kBos;
  for (size_t i = 0; i <= n; ++i) {
    const WordId w = i < n ? words[i] : kEos;
    ++unigram_count_[w];
    cur[0] = w;
    const int len = std::min(order_, prev_len + 1);
    for (int k = 1; k < len; ++k) {
      CountTable& table = tables_[k - 1];
      bool inserted = false;
      const uint32_t next = static_cast<uint32_t>(table.word.size());
      const uint32_t index = table.index.FindOrInsert(prev[k - 1], w, next, &inserted);
      if (inserted) {
        if (next == PairIndex::kAbsent) throw InvalidArgument("more than 2^32 distinct n-grams");
        table.prefix.push_back(prev[k - 1]);
        table.word.push_back(w);
        table.count.push_back(1);
      } else {
        ++table.count[index];
      }
      cur[k] = index;
    }
    std::copy(cur, cur + len, prev);
    prev_len = len;
  }
}

uint64_t NgramCounter::NumNgrams(int k) const {
  if (k == 1) return words_.size();
  return tables_[k - 2].size();
}

size_t NgramCounter::memory_bytes() const {
  size_t bytes = unigram_count_.capacity() * 8;
  for (const CountTable& t : tables_) {
    bytes += t.prefix.capacity() * 4 + t.word.capacity() * 4 + t.count.capacity() * 8 +
             t.index.memory_bytes();
  }
  return bytes;
}

void NgramCounter::FreeIndices() {
  for (CountTable& t : tables_) t.index.Clear();
}

}  // namespace dl::lmbuild
