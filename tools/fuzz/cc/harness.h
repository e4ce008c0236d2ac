// Shared pieces of the libFuzzer harnesses (tools/fuzz/cc/*.cc, built by `make fuzz`).
//
// A harness may end in the errors the core promises for bad input (FormatError, InvalidArgument,
// FileError); anything else is a finding: another exception (libFuzzer reports it as a crash), a
// sanitizer report (ASan, UBSan: -fno-sanitize-recover), a failed Check (an exactness or
// consistency property), a timeout or too much memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "errors.h"
#include "lattice.h"
#include "nbest.h"
#include "ngram/byte_source.h"
#include "ngram/load.h"
#include "ngram/token_lm.h"

namespace dl::fuzz {

// Runs `body`; the documented bad-input errors end it quietly.
template <typename Body>
void Guarded(const Body& body) {
  try {
    body();
  } catch (const FormatError&) {
  } catch (const InvalidArgument&) {
  } catch (const FileError&) {
  }
}

// A property that must hold: a finding when it does not.
inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz check failed: %s\n", what);
    std::abort();
  }
}

// Hands out at most `step` bytes per Read, so that lines cross block boundaries.
class ChunkSource : public ByteSource {
 public:
  ChunkSource(std::string_view text, size_t step) : text_(text), step_(step) {}
  size_t Read(char* out, size_t n) override {
    const size_t got = std::min({n, step_, text_.size() - pos_});
    if (got > 0) std::memcpy(out, text_.data() + pos_, got);
    pos_ += got;
    return got;
  }

 private:
  std::string_view text_;
  size_t step_;
  size_t pos_ = 0;
};

// Every query path of a loaded model: whole-sequence scores, Start/Step, and the p best drafts
// of a small lattice over its first words (token ids are the decimal words; a model whose words
// are not needs a vocabulary, an InvalidArgument here).
inline void Exercise(std::shared_ptr<NgramLM> model) {
  const size_t words = model->vocab_size();
  const TokenLm lm(std::move(model), std::nullopt, -20.0f);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < static_cast<int32_t>(std::min<size_t>(words, 6)); ++i) ids.push_back(i);
  lm.CheckTokens(ids.data(), ids.size(), "ids");
  std::vector<double> scores;
  TokenScores(lm, ids.data(), ids.size(), nullptr, 0, true, true, &scores);
  LmState state = lm.Start(nullptr, 0, true);
  for (int32_t id : ids) lm.ScoreToken(state, id, &state);
  if (ids.size() < 2) return;
  const int k = static_cast<int>(std::min<size_t>(ids.size(), 3));
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  for (int t = 0; t < 3; ++t)
    for (int r = 0; r < k; ++r) {
      tokens.push_back((t + r) % static_cast<int32_t>(ids.size()));
      logprobs.push_back(-0.5f * static_cast<float>(r + t));
    }
  const Lattice lattice = Lattice::FromTopk(tokens.data(), logprobs.data(), 3, k);
  RescoreOptions options;
  options.p = 5;
  options.alpha = 0.7;
  BestDrafts(lattice, lm, ids.data(), 1, options);
}

}  // namespace dl::fuzz
