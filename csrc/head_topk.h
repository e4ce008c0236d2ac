// One head's top-k candidates and log-softmax normalizer, in two streaming passes over its logits.
//
// Lattice::FromLogits spends almost all its time here: at V = 4096, 7 heads, the old version
// (iota + nth_element over an index array, std::exp in double per logit) took about 210 us per
// lattice, a third of a decoding step's drafting. These passes read each logit twice and touch no
// other memory:
//  1. ScanHead: the top k kept sorted in a small array by insertion against the current k-th best,
//     skipping blocks of 16 logits whose maximum does not beat it (after the first few hundred
//     logits nearly all blocks);
//  2. SumExp: sum of exp((logit - max) / T) with a branch-free float exponential (ExpNonPositive)
//     that the compiler vectorizes, accumulated in double lanes, and whether a logit is NaN or
//     +inf.
// A masked head (fewer than k logits above -inf) shows as a -inf k-th best.
#pragma once

#include <cstdint>

namespace dl {

struct HeadCandidate {
  float logit;
  int32_t token;
};

// Fills best[0..k) with the k highest logits of row[0..vocab), highest first, ties by lower token
// id (masked -inf logits rank last, so they appear only when fewer than k are unmasked). Defined
// for any input; with NaN logits the result means nothing (SumExp reports them).
void ScanHead(const float* row, int vocab, int k, HeadCandidate* best);

// sum over v of exp((row[v] - max_logit) * inv_temperature); max_logit is the row's largest finite
// logit, so every exponent is <= 0 (-inf logits contribute 0). Relative error about 1e-7.
// *invalid: some logit is NaN or +inf (the sum is then meaningless).
double SumExp(const float* row, int vocab, float max_logit, double inv_temperature, bool* invalid);

// Each of `rows` heads' k best tokens and their log-probabilities under softmax(row / temperature),
// highest first (ties: lower token id), into tokens/logprobs [rows, k]: ScanHead, then SumExp
// around the best logit. A head with fewer than k logits above -inf ends with -inf
// log-probabilities (masked tokens, as a top-k of log_softmax gives them). Throws
// InvalidArgument for k outside 1..vocab, a temperature that is not finite and > 0, a NaN or +inf
// logit (naming the head and token) and a head whose logits are all -inf (no law to draw from).
void TopkLogprobs(const float* logits, int rows, int vocab, int k, float temperature,
                  int32_t* tokens, float* logprobs);

}  // namespace dl
