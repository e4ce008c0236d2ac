#include "ngram/token_lm.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "errors.h"

namespace dl {
namespace {

// Canonical non-negative decimal integer that fits in int32 ("0", "17"; not "017", "+1", "-1").
bool ParseTokenId(std::string_view word, int32_t* id) {
  if (word.empty() || word.size() > 10) return false;
  if (word.size() > 1 && word[0] == '0') return false;
  int64_t value = 0;
  for (char c : word) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value > INT32_MAX) return false;
  *id = static_cast<int32_t>(value);
  return true;
}

}  // namespace

TokenLm::TokenLm(std::shared_ptr<const NgramLM> model,
                 std::optional<std::vector<std::string>> vocab, float oov_ln)
    : model_(std::move(model)), oov_ln_(oov_ln) {
  static std::atomic<uint64_t> next_serial{1};
  serial_ = next_serial.fetch_add(1, std::memory_order_relaxed);
  if (!model_) throw InvalidArgument("TokenLm needs a model");
  if (std::isnan(oov_ln) || oov_ln > 0.0f)
    throw InvalidArgument(
        Message("oov_logprob must be a natural-log probability <= 0, got ", oov_ln));
  fallback_ = model_->unk();
  const size_t words = model_->vocab_size();
  std::vector<bool> reached(words, false);
  if (vocab) {
    vocab_limit_ = static_cast<int64_t>(vocab->size());
    if (vocab->size() > static_cast<size_t>(INT32_MAX))
      throw InvalidArgument(Message("vocab has ", vocab->size(), " entries; at most 2^31-1"));
    token_to_word_.resize(vocab->size());
    for (size_t i = 0; i < vocab->size(); ++i) {
      const WordIndex w = model_->Index((*vocab)[i]);
      token_to_word_[i] = w == kNoWord ? fallback_ : w;
      if (w != kNoWord) reached[w] = true;
    }
    std::vector<std::string> missing;
    size_t missing_count = 0;
    for (WordIndex w = 0; w < words; ++w) {
      if (reached[w] || w == model_->bos() || w == model_->eos() || w == model_->unk()) continue;
      if (++missing_count <= 5) missing.emplace_back(model_->Word(w));
    }
    if (missing_count > 0) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "'" : ", '") + m + "'";
      throw InvalidArgument(Message("vocab (", vocab->size(), " tokens) does not cover ",
                                    missing_count, " of the LM's ", words, " words, e.g. ", list));
    }
  } else {
    std::vector<std::pair<int32_t, WordIndex>> ids;
    for (WordIndex w = 0; w < words; ++w) {
      int32_t id;
      if (ParseTokenId(model_->Word(w), &id)) ids.emplace_back(id, w);
    }
    int32_t max_id = -1;
    for (const auto& p : ids) max_id = std::max(max_id, p.first);
    const size_t dense = std::min(static_cast<size_t>(max_id + 1),
                                  std::max(kMinDenseSlots, kDenseSlotsPerWord * words));
    token_to_word_.assign(dense, fallback_);
    for (const auto& p : ids) {
      if (static_cast<size_t>(p.first) < dense)
        token_to_word_[p.first] = p.second;
      else
        large_ids_.push_back(p);
      reached[p.second] = true;
    }
    std::sort(large_ids_.begin(), large_ids_.end());
    large_ids_.shrink_to_fit();
  }
  mapped_words_ = static_cast<size_t>(std::count(reached.begin(), reached.end(), true));
}

WordIndex TokenLm::LargeWordOf(int32_t token) const {
  const auto it =
      std::lower_bound(large_ids_.begin(), large_ids_.end(), std::make_pair(token, WordIndex{0}));
  return it != large_ids_.end() && it->first == token ? it->second : fallback_;
}

void TokenLm::CheckTokens(const int32_t* tokens, size_t n, const char* what) const {
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || (vocab_limit_ >= 0 && t >= vocab_limit_)) {
      if (vocab_limit_ >= 0)
        throw InvalidArgument(Message(what, "[", i, "] = ", t, " is not a token id of the ",
                                      vocab_limit_, "-token vocab"));
      throw InvalidArgument(Message(what, "[", i, "] = ", t, " is negative; token ids are >= 0"));
    }
  }
}

LmState TokenLm::Start(const int32_t* context, size_t n, bool bos) const {
  const size_t window = static_cast<size_t>(std::max(order() - 1, 0));
  LmState state = model_->NullContextState();
  if (n < window) {
    if (bos) state = model_->BeginSentenceState();
  } else {
    context += n - window;
    n = window;
  }
  for (size_t i = 0; i < n; ++i) ScoreToken(state, context[i], &state);
  return state;
}

}  // namespace dl
