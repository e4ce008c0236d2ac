// OpenFST reference for bench/rescore_latency.py: exact-backoff n-gram automata and
// lattice x LM rescoring with a PhiMatcher.
//
//   lmfst convert ARPA OUTDIR
//       Reads an ARPA file (any order; pruned models whose n-gram prefixes are missing are
//       filled in KenLM style) and writes
//         OUTDIR/lm_phi.fst  exact backoff: states = LM contexts, word arcs -ln p(w|h),
//                            one failure arc per non-empty context, labelled PHI, weight
//                            -ln bo(h) to the longest proper suffix context; tropical,
//                            ilabel-sorted (PHI = vocab size + 1 sorts last);
//         OUTDIR/lm_eps.fst  the same automaton with the failure label replaced by epsilon
//                            (the usual approximation: a backoff path competes with the
//                            listed n-gram);
//         OUTDIR/words.txt   the vocabulary in ARPA unigram order; token id i <-> label i+1;
//         OUTDIR/meta.txt    phi label, <s> state, empty-context state, counts.
//       State numbering is identical in both FSTs. Every state is final with weight One
//       (no </s> scoring: drafts are prefixes, not sentences).
//
//   lmfst bench LM_PHI.fst ALPHA REPEATS WARMUP {LATTICES.bin P OUT.bin}...
//       One LM load, any number of lattice files; with a single "-" instead of the files, reads
//       "LATTICES.bin P OUT.bin" lines from stdin and prints "done" after each. LATTICES.bin: int32 n, h, k, c; int32 tokens[n][h][k]; float32 logprobs[n][h][k];
//       int32 context[n][c] (token ids, -1 = padding, oldest first).
//       For each lattice: start state = LM state after its context (walked with failure
//       semantics from the empty context, i.e. bos = False); timed: lazy ComposeFst(lattice,
//       LM) with PhiMatcher on the LM side + ShortestPath(nshortest = P, unique = false: both
//       automata are deterministic, so distinct paths are distinct strings). The lattice
//       weights are -logprob / ALPHA, so score = -ALPHA * path weight = head + ALPHA * LM.
//       Each lattice is run up to REPEATS times (fewer once its runs add up to 10 ms); the
//       median of its runs is its latency. The first
//       WARMUP lattices of each file are run once, untimed, first. The LM's start state is
//       set outside the timing (SetStart on the VectorFst; it is not shared, so no copy).
//       OUT.bin: int32 n, p; int32 start[n]; float64 seconds[n]; int32 npaths[n];
//       int32 tokens[n][p][h] (-1 padding); float64 scores[n][p] (best first);
//       int64 composed_states[n] (states of the composed automaton; counted untimed).
//
// Build: g++ -O2 -std=c++17 lmfst.cc -o lmfst -lfst -lpthread -ldl   (apt-get install libfst-dev)
#include <fst/fstlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using fst::StdArc;
using fst::StdVectorFst;
using fst::TropicalWeight;
using Label = StdArc::Label;
// Runs of one lattice stop after REPEATS or once they add up to this (large lattices: 1 run).
constexpr double kEnoughSeconds = 0.01;
using StateId = StdArc::StateId;

constexpr double kLn10 = 2.302585092994045684;

// An n-gram as its word ids packed into bytes (hash-map key).
std::string Key(const uint32_t* words, int n) {
  return std::string(reinterpret_cast<const char*>(words), sizeof(uint32_t) * n);
}

struct Entry {
  float logprob10;
  float backoff10;
};

struct Arpa {
  std::vector<std::string> vocab;
  std::unordered_map<std::string, uint32_t> index;
  std::vector<std::unordered_map<std::string, Entry>> grams;  // grams[n-1]
  std::vector<std::vector<std::vector<uint32_t>>> order_list;  // n-grams in file order
  int order = 0;
};

