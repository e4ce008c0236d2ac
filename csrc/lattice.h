// Top-k "sausage" lattice of h prediction heads.
//
// A lattice has h positions (heads) and k candidate tokens per position; every path picks one
// candidate per position, so there are k^h paths. Candidates of a head are stored sorted by
// log-probability, best first, ties broken by the lower token id; the column index of a
// candidate is its *rank* (used by the tie rule of the p-best search, see nbest.h).
//
// FromLogits: top-k and log-softmax over the whole vocabulary after dividing the logits by the
// temperature, in two streaming passes per head (head_topk.h; O(V + k^2) per head, the
// normalizer's relative error about 1e-7). FromTopk: validates and sorts precomputed [h, k] arrays.
//
// Preconditions: none; every impossible input throws dl::InvalidArgument naming the values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dl {

struct Lattice {
  int h = 0;                    // number of heads (positions)
  int k = 0;                    // candidates per head
  std::vector<int32_t> tokens;  // [h * k], row-major; rank order within a row
  std::vector<float> logprobs;  // [h * k], natural log, <= 0, non-increasing within a row

  int32_t token(int t, int rank) const { return tokens[static_cast<size_t>(t) * k + rank]; }
  float logprob(int t, int rank) const { return logprobs[static_cast<size_t>(t) * k + rank]; }

  // logits: [h, vocab] row-major float32. Throws on h < 1, vocab < 1, k < 1, k > vocab,
  // non-positive or non-finite temperature, NaN or +inf logits, fewer than k logits above -inf
  // in a head. A -inf logit is a masked token (probability 0) and never a candidate.
  static Lattice FromLogits(const float* logits, int h, int vocab, int k, float temperature);
  // tokens, logprobs: [h, k] row-major. Throws on h < 1, k < 1, negative token ids, ids >=
  // vocab_size (when vocab_size >= 0; it must then be >= 1), a token repeated within a head, or a
  // non-finite or positive log-probability. Sorts each head.
  static Lattice FromTopk(const int32_t* tokens, const float* logprobs, int h, int k,
                          int64_t vocab_size = -1);

  // OpenFST AT&T text: states 0..h, state t -> t+1 one arc per candidate with
  // input = output label = token id + 1 (label 0 is epsilon in OpenFST), weight = -logprob
  // (tropical semiring), final state h with weight 0.
  std::string ToFstText() const;
  // Graphviz DOT of the same automaton; arc labels "token (logprob)" or "word (logprob)"
  // when `words` is non-empty (words[token] is used for tokens inside its range).
  std::string ToDot(const std::vector<std::string>& words = {}) const;
};

}  // namespace dl
