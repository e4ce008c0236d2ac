// Experiment (not part of the package): how fast can the exact forward pass over a lattice x LM
// composition be, with the engine's own n-gram tables, if a node scores its k candidates
// together? Measures, per lattice, the 1-best Viterbi forward pass (every composed arc scored,
// states merged per layer) three ways:
//   plain     NgramLM::Score per arc (what the search does today, per scored arc);
//   prefetch  per node: compute the keys of all k candidates at every order, prefetch their
//             buckets, then resolve (same arithmetic as Score, copied here);
//   memo      prefetch + the lower orders memoised per layer: the probe of (last j history
//             words, candidate) is shared by all nodes whose history ends in those j words;
//   flat      prefetch + an open-addressing state map (instead of std::unordered_map<LmState>);
//   early     flat, probing order by order and stopping a candidate at its first absent n-gram
//             (exact for suffix-closed models such as lmplz output; a model flag would say so).
// Checks that all three give the same best score and node count.
//
//   g++ -O2 -std=c++17 -I csrc bench/proto/score_batching.cc build/dev/libdraftlattice_core.a \
//       -lpthread -o /tmp/score_batching
//   /tmp/score_batching MODEL.dlm WORDS.txt LATTICES.bin       (LATTICES.bin as in lmfst.cc)
//
// A forward pass gives the best score (1-best); the search in csrc/nbest.h scores at most the
// same arcs, so these per-arc costs carry over to it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ngram/load.h"
#include "ngram/ngram_lm.h"
#include "ngram/token_lm.h"

using namespace dl;
using ngram::Entry;