Arpa ReadArpa(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  Arpa arpa;
  std::string line;
  std::vector<uint64_t> counts;
  while (std::getline(in, line)) {
    if (line == "\\data\\") break;
  }
  while (std::getline(in, line)) {
    if (line.rfind("ngram ", 0) == 0) {
      const auto eq = line.find('=');
      counts.push_back(std::stoull(line.substr(eq + 1)));
    } else if (!line.empty()) {
      break;
    }
  }
  arpa.order = static_cast<int>(counts.size());
  arpa.grams.resize(arpa.order);
  arpa.order_list.resize(arpa.order);
  int n = 0;
  std::vector<uint32_t> words;
  do {
    if (line.empty()) continue;
    if (line[0] == '\\') {
      if (line == "\\end\\") break;
      n = std::stoi(line.substr(1));
      arpa.grams[n - 1].reserve(counts[n - 1]);
      arpa.order_list[n - 1].reserve(counts[n - 1]);
      continue;
    }
    // logprob \t w1 ... wn [\t backoff]
    const char* s = line.c_str();
    char* end = nullptr;
    const float logprob = std::strtof(s, &end);
    s = end;
    words.clear();
    for (int i = 0; i < n; ++i) {
      while (*s == ' ' || *s == '\t') ++s;
      const char* b = s;
      while (*s && *s != ' ' && *s != '\t') ++s;
      std::string w(b, s);
      if (n == 1) {
        arpa.index.emplace(w, static_cast<uint32_t>(arpa.vocab.size()));
        arpa.vocab.push_back(w);
      }
      auto it = arpa.index.find(w);
      if (it == arpa.index.end()) throw std::runtime_error("word not in unigrams: " + w);
      words.push_back(it->second);
    }
    while (*s == ' ' || *s == '\t') ++s;
    const float backoff = *s ? std::strtof(s, nullptr) : 0.0f;
    arpa.grams[n - 1].emplace(Key(words.data(), n), Entry{logprob, backoff});
    arpa.order_list[n - 1].push_back(words);
  } while (std::getline(in, line));
  return arpa;
}

class Converter {
 public:
  explicit Converter(const Arpa& arpa) : arpa_(arpa), phi_(arpa.vocab.size() + 1) {}

  void Build() {
    const int order = arpa_.order;
    AddState(std::vector<uint32_t>());  // the empty context
    // Listed contexts (order < N) and, for pruned models, their missing prefixes.
    for (int n = 1; n < order; ++n)
      for (const auto& g : arpa_.order_list[n - 1]) AddState(g);
    for (int n = 2; n <= order; ++n) {
      for (const auto& g : arpa_.order_list[n - 1]) {
        for (int m = 1; m < n; ++m) {
          std::vector<uint32_t> prefix(g.begin(), g.begin() + m);
          if (!state_.count(Key(prefix.data(), m))) AddState(prefix);
        }
      }
    }
    fst_.ReserveStates(contexts_.size());
    for (size_t s = 0; s < contexts_.size(); ++s) fst_.AddState();
    // Word arcs of listed n-grams.
    for (int n = 1; n <= order; ++n) {
      for (const auto& g : arpa_.order_list[n - 1]) {
        const auto& e = arpa_.grams[n - 1].at(Key(g.data(), n));
        const StateId from = state_.at(Key(g.data(), n - 1));
        AddWordArc(from, g, -e.logprob10 * kLn10);
      }
    }
    // Fill-in arcs into states that are contexts but not listed n-grams (KenLM "blank"
    // entries): p(w|h) computed by backoff, so that the history is not lost.
    for (size_t s = 1; s < contexts_.size(); ++s) {
      const auto& c = contexts_[s];
      const int n = static_cast<int>(c.size());
      if (arpa_.grams[n - 1].count(Key(c.data(), n))) continue;
      ++filled_;
      AddWordArc(state_.at(Key(c.data(), n - 1)), c, -LogProb10(c) * kLn10);
    }
    // Failure arcs.
    for (size_t s = 1; s < contexts_.size(); ++s) {
      const auto& c = contexts_[s];
      const int n = static_cast<int>(c.size());
      const auto it = arpa_.grams[n - 1].find(Key(c.data(), n));
      const double bo10 = it == arpa_.grams[n - 1].end() ? 0.0 : it->second.backoff10;
      const StateId to = LongestSuffixState(c.data() + 1, n - 1);
      fst_.AddArc(s, StdArc(phi_, phi_, TropicalWeight(-bo10 * kLn10), to));
    }
    for (size_t s = 0; s < contexts_.size(); ++s) fst_.SetFinal(s, TropicalWeight::One());
    const auto bos = arpa_.index.find("<s>");
    bos_state_ = 0;
    if (bos != arpa_.index.end()) {
      const uint32_t w = bos->second;
      bos_state_ = LongestSuffixState(&w, 1);
    }
    fst_.SetStart(bos_state_);
    fst::ArcSort(&fst_, fst::ILabelCompare<StdArc>());
  }

