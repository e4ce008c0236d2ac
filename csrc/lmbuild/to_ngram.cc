#include "lmbuild/to_ngram.h"

#include <cmath>
#include <string_view>
#include <unordered_map>

#include "ngram/builder.h"

namespace dl::lmbuild {

namespace {
constexpr double kLn10 = 2.302585092994045684;
}

double StoredProbLn(const BackoffModel& model, int k, uint32_t i) {
  if (k == 1 && i == kBos) return -99.0 * kLn10;  // never predicted; ARPA's -99
  return std::log(model.levels[k - 1].prob[i]);
}

std::unique_ptr<NgramLM> ToNgramLM(
    const BackoffModel& model, const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::vector<uint64_t> counts;
  for (int k = 1; k <= model.order; ++k) counts.push_back(model.NumNgrams(k));
  NgramBuilder builder(
      counts, std::unordered_map<std::string, std::string>(metadata.begin(), metadata.end()),
      "lmbuild");
  WordId ids[kMaxOrder];
  std::string_view words[kMaxOrder];
  for (int k = 1; k <= model.order; ++k) {
    const ModelLevel& level = model.levels[k - 1];
    for (uint32_t i = 0; i < level.size(); ++i) {
      const float prob_ln = static_cast<float>(StoredProbLn(model, k, i));
      const double bo = level.backoff_ln.empty() ? kNaN : level.backoff_ln[i];
      const float backoff_ln = std::isnan(bo) ? 0.0f : static_cast<float>(bo);
      NgramWordIds(model, k, i, ids);
      for (int m = 0; m < k; ++m) words[m] = model.words[ids[m]];
      if (k == 1) {
        builder.AddUnigram(words[0], prob_ln, backoff_ln, 0);
      } else {
        builder.AddNgram(k, words, prob_ln, backoff_ln, 0);
      }
    }
    builder.EndOrder(k);
  }
  return builder.Finish("lmbuild");
}

}  // namespace dl::lmbuild
