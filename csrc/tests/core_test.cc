// C++ unit tests of the core without Python (GoogleTest, run by ctest: `make ctest`).
// Each test compares against an independent computation written out here, never against
// another path of the same code.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "best_nodes.h"
#include "errors.h"
#include "lattice.h"
#include "nbest.h"
#include "ngram/binary.h"
#include "ngram/load.h"
#include "ngram/token_lm.h"
#include "sample.h"

namespace dl {
namespace {

constexpr double kLn10 = 2.302585092994046;

// A bigram model over token ids "0".."2" written out by hand.
const char* kBigram =
    "\\data\\\nngram 1=6\nngram 2=3\n\n"
    "\\1-grams:\n"
    "-1.0 <s> -0.3\n-0.8 </s>\n-2.0 <unk>\n-0.5 0 -0.2\n-0.7 1 -0.1\n-0.9 2 -0.4\n\n"
    "\\2-grams:\n-0.2 <s> 0\n-0.1 0 1\n-0.3 1 2\n\n\\end\\\n";

TokenLm BigramLm() { return TokenLm(LoadNgramText(kBigram, "bigram"), std::nullopt, -20.0f); }

// ln p(w | prev) by the backoff rule, straight from the table above.
double Reference(int prev, int w) {
  const std::map<std::pair<int, int>, double> bigrams = {
      {{-1, 0}, -0.2}, {{0, 1}, -0.1}, {{1, 2}, -0.3}};
  const double unigram[] = {-0.5, -0.7, -0.9};
  const double backoff[] = {-0.2, -0.1, -0.4};
  const double bos_backoff = -0.3;
  const auto it = bigrams.find({prev, w});
  if (it != bigrams.end()) return it->second * kLn10;
  return (unigram[w] + (prev < 0 ? bos_backoff : backoff[prev])) * kLn10;
}

double DraftLm(const std::vector<int32_t>& draft) {
  double total = 0;
  int prev = -1;  // <s>
  for (int32_t w : draft) total += Reference(prev, w), prev = w;
  return total;
}

TEST(Lattice, FromLogitsKeepsTheTopKLogSoftmax) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f, -3.0f, 5.0f};
  const Lattice lattice = Lattice::FromLogits(logits.data(), 2, 3, 2, 1.0f);
  ASSERT_EQ(lattice.h, 2);
  ASSERT_EQ(lattice.k, 2);
  EXPECT_EQ(lattice.token(0, 0), 1);
  EXPECT_EQ(lattice.token(0, 1), 2);
  const double z0 = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(lattice.logprob(0, 0), 3.0 - z0, 1e-5);
  EXPECT_EQ(lattice.token(1, 0), 2);
  EXPECT_NEAR(lattice.logprob(1, 0), 5.0 - std::log(std::exp(0.0) + std::exp(-3.0) + std::exp(5.0)),
              1e-5);
  EXPECT_EQ(lattice.token(1, 1), 0);
}

TEST(Lattice, RejectsNanAndEmptyVocab) {
  const std::vector<float> nan = {NAN, 0.0f};
  EXPECT_THROW(Lattice::FromLogits(nan.data(), 1, 2, 1, 1.0f), InvalidArgument);
  EXPECT_THROW(Lattice::FromLogits(nan.data(), 1, 0, 1, 1.0f), InvalidArgument);
}

TEST(Ngram, ArpaScoresFollowTheBackoffRule) {
  const TokenLm lm = BigramLm();
  for (int prev = -1; prev < 3; ++prev)
    for (int w = 0; w < 3; ++w) {
      LmState state = prev < 0 ? lm.Start(nullptr, 0, true) : lm.Start(&prev, 1, false);
      LmState next;
      EXPECT_NEAR(lm.ScoreToken(state, w, &next), Reference(prev, w), 1e-5) << prev << " " << w;
    }
}

TEST(Ngram, BinaryRoundTripScoresIdentically) {
  const auto model = LoadNgramText(kBigram, "bigram");
  const std::string path = ::testing::TempDir() + "core_test.dlm";
  SaveBinary(*model, path, true);
  const TokenLm a(model, std::nullopt, -20.0f);
  const TokenLm b(LoadNgramFile(path), std::nullopt, -20.0f);
  const std::vector<int32_t> tokens = {0, 1, 2, 2, 0, 7};
  std::vector<double> sa, sb;
  TokenScores(a, tokens.data(), tokens.size(), nullptr, 0, true, true, &sa);
  TokenScores(b, tokens.data(), tokens.size(), nullptr, 0, true, true, &sb);
  EXPECT_EQ(sa, sb);
  std::remove(path.c_str());
}