  void Write(const std::string& dir) {
    fst_.Write(dir + "/lm_phi.fst");
    StdVectorFst eps(fst_);
    for (StateId s = 0; s < eps.NumStates(); ++s) {
      for (fst::MutableArcIterator<StdVectorFst> it(&eps, s); !it.Done(); it.Next()) {
        auto arc = it.Value();
        if (arc.ilabel == phi_) {
          arc.ilabel = arc.olabel = 0;
          it.SetValue(arc);
        }
      }
    }
    fst::ArcSort(&eps, fst::ILabelCompare<StdArc>());
    eps.Write(dir + "/lm_eps.fst");
    std::ofstream words(dir + "/words.txt");
    for (const auto& w : arpa_.vocab) words << w << '\n';
    std::ofstream meta(dir + "/meta.txt");
    meta << "phi_label " << phi_ << "\nbos_state " << bos_state_ << "\nnull_state 0\n"
         << "order " << arpa_.order << "\nstates " << fst_.NumStates() << "\nfilled_arcs "
         << filled_ << "\nvocab " << arpa_.vocab.size() << "\n";
  }

 private:
  StateId AddState(const std::vector<uint32_t>& c) {
    const auto key = Key(c.data(), static_cast<int>(c.size()));
    const auto it = state_.find(key);
    if (it != state_.end()) return it->second;
    const StateId id = static_cast<StateId>(contexts_.size());
    state_.emplace(key, id);
    contexts_.push_back(c);
    return id;
  }

  StateId LongestSuffixState(const uint32_t* w, int n) const {
    for (int start = 0; start <= n; ++start) {
      const auto it = state_.find(Key(w + start, n - start));
      if (it != state_.end()) return it->second;
    }
    throw std::logic_error("empty context missing");
  }

  void AddWordArc(StateId from, const std::vector<uint32_t>& g, double weight) {
    const int n = static_cast<int>(g.size());
    const StateId to = LongestSuffixState(g.data(), n);
    const Label label = static_cast<Label>(g.back()) + 1;
    fst_.AddArc(from, StdArc(label, label, TropicalWeight(weight), to));
  }

  // Katz backoff log10 p(g.back() | g[0..n-1)) from the listed n-grams.
  double LogProb10(const std::vector<uint32_t>& g) const {
    const int n = static_cast<int>(g.size());
    double bo = 0.0;
    for (int start = 0; start < n; ++start) {
      const int m = n - start;
      const auto it = arpa_.grams[m - 1].find(Key(g.data() + start, m));
      if (it != arpa_.grams[m - 1].end()) return bo + it->second.logprob10;
      if (m > 1) {
        const auto ctx = arpa_.grams[m - 2].find(Key(g.data() + start, m - 1));
        if (ctx != arpa_.grams[m - 2].end()) bo += ctx->second.backoff10;
      }
    }
    return bo - 99.0;  // unknown word (not reached for vocabulary words)
  }

