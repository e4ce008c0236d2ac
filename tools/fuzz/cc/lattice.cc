// libFuzzer harness: top-k arrays -> Lattice::FromTopk -> the p best drafts under a fixed
// trigram LM (BestDrafts, nbest.h), checked against brute-force enumeration of all k^h drafts
// when there are at most 4096: the same number of drafts, the same totals in the same order
// (within float rounding), each draft a distinct path whose recomputed total is its score; and the
// n best prefixes (BestNodes, best_nodes.h), checked the same way against every prefix, each
// node's parent before it.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "best_nodes.h"
#include "harness.h"

namespace {

// Words "0".."11" with bigrams i -> i+1 and a few trigrams; token ids 12.. are out of vocabulary.
const dl::TokenLm& Lm() {
  static const dl::TokenLm lm = [] {
    std::string uni, bi, tri;
    int n_bi = 0, n_tri = 0;
    for (int i = 0; i < 12; ++i)
      uni += std::to_string(-1.0 - 0.1 * i) + " " + std::to_string(i) + " -0.3\n";
    for (int i = 0; i < 12; ++i, ++n_bi)
      bi += "-0.4 " + std::to_string(i) + " " + std::to_string((i + 1) % 12) + " -0.2\n";
    for (int i = 0; i < 12; i += 3, ++n_tri)
      tri += "-0.1 " + std::to_string(i) + " " + std::to_string((i + 1) % 12) + " " +
             std::to_string((i + 5) % 12) + "\n";
    const std::string text = "\\data\\\nngram 1=15\nngram 2=" + std::to_string(n_bi + 1) +
                             "\nngram 3=" + std::to_string(n_tri) +
                             "\n\n\\1-grams:\n-99 <s> -0.5\n" + "-1.5 </s>\n-3 <unk>\n" + uni +
                             "\n\\2-grams:\n-0.2 <s> 0 -0.1\n" + bi + "\n\\3-grams:\n" + tri +
                             "\n\\end\\\n";
    return dl::TokenLm(dl::LoadNgramText(text, "lattice-lm"), std::nullopt, -20.0f);
  }();
  return lm;
}

double Tolerance(double x) { return 1e-4 * (1.0 + std::fabs(x)); }

void Compare(const dl::Lattice& lattice, const std::vector<int32_t>& context,
             const dl::RescoreOptions& options, const dl::Drafts& got) {
  const dl::TokenLm& lm = Lm();
  const int h = lattice.h, k = lattice.k;
  const dl::LmState start = lm.Start(context.data(), context.size(), options.bos);
  auto total_of = [&](const int32_t* draft) {
    double head = 0, lm_ln = 0;
    dl::LmState state = start;
    for (int t = 0; t < h; ++t) {
      for (int r = 0; r < k; ++r)
        if (lattice.token(t, r) == draft[t]) head += lattice.logprob(t, r);
      lm_ln += lm.ScoreToken(state, draft[t], &state);
    }
    return head + (options.alpha == 0 ? 0.0 : options.alpha * lm_ln);
  };
  std::vector<double> all;
  std::vector<int32_t> path(h);
  std::function<void(int)> walk = [&](int t) {
    if (t == h) return all.push_back(total_of(path.data()));
    for (int r = 0; r < k; ++r) path[t] = lattice.token(t, r), walk(t + 1);
  };
  walk(0);
  std::sort(all.rbegin(), all.rend());
  dl::fuzz::Check(got.n == std::min<int64_t>(options.p, static_cast<int64_t>(all.size())),
                  "number of drafts");
  std::set<std::vector<int32_t>> seen;
  for (int64_t i = 0; i < got.n; ++i) {
    const int32_t* draft = &got.tokens[static_cast<size_t>(i) * h];
    dl::fuzz::Check(seen.insert(std::vector<int32_t>(draft, draft + h)).second, "distinct drafts");
    dl::fuzz::Check(std::fabs(got.scores[i] - all[i]) <= Tolerance(all[i]), "i-th best total");
    dl::fuzz::Check(std::fabs(total_of(draft) - got.scores[i]) <= Tolerance(all[i]),
                    "a draft's total is its score");
  }
}

void CompareNodes(const dl::Lattice& lattice, const std::vector<int32_t>& context,
                  const dl::NodeTreeOptions& options, const dl::NodeTree& got) {
  const dl::TokenLm& lm = Lm();
  const dl::LmState start = lm.Start(context.data(), context.size(), options.bos);
  auto total_of = [&](const std::vector<int32_t>& prefix) {
    double head = 0, lm_ln = 0;
    dl::LmState state = start;
    for (size_t t = 0; t < prefix.size(); ++t) {
      for (int r = 0; r < lattice.k; ++r)
        if (lattice.token(static_cast<int>(t), r) == prefix[t])
          head += lattice.logprob(static_cast<int>(t), r);
      lm_ln += lm.ScoreToken(state, prefix[t], &state);
    }
    return head + (options.alpha == 0 ? 0.0 : options.alpha * lm_ln);
  };
  std::vector<double> all;
  std::vector<int32_t> path;
  std::function<void()> walk = [&] {
    if (!path.empty()) all.push_back(total_of(path));
    if (static_cast<int>(path.size()) == lattice.h) return;
    for (int r = 0; r < lattice.k; ++r)
      path.push_back(lattice.token(static_cast<int>(path.size()), r)), walk(), path.pop_back();
  };
  walk();
  std::sort(all.rbegin(), all.rend());
  dl::fuzz::Check(got.size() == std::min<int64_t>(options.n, static_cast<int64_t>(all.size())),
                  "number of nodes");
  std::vector<std::vector<int32_t>> prefixes;
  std::set<std::vector<int32_t>> seen;
  for (int64_t i = 0; i < got.size(); ++i) {
    dl::fuzz::Check(got.parent[i] < i, "a parent before its children");
    std::vector<int32_t> prefix =
        got.parent[i] < 0 ? std::vector<int32_t>{} : prefixes[got.parent[i]];
    prefix.push_back(got.token[i]);
    dl::fuzz::Check(seen.insert(prefix).second, "distinct prefixes");
    dl::fuzz::Check(std::fabs(got.score[i] - all[i]) <= Tolerance(all[i]), "i-th best total");
    dl::fuzz::Check(std::fabs(total_of(prefix) - got.score[i]) <= Tolerance(all[i]),
                    "a node's total is its score");
    prefixes.push_back(prefix);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int h = in.ConsumeIntegralInRange(0, 7);
  const int k = in.ConsumeIntegralInRange(0, 9);
  const int64_t vocab = in.ConsumeBool() ? -1 : in.ConsumeIntegralInRange<int64_t>(0, 20);
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  for (int i = 0; i < std::max(h, 0) * std::max(k, 0); ++i) {
    tokens.push_back(in.ConsumeIntegralInRange<int32_t>(-1, 15));
    const int kind = in.ConsumeIntegralInRange(0, 15);
    logprobs.push_back(kind == 15   ? -INFINITY
                       : kind == 14 ? NAN
                       : kind == 13 ? 0.5f
                                    : -in.ConsumeFloatingPointInRange(0.0f, 30.0f));
  }
  std::vector<int32_t> context;
  for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i)
    context.push_back(in.ConsumeIntegralInRange<int32_t>(0, 15));
  dl::RescoreOptions options;
  options.p = in.ConsumeIntegralInRange<int64_t>(0, 40);
  options.alpha = in.ConsumeBool() ? 0.0 : in.ConsumeFloatingPointInRange(0.0, 3.0);
  options.bos = in.ConsumeBool();
  dl::NodeTreeOptions node_options;
  node_options.n = in.ConsumeIntegralInRange<int64_t>(0, 60);
  node_options.alpha = options.alpha;
  node_options.bos = options.bos;
  dl::fuzz::Guarded([&] {
    const dl::Lattice lattice = dl::Lattice::FromTopk(tokens.data(), logprobs.data(), h, k, vocab);
    const dl::Drafts got = dl::BestDrafts(lattice, Lm(), context.data(), context.size(), options);
    if (std::pow(static_cast<double>(k), h) <= 4096) Compare(lattice, context, options, got);
  });
  dl::fuzz::Guarded([&] {
    const dl::Lattice lattice = dl::Lattice::FromTopk(tokens.data(), logprobs.data(), h, k, vocab);
    const dl::NodeTree got =
        dl::BestNodes(lattice, Lm(), context.data(), context.size(), node_options);
    if (std::pow(static_cast<double>(k), h) <= 4096)
      CompareNodes(lattice, context, node_options, got);
  });
  return 0;
}
