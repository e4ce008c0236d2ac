#include "ngram/ngram_lm.h"

#include <algorithm>
#include <cmath>

#include "errors.h"
#include "ngram/pair_bound.h"
#include "ngram/word_bound.h"

namespace dl {

using ngram::Entry;

NgramLM::NgramLM(Parts parts) : owned_(std::move(parts)) {
  order_ = owned_.order;
  counts_ = owned_.counts;
  vocab_blob_ = owned_.vocab_blob.data();
  vocab_offsets_ = owned_.vocab_offsets.data();
  vocab_size_ = owned_.unigrams.size();
  unigrams_ = owned_.unigrams.data();
  for (size_t i = 0; i < owned_.tables.size(); ++i)
    tables_[i + 1] = ngram::TableView(owned_.tables[i].data(), owned_.tables[i].size());
  metadata_ = owned_.metadata;
  suffix_closed_ = owned_.suffix_closed;
  source_format_ = owned_.source_format;
  if (owned_.word_bounds.size() == vocab_size_) word_bounds_ = owned_.word_bounds.data();
  if (order_ >= 2 && owned_.pair_bounds.size() == tables_[1].size() &&
      owned_.word_slack.size() == vocab_size_ && !owned_.pair_bounds.empty()) {
    pair_bounds_ = owned_.pair_bounds.data();
    word_slack_ = owned_.word_slack.data();
    if (owned_.extension_masks.size() == tables_[1].size())
      extension_masks_ = owned_.extension_masks.data();
  }
  Finish();
}

NgramLM::NgramLM(Views views) : mapped_(std::move(views.keep_alive)) {
  order_ = views.order;
  counts_ = std::move(views.counts);
  vocab_blob_ = views.vocab_blob;
  vocab_offsets_ = views.vocab_offsets;
  vocab_size_ = views.vocab_size;
  unigrams_ = views.unigrams;
  for (size_t i = 0; i < views.tables.size(); ++i) tables_[i + 1] = views.tables[i];
  metadata_ = std::move(views.metadata);
  suffix_closed_ = views.suffix_closed;
  word_bounds_ = views.word_bounds;
  if (order_ >= 2 && views.pair_bounds != nullptr && views.word_slack != nullptr) {
    pair_bounds_ = views.pair_bounds;
    word_slack_ = views.word_slack;
    extension_masks_ = views.extension_masks;
  }
  source_format_ = "binary";
  Finish();
}

void NgramLM::Finish() {
  if (word_bounds_ == nullptr) {  // no per-word facts: bound every word by the largest entries
    ngram::WordBoundBuilder bounds(order_, vocab_size_);
    for (WordIndex w = 0; w < vocab_size_; ++w) {
      bounds.AddProb(1, w, unigrams_[w].prob_ln);
      if (order_ > 1) bounds.AddBackoff(1, unigrams_[w].backoff_ln);
    }
    for (int n = 2; n <= order_; ++n)
      for (uint64_t i = 0; i < tables_[n - 1].size(); ++i) {
        const Entry& e = tables_[n - 1].data()[i];
        if (e.key == 0 || !e.listed()) continue;
        bounds.AddProbAnyWord(n, e.prob_ln);
        if (n < order_) bounds.AddBackoff(n, e.backoff_ln);
      }
    derived_bounds_ = bounds.Finish();
    word_bounds_ = derived_bounds_.data();
  }
  backoff_slack2_ln_ = 0;
  for (int n = 2; n <= order_; ++n) {
    filters_[n - 1] = ngram::KeyFilter(tables_[n - 1]);
    if (n == order_) continue;  // top-order n-grams are never contexts
    float max_backoff = 0;
    const ngram::TableView& table = tables_[n - 1];
    for (uint64_t i = 0; i < table.size(); ++i)
      if (table.data()[i].key != 0) max_backoff = std::max(max_backoff, table.data()[i].backoff_ln);
    backoff_slack2_ln_ += max_backoff;
  }
  index_ = ngram::VocabIndex(vocab_size_);
  auto word_of = [this](WordIndex i) { return Word(i); };
  for (WordIndex i = 0; i < vocab_size_; ++i) index_.Insert(Word(i), i, word_of);
  unk_ = Index("<unk>");
  bos_ = Index("<s>");
  eos_ = Index("</s>");
  begin_ = LmState{};
  if (bos_ != kNoWord && order_ > 1 && unigrams_[bos_].context()) {
    begin_.words[0] = bos_;
    begin_.backoff_ln[0] = unigrams_[bos_].backoff_ln;
    begin_.length = 1;
  }
}

WordIndex NgramLM::Index(std::string_view word) const {
  return index_.Find(word, [this](WordIndex i) { return Word(i); });
}

std::string_view NgramLM::Word(WordIndex index) const {
  if (index >= vocab_size_) return {};
  return std::string_view(vocab_blob_ + vocab_offsets_[index],
                          vocab_offsets_[index + 1] - vocab_offsets_[index]);
}

void NgramLM::CheckState(const LmState& state) const {
  if (state.length > std::max(order_ - 1, 0))
    throw InvalidArgument(Message("LM state holds ", int(state.length), " words; an order-", order_,
                                  " model keeps at most ", std::max(order_ - 1, 0)));
  for (int i = 0; i < state.length; ++i)
    if (state.words[i] >= vocab_size_)
      throw InvalidArgument(Message("LM state word id ", state.words[i], " >= vocab size ",
                                    vocab_size_, " (a state of another model?)"));
}

float NgramLM::Score(const LmState& in, WordIndex word, LmState* out, float oov_ln) const {
  float prob;
  LmState next;
  ScoreBatch(in, &word, 1, oov_ln, &prob, &next);
  *out = next;
  return prob;
}

void NgramLM::ScoreBatch(const LmState& in, const WordIndex* words, int n, float oov_ln,
                         float* probs_ln, LmState* outs) const {
  // One specialization per state length 0..kMaxOrder-1 (CheckState bounds the length).
  static constexpr auto kByLength = ScoreBatchTable(std::make_index_sequence<kMaxOrder>());
  (this->*kByLength[in.length])(in, words, n, oov_ln, probs_ln, outs);
}

template <int kLength>
void NgramLM::ScoreBatchOf(const LmState& in, const WordIndex* words, int n, float oov_ln,
                           float* probs_ln, LmState* outs) const {
  constexpr int kChunk = 32;
  constexpr int length = kLength;
  uint64_t keys[kChunk];
  const Entry* found[kChunk][kMaxOrder];
  int live[kChunk], maybe[kChunk];
  for (int base = 0; base < n; base += kChunk) {
    const int m = std::min(kChunk, n - base);
    const WordIndex* w = words + base;
    int alive = 0;
    for (int r = 0; r < m; ++r) {
      for (int j = 1; j <= length; ++j) found[r][j] = nullptr;
      if (w[r] >= vocab_size_) continue;
      __builtin_prefetch(&unigrams_[w[r]]);
      if (length > 0) {
        keys[r] = ngram::ExtendKey(ngram::SeedKey(w[r]), in.words[0]);
        filters_[1].Prefetch(keys[r]);
      }
      live[alive++] = r;
    }
    // Order by order over the live words: the filter drops most absent n-grams first; the buckets
    // of the rest are prefetched before any is probed, and the filter lines of order j + 1 are
    // prefetched while order j is probed, so the cache misses overlap.
    for (int j = 1; j <= length && alive > 0; ++j) {
      const ngram::TableView& table = tables_[j];
      const ngram::KeyFilter& filter = filters_[j];
      const bool more = j < length;
      int kept = 0, probe = 0;
      for (int a = 0; a < alive; ++a) {
        const int r = live[a];
        if (filter.MayContain(keys[r])) {
          table.Prefetch(keys[r]);
          maybe[probe++] = r;
        } else if (!suffix_closed_) {
          live[kept++] = r;  // absent here; a longer n-gram may still be listed
        }
      }
      for (int a = 0; a < probe; ++a) {
        const int r = maybe[a];
        const Entry* e = table.Find(keys[r]);
        found[r][j] = e;
        if (e != nullptr || !suffix_closed_) live[kept++] = r;
      }
      if (more)
        for (int a = 0; a < kept; ++a) {
          keys[live[a]] = ngram::ExtendKey(keys[live[a]], in.words[j]);
          filters_[j + 1].Prefetch(keys[live[a]]);
        }
      alive = kept;
    }
    for (int r = 0; r < m; ++r) {
      if (w[r] >= vocab_size_) {
        outs[base + r] = LmState{};
        probs_ln[base + r] = oov_ln;
      } else {
        probs_ln[base + r] = Resolve<kLength>(in, w[r], found[r], &outs[base + r]);
      }
    }
  }
}

void NgramLM::BoundsAfter(const WordIndex* prev, int rows, const WordIndex* words, int n,
                          float oov_ln, float* out, size_t stride, const Before* before,
                          uint8_t* may_pair) const {
  constexpr int kChunk = 64;
  const bool pairs = suffix_closed_ && order_ >= 2;
  const bool refine = pairs && before != nullptr && extension_masks_ != nullptr && order_ >= 3;
  const ngram::TableView& bigrams = tables_[1];
  uint64_t seeds[kChunk];  // key of the unigram "w", extended by each row's prev
  uint64_t keys[kChunk];   // the bigram keys "prev w" of one row
  int stored[kChunk];      // the columns whose bigram the filter may hold, while probes are pending
  if (may_pair != nullptr) std::fill(may_pair, may_pair + static_cast<size_t>(rows) * n, 0);
  for (int base = 0; base < n; base += kChunk) {
    const int m = std::min(kChunk, n - base);
    const WordIndex* w = words + base;
    for (int j = 0; j < m; ++j) seeds[j] = w[j] < vocab_size_ ? ngram::SeedKey(w[j]) : 0;
    for (int i = 0; i < rows; ++i) {
      float* o = out + i * stride + base;
      const WordIndex v = prev[i];
      const bool null_state = v >= vocab_size_ || !unigrams_[v].context();
      // Bound of ln p(w | h) - ln p(w) when no listed n-gram of order >= 2 ends in the history
      // and w: v's backoff plus the largest sum of the longer contexts' positive backoffs (those
      // ending in v with pair bounds, any otherwise).
      const double unlisted =
          null_state ? 0.0
                     : double{unigrams_[v].backoff_ln} +
                           (word_slack_ != nullptr ? double{word_slack_[v]} : backoff_slack2_ln_);
      // The row's keys first, their filter lines prefetched, so that the filter's cache misses
      // overlap instead of each query waiting for its own.
      const bool query = pairs && !null_state;
      if (query)
        for (int j = 0; j < m; ++j) {
          keys[j] = ngram::ExtendKey(seeds[j], v);
          filters_[1].Prefetch(keys[j]);
        }
      int probes = 0;
      for (int j = 0; j < m; ++j) {
        if (w[j] >= vocab_size_) {
          o[j] = oov_ln;
        } else if (!pairs) {
          o[j] = word_bounds_[w[j]];
        } else if (null_state) {
          o[j] = unigrams_[w[j]].prob_ln;  // exact: the state after v is the null context
        } else if (const uint64_t key = keys[j]; !filters_[1].MayContain(key)) {
          o[j] = std::min(word_bounds_[w[j]], WithMargin(unigrams_[w[j]].prob_ln + unlisted));
        } else {
          if (may_pair != nullptr) may_pair[static_cast<size_t>(i) * n + base + j] = 1;
          if (pair_bounds_ != nullptr) {
            bigrams.Prefetch(key);  // resolved below, once every probe of the row has started
            __builtin_prefetch(&pair_bounds_[bigrams.Home(key)]);
            if (refine) __builtin_prefetch(&extension_masks_[bigrams.Home(key)]);
            stored[probes++] = j;
          } else {
            o[j] = word_bounds_[w[j]];
          }
        }
      }
      if (probes == 0) continue;
      // The extension bits (pair_bound.h) of the words u of `before` whose "u prev" may be
      // stored: a pair whose mask has none of them has no listed n-gram "u prev w" (n >= 3).
      uint64_t preceding = 0;
      if (refine)
        for (int b = 0; b < before->n; ++b) {
          const WordIndex u = before->words[b];
          // An unknown word resets the state: nothing it precedes extends a context.
          if (u >= vocab_size_) continue;
          if (before->may_precede != nullptr
                  ? before->may_precede[static_cast<size_t>(b) * rows + i] != 0
                  : filters_[1].MayContain(ngram::ExtendKey(ngram::SeedKey(v), u)))
            preceding |= ngram::PairBoundBuilder::ExtensionBit(u);
        }
      for (int a = 0; a < probes; ++a) {
        const int j = stored[a];
        const ngram::Entry* e = bigrams.Find(keys[j]);
        // Absent (a filter false positive) or blank: the backoff path is possible.
        const float backoff_path = WithMargin(unigrams_[w[j]].prob_ln + unlisted);
        float bound = backoff_path;
        if (e != nullptr) {
          const float pair = pair_bounds_[e - bigrams.data()];
          bound = e->listed() ? pair : std::max(bound, pair);
          if (refine && (extension_masks_[e - bigrams.data()] & preceding) == 0)
            bound = std::min(bound, e->listed() ? WithMargin(double{e->prob_ln} + word_slack_[v])
                                                : backoff_path);
        }
        o[j] = std::min(word_bounds_[w[j]], bound);
      }
    }
  }
}

template <int kLength>
float NgramLM::Resolve(const LmState& in, WordIndex word, const Entry* const* found,
                       LmState* out) const {
  const Entry& unigram = unigrams_[word];
  float prob = unigram.prob_ln;
  int match = 0;
  constexpr int length = kLength;
  const int max_state = order_ - 1;
  int next_length = (max_state > 0 && unigram.context()) ? 1 : 0;
  for (int j = 1; j <= length; ++j) {
    const Entry* e = found[j];
    if (e == nullptr) continue;
    if (e->listed()) {
      prob = e->prob_ln;
      match = j;
    }
    if (j < max_state && e->context()) next_length = j + 1;
  }
  for (int i = match; i < length; ++i) prob += in.backoff_ln[i];
  // The successor state, written slot by slot over the fixed array size (unrolled, no
  // variable-length memset/memcpy: those dominated this function in the profile); slots past
  // next_length stay zero. Written in place: a local copied out afterwards made the copy's
  // 16-byte loads wait on these 4-byte stores (a store-forwarding stall, most of this function's
  // time in perf annotate). `out` never aliases `in` (ScoreBatch's contract).
  out->length = static_cast<uint8_t>(next_length);
  out->words[0] = next_length > 0 ? word : 0;
  out->backoff_ln[0] = next_length > 0 ? unigram.backoff_ln : 0.0f;
  for (int i = 1; i < kMaxOrder - 1; ++i) {
    const bool keep = i < next_length;
    out->words[i] = keep ? in.words[i - 1] : 0;
    out->backoff_ln[i] = keep && found[i] != nullptr ? found[i]->backoff_ln : 0.0f;
  }
  return prob;
}

}  // namespace dl