  const Arpa& arpa_;
  const Label phi_;
  std::unordered_map<std::string, StateId> state_;
  std::vector<std::vector<uint32_t>> contexts_;
  StdVectorFst fst_;
  StateId bos_state_ = 0;
  size_t filled_ = 0;
};

template <class T>
void ReadExact(std::FILE* f, T* data, size_t n, const char* what) {
  if (std::fread(data, sizeof(T), n, f) != n) throw std::runtime_error(std::string("short read: ") + what);
}

// Matchers on the concrete VectorFst type (inlined arc access; both operands are VectorFsts).
using PhiM = fst::PhiMatcher<fst::SortedMatcher<StdVectorFst>>;

// LM state after `words` (token ids) from `start`, with failure semantics.
StateId Walk(const StdVectorFst& lm, Label phi, StateId s, const std::vector<int32_t>& words) {
  for (int32_t w : words) {
    const Label label = w + 1;
    for (;;) {
      bool found = false;
      StateId fail = fst::kNoStateId;
      for (fst::ArcIterator<StdVectorFst> it(lm, s); !it.Done(); it.Next()) {
        const auto& arc = it.Value();
        if (arc.ilabel == label) {
          s = arc.nextstate;
          found = true;
          break;
        }
        if (arc.ilabel == phi) fail = arc.nextstate;
      }
      if (found) break;
      if (fail == fst::kNoStateId) throw std::runtime_error("context word unknown to LM");
      s = fail;
    }
  }
  return s;
}