// A suffix-closed trigram with a backoff weight above 1 ("0 1": +0.5) and a blank bigram ("2 0",
// stored only as the prefix of "2 0 1"), for the search's pair bounds (pair_bound.h).
const char* kTrigram =
    "\\data\\\nngram 1=5\nngram 2=3\nngram 3=3\n\n"
    "\\1-grams:\n"
    "-99 <s> -0.3\n-0.8 </s>\n-0.5 0 -0.2\n-0.7 1 -0.1\n-0.9 2 -0.4\n\n"
    "\\2-grams:\n-0.2 <s> 0\n-0.6 0 1 0.5\n-0.3 1 2 -0.2\n\n"
    "\\3-grams:\n-0.05 0 1 2\n-0.1 1 2 0\n-0.15 2 0 1\n\n\\end\\\n";

TEST(Ngram, PairBoundsFollowTheLastWordsNgramsAndBackoffs) {
  const auto model = LoadNgramText(kTrigram, "trigram");
  ASSERT_TRUE(model->suffix_closed());
  const std::string path = ::testing::TempDir() + "core_test_pairs.dlm";
  SaveBinary(*model, path, true);
  for (const auto& lm :
       {TokenLm(model, std::nullopt, -20.0f), TokenLm(LoadNgramFile(path), std::nullopt, -20.0f)}) {
    // Worked out from the table (log10), max over every way ln p(w | ... v) can be formed:
    //   (2, 0): blank "2 0": max("1 2 0", unigram 0 + bo(2) + no positive longer backoff) = -0.1
    //   (0, 2): absent: unigram 2 + bo(0) + no positive backoff of a context ending in 0 = -1.1
    //   (1, 0): absent: unigram 0 + bo(1) + bo("0 1") = -0.1 (one global slack would say the same
    //           here, but not for (0, 2): -0.6)
    //   (1, 2): listed: max("1 2" + bo("0 1"), "0 1 2") = 0.2; the per-word bound of 2 is also 0.2
    const std::vector<std::array<double, 3>> expected = {
        {2, 0, -0.1}, {0, 2, -1.1}, {1, 0, -0.1}, {1, 2, 0.2}};
    for (const auto& [v, w, log10_bound] : expected) {
      const int32_t prev = static_cast<int32_t>(v), word = static_cast<int32_t>(w);
      float bound;
      lm.BoundsAfter(&prev, 1, &word, 1, &bound);
      EXPECT_NEAR(bound, log10_bound * kLn10, 1e-4) << v << " " << w;
    }
    // Admissible for every history ending in v: <s> or a word, then v.
    for (int32_t first = -1; first < 3; ++first)
      for (int32_t v = 0; v < 3; ++v)
        for (int32_t w = 0; w < 3; ++w) {
          const LmState state = first < 0
                                    ? lm.Start(&v, 1, true)
                                    : lm.Start(std::vector<int32_t>{first, v}.data(), 2, false);
          LmState next;
          float bound;
          lm.BoundsAfter(&v, 1, &w, 1, &bound);
          EXPECT_LE(lm.ScoreToken(state, w, &next), bound) << first << " " << v << " " << w;
        }
  }
  std::remove(path.c_str());
}

TEST(Ngram, CopiedBinaryIsUnaffectedByRewritingTheFile) {
  const auto model = LoadNgramText(kBigram, "bigram");
  const std::string path = ::testing::TempDir() + "core_test_copy.dlm";
  SaveBinary(*model, path, true);
  const TokenLm copied(LoadBinary(path, /*copy=*/true), std::nullopt, -20.0f);
  FILE* f = std::fopen(path.c_str(), "wb");  // truncate in place: a mapping would SIGBUS
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  LmState next;
  EXPECT_NEAR(copied.ScoreToken(copied.Start(nullptr, 0, true), 0, &next), Reference(-1, 0), 1e-5);
  EXPECT_THROW(LoadBinary(path, true), FormatError);  // the empty file itself is refused
  std::remove(path.c_str());
}

TEST(Rescore, AlphaZeroIgnoresMinusInfinityLmScores) {
  // Tokens 3..5 map to words the LM lacks and oov_logprob = -inf makes drafts through them
  // impossible under the LM; alpha = 0
  // must still rank all k^h drafts by their lattice score alone (no 0 * -inf = NaN).
  const TokenLm lm(LoadNgramText(kBigram, "bigram"),
                   std::vector<std::string>{"0", "1", "2", "not3", "not4", "not5"},
                   -std::numeric_limits<float>::infinity());
  const std::vector<float> logits = {0.3f, 1.2f,  -0.4f, 0.9f, 0.1f, 0.5f,
                                     2.0f, -1.0f, 0.7f,  0.2f, 0.4f, 1.5f};
  const Lattice lattice = Lattice::FromLogits(logits.data(), 2, 6, 3, 1.0f);
  RescoreOptions options;
  options.p = 9;
  options.alpha = 0.0;
  const Drafts drafts = BestDrafts(lattice, lm, nullptr, 0, options);
  ASSERT_EQ(drafts.n, 9);
  std::vector<double> heads;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) heads.push_back(lattice.logprob(0, a) + lattice.logprob(1, b));
  std::sort(heads.rbegin(), heads.rend());
  for (int i = 0; i < 9; ++i) {
    EXPECT_NEAR(drafts.scores[i], heads[i], 1e-5) << i;
    EXPECT_EQ(drafts.scores[i], drafts.head_scores[i]) << i;
  }
}