namespace {

struct Lattices {
  int n, h, k, c;
  std::vector<int32_t> tokens, context;
  std::vector<float> logprobs;
};

Lattices Read(const char* path) {
  Lattices l;
  std::FILE* f = std::fopen(path, "rb");
  int32_t hdr[4];
  if (std::fread(hdr, 4, 4, f) != 4) throw std::runtime_error("short");
  l.n = hdr[0], l.h = hdr[1], l.k = hdr[2], l.c = hdr[3];
  l.tokens.resize(size_t(l.n) * l.h * l.k);
  l.logprobs.resize(l.tokens.size());
  l.context.resize(size_t(l.n) * l.c);
  if (std::fread(l.tokens.data(), 4, l.tokens.size(), f) != l.tokens.size() ||
      std::fread(l.logprobs.data(), 4, l.logprobs.size(), f) != l.logprobs.size() ||
      std::fread(l.context.data(), 4, l.context.size(), f) != l.context.size())
    throw std::runtime_error("short");
  std::fclose(f);
  return l;
}

// Score's arithmetic, given the entries found at each order (nullptr = absent).
float Resolve(const NgramLM& lm, const LmState& in, WordIndex word, const Entry* const* found,
              LmState* out) {
  const Entry& unigram = lm.unigrams()[word];
  float prob = unigram.prob_ln;
  int match = 0;
  const int length = in.length, max_state = lm.order() - 1;
  LmState next;
  next.words[0] = word;
  next.backoff_ln[0] = unigram.backoff_ln;
  int next_length = (max_state > 0 && unigram.context()) ? 1 : 0;
  for (int j = 1; j <= length; ++j) {
    const Entry* e = found[j];
    if (j < max_state) next.words[j] = in.words[j - 1];
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

inline uint64_t Home(const ngram::TableView& t, uint64_t key) {
  const uint64_t want = ngram::StoredKey(key);
  return static_cast<uint64_t>((static_cast<unsigned __int128>(want) * t.size()) >> 64);
}

enum class Mode { kPlain, kPrefetch, kMemo, kFlat, kEarly };

// Open-addressing map from an LM state's words (+ length) to a node index; sized for the layer.
class FlatStateMap {
 public:
  void Reset(size_t max_items) {
    size_t cap = 16;
    while (cap < 2 * max_items) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Returns {index, inserted}.
  std::pair<int32_t, bool> Insert(const LmState& s, int32_t index) {
    // Up to 3 history words (a 4-gram model, as in the benchmark).
    const uint64_t w0 = s.length > 0 ? s.words[0] : 0, w1 = s.length > 1 ? s.words[1] : 0;
    const uint64_t w2 = s.length > 2 ? s.words[2] : 0;
    const uint64_t a = w0 << 32 | w1, b = w2 << 32 | s.length;
    uint64_t h = ngram::Mix64(a * 0x9E3779B97F4A7C15ull ^ b);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.index < 0) {
        slot = {a, b, index};
        return {index, true};
      }
      if (slot.a == a && slot.b == b) return {slot.index, false};
    }
  }

 private:
  struct Slot {
    uint64_t a = 0, b = 0;
    int32_t index = -1;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

struct Result {
  double best;
  size_t nodes;
};

Result Forward(const TokenLm& tlm, const Lattices& l, int i, Mode mode) {
  const NgramLM& lm = tlm.ngram();
  const int h = l.h, k = l.k;
  std::vector<int32_t> ctx;
  for (int j = 0; j < l.c; ++j)
    if (l.context[size_t(i) * l.c + j] >= 0) ctx.push_back(l.context[size_t(i) * l.c + j]);
  std::vector<LmState> states{tlm.Start(ctx.data(), ctx.size(), false)};
  std::vector<double> scores{0.0};
  size_t nodes = 1;
  std::vector<WordIndex> words(k);
  std::vector<uint64_t> keys(size_t(k) * kMaxOrder);
  std::vector<const Entry*> found(size_t(k) * kMaxOrder);
  // memo: per order j, (hash of the j history words and the candidate) -> entry
  std::unordered_map<uint64_t, const Entry*> memo;
  std::vector<int> alive_buf;
  for (int t = 0; t < h; ++t) {
    const int32_t* tok = &l.tokens[(size_t(i) * h + t) * k];
    const float* lp = &l.logprobs[(size_t(i) * h + t) * k];
    for (int r = 0; r < k; ++r) words[r] = tlm.WordOf(tok[r]);
    std::unordered_map<LmState, int32_t, LmStateHash> index;
    FlatStateMap flat;
    if (mode >= Mode::kFlat) flat.Reset(states.size() * k);
    std::vector<LmState> next_states;
    std::vector<double> next_scores;
    memo.clear();
    for (size_t s = 0; s < states.size(); ++s) {
      const LmState& in = states[s];
      if (mode == Mode::kEarly) {
        // Order by order over the k candidates: prefetch every live key, then probe; a candidate
        // whose n-gram of order j is absent stops there (valid when every listed n-gram's suffix
        // is listed, as in lmplz models: then no longer n-gram ending in it exists either).
        for (int r = 0; r < k; ++r) {
          keys[size_t(r) * kMaxOrder] = ngram::SeedKey(words[r]);
          for (int j = 1; j <= in.length; ++j) found[size_t(r) * kMaxOrder + j] = nullptr;
        }
        int live = k;
        std::vector<int>& alive = alive_buf;
        alive.resize(k);
        for (int r = 0; r < k; ++r) alive[r] = r;
        for (int j = 1; j <= in.length && live > 0; ++j) {
          const auto& table = lm.table(j + 1);
          for (int a = 0; a < live; ++a) {
            const int r = alive[a];
            const uint64_t key = ngram::ExtendKey(keys[size_t(r) * kMaxOrder + j - 1], in.words[j - 1]);
            keys[size_t(r) * kMaxOrder + j] = key;
            __builtin_prefetch(&table.data()[Home(table, key)]);
          }
          int kept = 0;
          for (int a = 0; a < live; ++a) {
            const int r = alive[a];
            const Entry* e = table.Find(keys[size_t(r) * kMaxOrder + j]);
            found[size_t(r) * kMaxOrder + j] = e;
            if (e != nullptr) alive[kept++] = r;
          }
          live = kept;
        }
      } else if (mode != Mode::kPlain) {
        for (int r = 0; r < k; ++r) {
          uint64_t key = ngram::SeedKey(words[r]);
          for (int j = 1; j <= in.length; ++j) {
            key = ngram::ExtendKey(key, in.words[j - 1]);
            keys[size_t(r) * kMaxOrder + j] = key;
            const auto& table = lm.table(j + 1);
            if (mode == Mode::kMemo && j < in.length) {
              auto it = memo.find(key ^ j);
              if (it != memo.end()) {
                found[size_t(r) * kMaxOrder + j] = it->second;
                keys[size_t(r) * kMaxOrder + j] = 0;  // resolved
                continue;
              }
            }
            __builtin_prefetch(&table.data()[Home(table, key)]);
          }
        }
        for (int r = 0; r < k; ++r)
          for (int j = 1; j <= in.length; ++j) {
            const uint64_t key = keys[size_t(r) * kMaxOrder + j];
            if (mode == Mode::kMemo && key == 0) continue;
            const Entry* e = lm.table(j + 1).Find(key);
            found[size_t(r) * kMaxOrder + j] = e;
            if (mode == Mode::kMemo && j < in.length) memo.emplace(key ^ j, e);
          }
      }
      for (int r = 0; r < k; ++r) {
        LmState out;
        float lm_ln;
        if (mode == Mode::kPlain) {
          lm_ln = tlm.ScoreToken(in, tok[r], &out);
        } else {
          lm_ln = Resolve(lm, in, words[r], &found[size_t(r) * kMaxOrder], &out);
        }
        const double g = scores[s] + lp[r] + lm_ln;
        int32_t at;
        bool inserted;
        if (mode >= Mode::kFlat) {
          std::tie(at, inserted) = flat.Insert(out, int32_t(next_states.size()));
        } else {
          auto [it, ins] = index.try_emplace(out, int32_t(next_states.size()));
          at = it->second;
          inserted = ins;
        }
        if (inserted) {
          next_states.push_back(out);
          next_scores.push_back(g);
        } else if (g > next_scores[at]) {
          next_scores[at] = g;
        }
      }
    }
    nodes += next_states.size();
    states.swap(next_states);
    scores.swap(next_scores);
  }
  return {*std::max_element(scores.begin(), scores.end()), nodes};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: score_batching MODEL.dlm WORDS.txt LATTICES.bin\n";
    return 2;
  }
  auto model = LoadNgramFile(argv[1]);
  std::vector<std::string> vocab;
  std::ifstream wf(argv[2]);
  for (std::string w; std::getline(wf, w);) vocab.push_back(w);
  TokenLm tlm(model, vocab, -1000.0f);
  const Lattices l = Read(argv[3]);
  const char* names[] = {"plain", "prefetch", "memo", "flat", "early"};
  std::vector<Result> first(l.n);
  for (int m = 0; m < 5; ++m) {
    const Mode mode = static_cast<Mode>(m);
    for (int i = 0; i < std::min(l.n, 5); ++i) Forward(tlm, l, i, mode);  // warm-up
    std::vector<double> ms;
    size_t nodes = 0;
    for (int i = 0; i < l.n; ++i) {
      std::vector<double> runs;
      Result res{};
      for (int r = 0; r < 3; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        res = Forward(tlm, l, i, mode);
        const auto t1 = std::chrono::steady_clock::now();
        runs.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::sort(runs.begin(), runs.end());
      const double best = runs[1];  // median of 3, as lmfst.cc
      if (m == 0) first[i] = res;
      if (std::abs(res.best - first[i].best) > 1e-6 || res.nodes != first[i].nodes)
        std::cerr << "MISMATCH lattice " << i << " mode " << names[m] << "\n";
      ms.push_back(best);
      nodes += res.nodes;
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-9s h=%d k=%d: median %.3f ms per lattice (median of 3 runs each), %.0f composed nodes, %.1f ns per arc\n",
                names[m], l.h, l.k, ms[ms.size() / 2], double(nodes) / l.n,
                1e6 * ms[ms.size() / 2] / (double(nodes) / l.n * l.k));
  }
  return 0;
}