// One lattice file: rescore every lattice, write OUT.bin (format in the header comment).
void BenchFile(StdVectorFst* lm, Label phi, double alpha, int repeats, int warmup,
               const std::string& in_path, int p, const std::string& out_path) {
  std::FILE* f = std::fopen(in_path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + in_path);
  int32_t hdr[4];
  ReadExact(f, hdr, 4, "header");
  const int n = hdr[0], h = hdr[1], k = hdr[2], c = hdr[3];
  std::vector<int32_t> tokens(static_cast<size_t>(n) * h * k);
  std::vector<float> logprobs(tokens.size());
  std::vector<int32_t> context(static_cast<size_t>(n) * c);
  ReadExact(f, tokens.data(), tokens.size(), "tokens");
  ReadExact(f, logprobs.data(), logprobs.size(), "logprobs");
  ReadExact(f, context.data(), context.size(), "context");
  std::fclose(f);

  std::vector<int32_t> starts(n), npaths(n);
  std::vector<int64_t> nstates(n);
  std::vector<double> seconds(n);
  std::vector<int32_t> out_tokens(static_cast<size_t>(n) * p * h, -1);
  std::vector<double> out_scores(static_cast<size_t>(n) * p, NAN);
  const StateId null_state = 0;
  std::vector<StdVectorFst> lattices(n);
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> ctx;
    for (int j = 0; j < c; ++j)
      if (context[static_cast<size_t>(i) * c + j] >= 0) ctx.push_back(context[static_cast<size_t>(i) * c + j]);
    starts[i] = Walk(*lm, phi, null_state, ctx);
    // The lattice: a sausage acceptor, h + 1 states, k arcs per head.
    StdVectorFst& lat = lattices[i];
    for (int t = 0; t <= h; ++t) lat.AddState();
    lat.SetStart(0);
    lat.SetFinal(h, TropicalWeight::One());
    for (int t = 0; t < h; ++t) {
      for (int j = 0; j < k; ++j) {
        const size_t at = (static_cast<size_t>(i) * h + t) * k + j;
        const Label label = tokens[at] + 1;
        lat.AddArc(t, StdArc(label, label, TropicalWeight(-logprobs[at] / alpha), t + 1));
      }
    }
    fst::ArcSort(&lat, fst::OLabelCompare<StdArc>());
  }
  // Timed: lazy composition with exact failure matching + n-shortest paths.
  const char* gc_env = std::getenv("LMFST_GC_LIMIT");
  auto rescore = [&](int i, StdVectorFst* best, int64_t* composed_states) {
    using Filter = fst::SequenceComposeFilter<PhiM, PhiM>;  // no epsilons on either side
    // Cache every expanded state (no garbage collection; OpenFST's default collects beyond 1 MB,
    // which measured the same here; gc_limit = 0, as in OpenFST's phi example, is 3x slower).
    fst::CacheOptions cache(/*gc=*/false, /*gc_limit=*/0);
    if (gc_env) cache = fst::CacheOptions(true, std::atoll(gc_env));  // LMFST_GC_LIMIT=bytes
    fst::ComposeFstImplOptions<PhiM, PhiM, Filter, fst::GenericComposeStateTable<StdArc, Filter::FilterState>,
                               fst::DefaultCacheStore<StdArc>>
        opts(cache,
             new PhiM(lattices[i], fst::MATCH_NONE, fst::kNoLabel),
             new PhiM(*lm, fst::MATCH_INPUT, phi, /*phi_loop=*/false, fst::MATCHER_REWRITE_NEVER));
    fst::ComposeFst<StdArc> composed(lattices[i], *lm, opts);
    best->DeleteStates();
    fst::ShortestPath(composed, best, p, /*unique=*/false);
    if (composed_states) *composed_states = fst::CountStates(composed);  // all expanded already
  };
  StdVectorFst best;
  for (int i = 0; i < std::min(n, warmup); ++i) {
    lm->SetStart(starts[i]);
    rescore(i, &best, nullptr);
  }
  for (int i = 0; i < n; ++i) {
    lm->SetStart(starts[i]);  // outside the timing: no copy (the LM is not shared here)
    std::vector<double> runs;
    double total = 0;
    for (int r = 0; r < repeats && (r == 0 || total < kEnoughSeconds); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      rescore(i, &best, nullptr);
      const auto t1 = std::chrono::steady_clock::now();
      runs.push_back(std::chrono::duration<double>(t1 - t0).count());
      total += runs.back();
      if (best.Properties(fst::kError, false)) throw std::runtime_error("OpenFST error");
    }
    {  // untimed: the size of the composed automaton (profile)
      StdVectorFst scratch;
      int64_t count = 0;
      rescore(i, &scratch, &count);
      nstates[i] = count;
    }
    std::sort(runs.begin(), runs.end());
    seconds[i] = runs[runs.size() / 2];
    // Read the paths: the i-th arc out of the start state begins the i-th best path.
    std::vector<std::pair<double, std::vector<int32_t>>> paths;
    const StateId s0 = best.Start();
    if (s0 != fst::kNoStateId) {
      for (fst::ArcIterator<StdVectorFst> it(best, s0); !it.Done(); it.Next()) {
        std::vector<int32_t> words;
        double w = 0.0;
        StdArc arc = it.Value();
        for (;;) {
          w += arc.weight.Value();
          if (arc.olabel != 0) words.push_back(arc.olabel - 1);
          const StateId s = arc.nextstate;
          if (best.NumArcs(s) == 0) {
            w += best.Final(s).Value();
            break;
          }
          if (best.NumArcs(s) != 1) throw std::runtime_error("n-best output is not a set of chains");
          arc = fst::ArcIterator<StdVectorFst>(best, s).Value();
        }
        paths.emplace_back(w, words);
      }
    }
    std::stable_sort(paths.begin(), paths.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    npaths[i] = static_cast<int32_t>(paths.size());
    for (size_t q = 0; q < paths.size() && q < static_cast<size_t>(p); ++q) {
      out_scores[static_cast<size_t>(i) * p + q] = -alpha * paths[q].first;
      if (static_cast<int>(paths[q].second.size()) != h) throw std::runtime_error("path length != h");
      for (int t = 0; t < h; ++t) out_tokens[(static_cast<size_t>(i) * p + q) * h + t] = paths[q].second[t];
    }
  }
  std::FILE* o = std::fopen(out_path.c_str(), "wb");
  if (!o) throw std::runtime_error("cannot write " + out_path);
  const int32_t ohdr[2] = {n, p};
  std::fwrite(ohdr, sizeof(int32_t), 2, o);
  std::fwrite(starts.data(), sizeof(int32_t), n, o);
  std::fwrite(seconds.data(), sizeof(double), n, o);
  std::fwrite(npaths.data(), sizeof(int32_t), n, o);
  std::fwrite(out_tokens.data(), sizeof(int32_t), out_tokens.size(), o);
  std::fwrite(out_scores.data(), sizeof(double), out_scores.size(), o);
  std::fwrite(nstates.data(), sizeof(int64_t), n, o);
  std::fclose(o);
}

