#include "ngram/ngram_lm.h"

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
  source_format_ = "binary";
  Finish();
}

void NgramLM::Finish() {
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

float NgramLM::Score(const LmState& in, WordIndex word, LmState* out, float oov_ln) const {
  if (word >= vocab_size_) {
    *out = LmState{};
    return oov_ln;
  }
  const Entry& unigram = unigrams_[word];
  float prob = unigram.prob_ln;
  int match = 0;
  const int length = in.length;
  const int max_state = order_ - 1;
  LmState next;
  next.words[0] = word;
  next.backoff_ln[0] = unigram.backoff_ln;
  int next_length = (max_state > 0 && unigram.context()) ? 1 : 0;
  uint64_t key = ngram::SeedKey(word);
  for (int j = 1; j <= length; ++j) {
    const WordIndex h = in.words[j - 1];
    key = ngram::ExtendKey(key, h);
    const Entry* e = tables_[j].Find(key);
    if (j < max_state) next.words[j] = h;
    if (e == nullptr) continue;
    if (e->listed()) {
      prob = e->prob_ln;
      match = j;
    }
    if (j < max_state) {
      next.backoff_ln[j] = e->backoff_ln;
      if (e->context()) next_length = j + 1;
    }
  }
  for (int i = match; i < length; ++i) prob += in.backoff_ln[i];
  next.length = static_cast<uint8_t>(next_length);
  for (int i = next_length; i < kMaxOrder - 1; ++i) {
    next.words[i] = 0;
    next.backoff_ln[i] = 0.0f;
  }
  *out = next;
  return prob;
}

}  // namespace dl
