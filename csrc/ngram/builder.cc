#include "ngram/builder.h"

#include <algorithm>
#include <utility>

namespace dl {

using ngram::Entry;

NgramBuilder::NgramBuilder(std::vector<uint64_t> counts,
                           std::unordered_map<std::string, std::string> metadata, std::string name,
                           uint64_t presize)
    : name_(std::move(name)), presize_(presize) {
  parts_.counts = std::move(counts);
  parts_.metadata = std::move(metadata);
  parts_.order = static_cast<int>(parts_.counts.size());
  for (int n = 2; n <= parts_.order; ++n)
    tables_.emplace_back(std::min(parts_.counts[n - 1], presize_));
  insertion_order_.resize(tables_.size());
  deferred_suffixes_.resize(parts_.order);
  const uint64_t unigrams = std::min(parts_.counts[0], presize_);
  parts_.unigrams.reserve(unigrams);
  parts_.vocab_offsets.reserve(unigrams + 1);
  index_ = ngram::VocabIndex(unigrams);
}

void NgramBuilder::AddUnigram(std::string_view word, float prob, float backoff, size_t line) {
  const WordIndex index = static_cast<WordIndex>(parts_.unigrams.size());
  if (!index_.Insert(word, index, WordOf())) Fail(line, "duplicate 1-gram '", word, "'");
  parts_.vocab_offsets.push_back(parts_.vocab_blob.size());
  parts_.vocab_blob.append(word);
  parts_.unigrams.push_back(Entry{ngram::kFlagListed, prob, backoff});
}

// The 1-grams are all in: the builders that keep a value per word start with their values.
void NgramBuilder::StartWordBounds() {
  const size_t vocab = parts_.unigrams.size();
  bounds_.emplace(parts_.order, vocab);
  mass_.emplace(parts_.order, vocab);
  if (parts_.order >= 2)
    pair_bounds_.emplace(parts_.order, vocab, std::min(parts_.counts[1], presize_));
  for (size_t w = 0; w < vocab; ++w) {
    const Entry& e = parts_.unigrams[w];
    bounds_->AddProb(1, static_cast<WordIndex>(w), e.prob_ln);
    if (parts_.order > 1) bounds_->AddBackoff(1, e.backoff_ln);
    mass_->AddUnigram(e.prob_ln);
  }
}

void NgramBuilder::AddNgram(int n, const std::string_view* words, float prob, float backoff,
                            size_t line) {
  if (pending_count_ == kPipeline) {  // the slot to fill holds the oldest pending n-gram
    Insert(pending_[pending_head_]);
    --pending_count_;
  }
  Pending& p = pending_[pending_head_];
  for (int i = 0; i < n; ++i) {
    p.ids[i] = index_.Find(words[i], WordOf());
    if (p.ids[i] == kNoWord)
      Fail(line, "word '", words[i], "' of this ", n, "-gram has no 1-gram entry");
  }
  p.n = n;
  p.prob = prob;
  p.backoff = backoff;
  p.line_no = line;
  p.key = KeyOf(p.ids, n);
  tables_[n - 2].Prefetch(p.key);
  if (n > 2) {
    p.prefix_key = KeyOf(p.ids, n - 1);
    tables_[n - 3].Prefetch(p.prefix_key);
    p.suffix_key = KeyOf(p.ids + 1, n - 1);
    tables_[n - 3].Prefetch(p.suffix_key);
  }
  pending_head_ = (pending_head_ + 1) % kPipeline;
  ++pending_count_;
}

void NgramBuilder::EndOrder(int n) {
  if (n == 1) {
    StartWordBounds();
    return;
  }
  for (; pending_count_ > 0; --pending_count_)  // oldest first
    Insert(pending_[(pending_head_ + kPipeline - pending_count_) % kPipeline]);
  // A table presized below its count grew: make it the table a presized one is.
  if (parts_.counts[n - 1] > presize_) {
    tables_[n - 2].Replay(insertion_order_[n - 2]);
    insertion_order_[n - 2] = std::vector<uint64_t>();
  }
  // Blank prefixes added to order n - 1 while reading order n may have grown its table.
  if (n >= 3) tables_[n - 3].Compact();
}

std::unique_ptr<NgramLM> NgramBuilder::Finish(const std::string& source_format) {
  if (!bounds_) StartWordBounds();  // EndOrder(1) was not called
  MarkBackoffContexts();
  parts_.suffix_closed = CheckDeferredSuffixes();
  parts_.word_bounds = bounds_->Finish();
  if (mass_) {
    const double most = mass_->LogProbBound(parts_.unigrams, tables_);
    for (float& bound : parts_.word_bounds)
      if (most < bound) bound = static_cast<float>(most);
  }
  parts_.vocab_offsets.push_back(parts_.vocab_blob.size());
  for (auto& table : tables_) parts_.tables.push_back(std::move(table.buckets()));
  if (pair_bounds_ && parts_.suffix_closed) {
    const std::vector<Entry>& bigrams = parts_.tables[0];
    parts_.pair_bounds = pair_bounds_->Finish(ngram::TableView(bigrams.data(), bigrams.size()));
    parts_.word_slack = pair_bounds_->WordSlack();
    if (parts_.order >= 3)  // only n-grams of order >= 3 set bits
      parts_.extension_masks =
          pair_bounds_->Masks(ngram::TableView(bigrams.data(), bigrams.size()));
  }
  pair_bounds_.reset();
  parts_.source_format = source_format;
  return std::make_unique<NgramLM>(std::move(parts_));
}

void NgramBuilder::Insert(const Pending& p) {
  bool inserted = false;
  ngram::Entry* e = tables_[p.n - 2].FindOrInsert(p.key, &inserted);
  if (!inserted && e->listed())
    Fail(p.line_no, "duplicate ", p.n, "-gram (or a 64-bit hash collision)");
  if (parts_.counts[p.n - 1] > presize_) insertion_order_[p.n - 2].push_back(p.key);
  e->key |= ngram::kFlagListed;
  e->prob_ln = p.prob;
  e->backoff_ln = p.backoff;
  const float context_backoff = MarkPrefix(p.ids, p.n - 1);
  bounds_->AddProb(p.n, p.ids[p.n - 1], p.prob);
  pair_bounds_->AddProb(p.n, p.n >= 3 ? p.ids[p.n - 3] : kNoWord, p.ids[p.n - 2],
                        p.n == 2 ? p.key : KeyOf(p.ids + p.n - 2, 2), p.prob);
  if (p.n < parts_.order) pair_bounds_->AddBackoff(p.n, p.ids[p.n - 1], p.backoff);
  if (p.n < parts_.order) bounds_->AddBackoff(p.n, p.backoff);
  // Suffix closure (see ngram_lm.h): the suffix "w_2 .. w_n" must be stored (listed, or blank
  // as a prefix of a listed n-gram). Most are by now; a blank may still be added later.
  const ngram::Entry* suffix = p.n > 2 ? tables_[p.n - 3].Find(p.suffix_key) : nullptr;
  if (p.n > 2 && suffix == nullptr) deferred_suffixes_[p.n - 2].push_back(p.suffix_key);
  if (p.n == 3 && !mass_decided_) {
    // Backoffs above 1 are what make the per-word bounds loose (Katz: its bigram contexts have
    // them); a model with none among its 1- and 2-gram contexts (Kneser-Ney) skips the clamp and
    // its memory (context_mass.h).
    mass_decided_ = true;
    if (bounds_->MaxBackoff(1) <= 0 && bounds_->MaxBackoff(2) <= 0) mass_.reset();
  }
  if (!mass_) return;
  // ln p(w | h'): the listed suffix n-gram itself, almost always.
  const double lower = p.n == 2 ? parts_.unigrams[p.ids[1]].prob_ln
                       : suffix != nullptr && suffix->listed()
                           ? suffix->prob_ln
                           : ngram::BackoffLogProb(p.ids + 1, p.n - 1, parts_.unigrams, tables_);
  mass_->AddNgram(p.ids, p.n, p.prob, lower, context_backoff);
}

// True when every deferred suffix is stored by now (the model is suffix-closed).
bool NgramBuilder::CheckDeferredSuffixes() {
  for (int m = 2; m < parts_.order; ++m)
    for (uint64_t key : deferred_suffixes_[m - 1])
      if (tables_[m - 2].Find(key) == nullptr) return false;
  return true;
}

// The context w_1 .. w_m is a proper prefix of a listed n-gram: flag it (adding a blank entry).
// Returns its backoff (0 for a blank).
float NgramBuilder::MarkPrefix(const WordIndex* ids, int m) {
  float backoff = 0;
  for (const int context = m; m >= 1; --m) {
    if (m == 1) {
      parts_.unigrams[ids[0]].key |= ngram::kFlagContext;
      return m == context ? parts_.unigrams[ids[0]].backoff_ln : backoff;
    }
    bool inserted = false;
    Entry* e = tables_[m - 2].FindOrInsert(KeyOf(ids, m), &inserted);
    if (m == context && e->listed()) backoff = e->backoff_ln;
    const bool had = (e->key & ngram::kFlagContext) != 0;
    e->key |= ngram::kFlagContext;
    // A listed entry's prefixes were flagged when it was read; a blank's may not be.
    if (had || e->listed()) return backoff;
  }
  return backoff;
}

uint64_t NgramBuilder::KeyOf(const WordIndex* ids, int n) { return ngram::KeyOfWords(ids, n); }

// A listed context with a nonzero backoff also matters to later scores.
void NgramBuilder::MarkBackoffContexts() {
  if (parts_.order < 2) {
    for (Entry& e : parts_.unigrams) e.key &= ~ngram::kFlagContext;
    return;
  }
  for (Entry& e : parts_.unigrams)
    if (e.backoff_ln != 0.0f) e.key |= ngram::kFlagContext;
  for (int n = 2; n < parts_.order; ++n)
    for (Entry& e : tables_[n - 2].buckets())
      if (e.key != 0 && e.listed() && e.backoff_ln != 0.0f) e.key |= ngram::kFlagContext;
}

}  // namespace dl