int Bench(int argc, char** argv) {
  if (argc < 7) throw std::runtime_error("usage: lmfst bench LM_PHI.fst ALPHA REPEATS WARMUP {LATTICES.bin P OUT.bin}...|-");
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<StdVectorFst> lm(StdVectorFst::Read(argv[2]));
  if (!lm) throw std::runtime_error(std::string("cannot read ") + argv[2]);
  const auto t1 = std::chrono::steady_clock::now();
  std::cerr << "lmfst: read " << argv[2] << " in " << std::chrono::duration<double>(t1 - t0).count()
            << " s\n";
  // The failure label is recorded beside the FST by `convert` (meta.txt).
  Label phi = fst::kNoLabel;
  {
    std::string dir(argv[2]);
    const auto slash = dir.find_last_of('/');
    dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash);
    std::ifstream meta(dir + "/meta.txt");
    std::string key;
    long value;
    while (meta >> key >> value)
      if (key == "phi_label") phi = static_cast<Label>(value);
    if (phi == fst::kNoLabel) throw std::runtime_error("no phi_label in " + dir + "/meta.txt");
  }
  const double alpha = std::atof(argv[3]);
  const int repeats = std::atoi(argv[4]);
  const int warmup = std::atoi(argv[5]);
  if (argc == 7 && std::string(argv[6]) == "-") {
    // Serve: one "LATTICES.bin P OUT.bin" job per stdin line, answer "done" on stdout, so the
    // caller can interleave engines shape by shape with one LM load.
    std::string in_path, out_path;
    int p = 0;
    while (std::cin >> in_path >> p >> out_path) {
      BenchFile(lm.get(), phi, alpha, repeats, warmup, in_path, p, out_path);
      std::cout << "done" << std::endl;
    }
    return 0;
  }
  if (argc < 9 || (argc - 6) % 3 != 0)
    throw std::runtime_error("usage: lmfst bench LM_PHI.fst ALPHA REPEATS WARMUP {LATTICES.bin P OUT.bin}...|-");
  for (int a = 6; a + 2 < argc; a += 3)
    BenchFile(lm.get(), phi, alpha, repeats, warmup, argv[a], std::atoi(argv[a + 1]), argv[a + 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::string(argv[1]) == "convert" && argc == 4) {
      const auto t0 = std::chrono::steady_clock::now();
      Arpa arpa = ReadArpa(argv[2]);
      Converter conv(arpa);
      conv.Build();
      conv.Write(argv[3]);
      const auto t1 = std::chrono::steady_clock::now();
      std::cerr << "converted in " << std::chrono::duration<double>(t1 - t0).count() << " s\n";
      return 0;
    }
    if (argc >= 2 && std::string(argv[1]) == "bench") return Bench(argc, argv);
    std::cerr << "usage: lmfst convert ARPA OUTDIR | lmfst bench LM_PHI.fst ALPHA REPEATS WARMUP {LATTICES.bin P OUT.bin}...\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "lmfst: " << e.what() << "\n";
    return 1;
  }
}
