#include "lmbuild/prune.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "errors.h"

namespace dl::lmbuild {
namespace {

// -ln(e^-a + e^-b)
inline double NegLogSum(double a, double b) {
  if (a > b) std::swap(a, b);
  return a - std::log1p(std::exp(a - b));
}

}  // namespace

namespace {

using LevelValues = std::vector<std::vector<double>>;  // [k - 1]: one value per n-gram of order k

// p(h) for every context: [m - 1][j] for the n-gram j of order m < N, the product of the
// ascending n-gram probabilities of h, with p(<s>) = p(</s>).
LevelValues ContextProbabilities(const BackoffModel& model) {
  LevelValues state_prob(model.order - 1);
  const ModelLevel& uni = model.levels[0];
  state_prob[0] = uni.prob;
  state_prob[0][kBos] = uni.prob[kEos];
  for (int m = 2; m < model.order; ++m) {
    const ModelLevel& level = model.levels[m - 1];
    std::vector<double>& sp = state_prob[m - 1];
    sp.resize(level.size());
    for (size_t j = 0; j < level.size(); ++j)
      sp[j] = state_prob[m - 2][level.prefix[j]] * level.prob[j];
  }
  return state_prob;
}

// The relative-entropy score D of every n-gram of order k (header formula).
std::vector<double> OwnScores(const BackoffModel& model, const LevelValues& state_prob, int k) {
  const double min_neglog = 1e-9;
  const ModelLevel& level = model.levels[k - 1];
  const ModelLevel& lower = model.levels[k - 2];
  const size_t contexts = lower.size();
  std::vector<double> hi(contexts, 0.0), lo(contexts, 0.0);  // listed mass of h, and under h'
  for (size_t i = 0; i < level.size(); ++i) {
    hi[level.prefix[i]] += level.prob[i];
    lo[level.prefix[i]] += lower.prob[level.suffix[i]];
  }
  std::vector<double> s(level.size());
  for (size_t i = 0; i < level.size(); ++i) {
    const uint32_t j = level.prefix[i];
    const double p_hi = level.prob[i];
    const double p_lo = lower.prob[level.suffix[i]];
    const double p_h = state_prob[k - 2][j];
    if (p_hi <= 0 || p_h <= 0) {
      s[i] = -std::numeric_limits<double>::infinity();
      continue;
    }
    double nh = std::max(hi[j] > 0 ? -std::log(hi[j]) : 1e300, min_neglog);
    double nl = std::max(lo[j] > 0 ? -std::log(lo[j]) : 1e300, min_neglog);
    const double num = nh > 99.0 ? 0.0 : -std::log(-std::expm1(-nh));
    const double denom = nl > 99.0 ? 0.0 : -std::log(-std::expm1(-nl));
    const double new_log_backoff =
        NegLogSum(denom, -std::log(p_lo)) - NegLogSum(num, -std::log(p_hi));
    double d = std::log(p_lo) + new_log_backoff - std::log(p_hi);
    d *= p_hi;
    d += (new_log_backoff + (num - denom)) * std::exp(-num);
    s[i] = -p_h * d;
  }
  return s;
}

// Scores of orders 2..N, each raised to the maximum over the n-grams that extend it (highest
// order first), so that no kept n-gram loses a context.
LevelValues Scores(const BackoffModel& model) {
  const LevelValues state_prob = ContextProbabilities(model);
  LevelValues score(model.order);
  for (int k = 2; k <= model.order; ++k) score[k - 1] = OwnScores(model, state_prob, k);
  for (int k = model.order; k >= 3; --k) {
    const ModelLevel& level = model.levels[k - 1];
    std::vector<double>& below = score[k - 2];
    const std::vector<double>& s = score[k - 1];
    for (size_t i = 0; i < level.size(); ++i) {
      below[level.prefix[i]] = std::max(below[level.prefix[i]], s[i]);
      below[level.suffix[i]] = std::max(below[level.suffix[i]], s[i]);
    }
  }
  return score;
}

// theta for a target size: halfway between the last score kept and the first pruned.
double TargetThreshold(const LevelValues& score, uint64_t keep) {
  std::vector<double> all;
  for (size_t k = 1; k < score.size(); ++k) all.insert(all.end(), score[k].begin(), score[k].end());
  if (keep >= all.size()) return -std::numeric_limits<double>::infinity();
  std::sort(all.begin(), all.end());
  size_t index = all.size() - keep - 1;  // largest score to prune
  const double theta = all[index];
  while (index < all.size() && all[index] == theta) ++index;
  return index >= all.size() ? theta + 1 : (theta + all[index]) / 2;
}

// keep[k - 1][i]: highest order first, an n-gram is pruned if its score is below theta and no
// kept extension needs it. Returns the number pruned.
uint64_t DecideKept(const BackoffModel& model, const LevelValues& score, double theta,
                    std::vector<std::vector<bool>>* keep) {
  uint64_t removed = 0;
  keep->assign(model.order, {});
  std::vector<bool> needed;
  for (int k = model.order; k >= 2; --k) {
    const ModelLevel& level = model.levels[k - 1];
    std::vector<bool>& kk = (*keep)[k - 1];
    kk.assign(level.size(), true);
    std::vector<bool> needed_below(k > 2 ? model.levels[k - 2].size() : 0, false);
    for (size_t i = 0; i < level.size(); ++i) {
      const bool is_needed = !needed.empty() && needed[i];
      if (!is_needed && score[k - 1][i] < theta) {
        kk[i] = false;
        ++removed;
      } else if (k > 2) {
        needed_below[level.prefix[i]] = true;
        needed_below[level.suffix[i]] = true;
      }
    }
    needed.swap(needed_below);
  }
  return removed;
}

}  // namespace

void CheckPruneOptions(const PruneOptions& options) {
  if (options.threshold && options.target)
    throw InvalidArgument("give at most one of prune_to and prune_threshold");
  if (options.threshold && !(std::isfinite(*options.threshold) && *options.threshold >= 0))
    throw InvalidArgument(
        Message("prune_threshold must be a finite number >= 0, got ", *options.threshold));
  if (options.target && *options.target < 1)
    throw InvalidArgument(Message("prune_to must be a positive integer, got ", *options.target));
}

PruneResult PruneRelativeEntropy(BackoffModel* model, const PruneOptions& options) {
  CheckPruneOptions(options);
  if (!options.threshold && !options.target)
    throw InvalidArgument("give one of a pruning threshold and a target size");
  PruneResult result;
  const uint64_t unigrams = model->NumNgrams(1);
  if (options.target && static_cast<uint64_t>(*options.target) < unigrams) {
    throw InvalidArgument(Message("prune target ", *options.target,
                                  " is below the number of unigrams (", unigrams,
                                  " including <s>), which are never pruned"));
  }
  if (model->order < 2) return result;
  const LevelValues score = Scores(*model);
  result.theta_ln = options.target
                        ? TargetThreshold(score, static_cast<uint64_t>(*options.target) - unigrams)
                        : std::log1p(*options.threshold);
  std::vector<std::vector<bool>> keep;
  result.removed = DecideKept(*model, score, result.theta_ln, &keep);
  if (result.removed > 0) CompactModel(model, keep);
  ComputeBackoffs(model);
  return result;
}

}  // namespace dl::lmbuild