TEST(Ngram, MalformedArpaIsAFormatError) {
  EXPECT_THROW(LoadNgramText("\\data\\\nngram 1=99999999999\n\n\\1-grams:\n-1 a\n", "x"),
               FormatError);
  EXPECT_THROW(LoadNgramText("\\data\\\nngram 1=1\n\n\\1-grams:\n0.5 a\n\n\\end\\\n", "x"),
               FormatError);
  EXPECT_THROW(LoadNgramText("", "x"), FormatError);
}

Lattice SmallLattice() {
  const std::vector<float> logits = {0.3f, 1.2f, -0.4f, 0.9f, 0.1f, 0.5f, 2.0f, -1.0f, 0.7f};
  return Lattice::FromLogits(logits.data(), 3, 3, 3, 1.0f);
}

// All k^h drafts with their totals, best first (the brute-force reference).
std::vector<std::pair<double, std::vector<int32_t>>> AllDrafts(const Lattice& lattice,
                                                               double alpha) {
  std::vector<std::pair<double, std::vector<int32_t>>> out;
  std::vector<int> ranks(lattice.h, 0);
  while (true) {
    std::vector<int32_t> draft;
    double head = 0;
    for (int t = 0; t < lattice.h; ++t)
      draft.push_back(lattice.token(t, ranks[t])), head += lattice.logprob(t, ranks[t]);
    out.emplace_back(head + alpha * DraftLm(draft), draft);
    int t = lattice.h - 1;
    while (t >= 0 && ++ranks[t] == lattice.k) ranks[t--] = 0;
    if (t < 0) break;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

TEST(Rescore, BestDraftsMatchBruteForce) {
  const TokenLm lm = BigramLm();
  const Lattice lattice = SmallLattice();
  RescoreOptions options;
  options.p = 5;
  options.alpha = 0.7;
  options.bos = true;
  const Drafts drafts = BestDrafts(lattice, lm, nullptr, 0, options);
  const auto reference = AllDrafts(lattice, options.alpha);
  ASSERT_EQ(drafts.n, 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(drafts.scores[i], reference[i].first, 1e-4) << i;
}

// Lattices of at most 16 drafts take the enumeration (small_lattice.h), not the search.
TEST(Rescore, EnumeratedSmallLatticesMatchBruteForce) {
  const TokenLm lm = BigramLm();
  const std::vector<float> logits = {0.3f, 1.2f, -0.4f, 0.9f, 0.1f, 0.5f};  // the LM's 3 words
  for (const int k : {1, 2, 3}) {
    const Lattice lattice = Lattice::FromLogits(logits.data(), 2, 3, k, 1.0f);
    RescoreOptions options;
    options.p = 100;  // every draft
    options.alpha = 0.7;
    options.bos = true;
    const Drafts drafts = BestDrafts(lattice, lm, nullptr, 0, options);
    const auto reference = AllDrafts(lattice, options.alpha);
    ASSERT_EQ(drafts.n, static_cast<int64_t>(reference.size())) << k;
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_NEAR(drafts.scores[i], reference[i].first, 1e-4) << k << " " << i;
      const std::vector<int32_t> draft(drafts.tokens.begin() + i * 2,
                                       drafts.tokens.begin() + i * 2 + 2);
      EXPECT_EQ(draft, reference[i].second) << k << " " << i;
      EXPECT_NEAR(drafts.scores[i], drafts.head_scores[i] + 0.7 * drafts.lm_scores[i], 1e-9);
    }
  }
}

TEST(Rescore, AskingForMoreThanKToTheHGivesAll) {
  const TokenLm lm = BigramLm();
  RescoreOptions options;
  options.p = 1000;  // only 27 drafts exist
  options.bos = true;
  EXPECT_EQ(BestDrafts(SmallLattice(), lm, nullptr, 0, options).n, 27);
}

// Every prefix of the lattice (lengths 1..h) with its total, in the documented order: total desc,
// then length asc (the brute-force reference of BestNodes).
std::vector<std::pair<double, std::vector<int32_t>>> AllPrefixes(const Lattice& lattice,
                                                                 double alpha) {
  std::vector<std::pair<double, std::vector<int32_t>>> out;
  for (int m = 1; m <= lattice.h; ++m) {
    std::vector<int> ranks(m, 0);
    while (true) {
      std::vector<int32_t> prefix;
      double head = 0;
      for (int t = 0; t < m; ++t)
        prefix.push_back(lattice.token(t, ranks[t])), head += lattice.logprob(t, ranks[t]);
      out.emplace_back(head + alpha * DraftLm(prefix), prefix);
      int t = m - 1;
      while (t >= 0 && ++ranks[t] == lattice.k) ranks[t--] = 0;
      if (t < 0) break;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

TEST(BestNodes, AreTheBestPrefixesAndATree) {
  const TokenLm lm = BigramLm();
  const Lattice lattice = SmallLattice();
  const auto reference = AllPrefixes(lattice, 0.7);
  for (const int64_t n : {1, 4, 9, 20, 39, 100}) {
    NodeTreeOptions options;
    options.n = n;
    options.alpha = 0.7;
    options.bos = true;
    const NodeTree tree = BestNodes(lattice, lm, nullptr, 0, options);
    ASSERT_EQ(tree.size(), std::min<int64_t>(n, static_cast<int64_t>(reference.size()))) << n;
    std::vector<std::vector<int32_t>> prefixes;
    for (int64_t i = 0; i < tree.size(); ++i) {
      ASSERT_LT(tree.parent[i], i) << "a parent precedes its children";
      std::vector<int32_t> prefix =
          tree.parent[i] < 0 ? std::vector<int32_t>{} : prefixes[tree.parent[i]];
      prefix.push_back(tree.token[i]);
      EXPECT_EQ(static_cast<int>(prefix.size()), tree.depth[i]);
      EXPECT_NEAR(tree.score[i], reference[i].first, 1e-4) << n << " " << i;
      EXPECT_NEAR(
          tree.score[i],
          [&] {  // the node's own total, recomputed from its tokens
            double head = 0;
            for (size_t t = 0; t < prefix.size(); ++t)
              for (int r = 0; r < lattice.k; ++r)
                if (lattice.token(static_cast<int>(t), r) == prefix[t])
                  head += lattice.logprob(static_cast<int>(t), r);
            return head + 0.7 * DraftLm(prefix);
          }(),
          1e-4);
      prefixes.push_back(prefix);
    }
  }
}

TEST(BestNodes, RejectsBadCounts) {
  const TokenLm lm = BigramLm();
  NodeTreeOptions options;
  options.n = 0;
  EXPECT_THROW(BestNodes(SmallLattice(), lm, nullptr, 0, options), InvalidArgument);
  options.n = 1;
  options.alpha = -1;
  EXPECT_THROW(BestNodes(SmallLattice(), lm, nullptr, 0, options), InvalidArgument);
}

// alpha * ln p_LM must stay finite: an alpha of 1e307 turned every draft's total into -inf, and
// the search returned no draft without an error.
TEST(Options, AlphaIsBoundedSoScoresStayFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const double alpha : {-1.0, std::nan(""), inf, 1e307, kMaxAlpha * 1.0001}) {
    RescoreOptions rescore;
    rescore.alpha = alpha;
    EXPECT_THROW(rescore.Validate(), InvalidArgument) << alpha;
    NodeTreeOptions nodes;
    nodes.alpha = alpha;
    EXPECT_THROW(nodes.Validate(), InvalidArgument) << alpha;
  }
  for (const double alpha : {0.0, 0.7, kMaxAlpha}) {
    RescoreOptions rescore;
    rescore.alpha = alpha;
    EXPECT_NO_THROW(rescore.Validate()) << alpha;
    EXPECT_TRUE(std::isfinite(LmTerm(alpha, -std::numeric_limits<float>::max()))) << alpha;
  }
}

TEST(Sample, ConditionalsSumToOneAndLogZMatchesBruteForce) {
  const TokenLm lm = BigramLm();
  const Lattice lattice = SmallLattice();
  RescoreOptions options;
  options.alpha = 0.7;
  options.bos = true;
  const DraftSamples s = SampleDrafts(lattice, lm, nullptr, 0, options, 20, 7);
  double log_z = -INFINITY;
  for (const auto& [total, draft] : AllDrafts(lattice, options.alpha))
    log_z = std::max(log_z, total) + std::log1p(std::exp(-std::fabs(log_z - total)));
  EXPECT_NEAR(s.log_z, log_z, 1e-4);
  for (int64_t i = 0; i < s.n * s.h; ++i) {
    const double sum = std::accumulate(s.q.begin() + i * s.k, s.q.begin() + (i + 1) * s.k, 0.0);
    EXPECT_NEAR(sum, 1.0, 1e-9);
  }
}

TEST(Sample, HugeRequestsFailBeforeAllocating) {
  const TokenLm lm = BigramLm();
  RescoreOptions options;
  EXPECT_THROW(SampleDrafts(SmallLattice(), lm, nullptr, 0, options, int64_t{1} << 40, 1),
               InvalidArgument);
}

}  // namespace
}  // namespace dl
