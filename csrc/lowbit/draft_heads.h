// The draft heads' logits in one C++ call, for the lean step's heads (python/draftlattice/lean/
// heads.py). For each row: the token the target chose there, embedded; every head's residual MLP
// (up product, bias, GELU, down product, bias, residual); then the output rows the heads draft
// from (a draft vocabulary's or the whole output layer's), written as float32 logits over the
// full vocabulary, -inf outside the draft vocabulary.
//
// Why: in Python the same call is ~20 small PyTorch ops around three kernel calls, run between
// two target steps, where each op is 5-20x slower than hot (the step has flushed the caches):
// 1.0-1.3 ms a call inside the decoding loop, for ~8 MB of weights that take ~0.35 ms to read.
//
// Cost: three products reading the heads' weights once (up, each head's down, the output rows:
// O(batch * count * (width * (in + hidden) + rows * hidden)) multiply-adds) and O(batch * count *
// vocab) to write the logits. Preconditions: hidden a multiple of 16 (matmul.h's blocks), each
// head's rows contiguous in `up` and `down`.
//
// The same arithmetic as the Python heads (each product and rounding to bf16 where they round),
// GELU's erf included up to its last bits (Abramowitz and Stegun's 7.1.26, as PyTorch's vectorized
// erf, with another exponential): a hidden unit's bf16 value may differ by one unit in the last
// place. The heads only draft (the target verifies every draft), so no decoding's output moves.
#pragma once

#include <cstdint>
#include <string>

#include "lowbit/matmul.h"

namespace dl::lowbit {

struct DraftHeadsWeights {
  int64_t count;              // heads
  int64_t hidden;             // the model's hidden size d (a multiple of kLanes)
  int64_t width;              // each head's MLP width
  int64_t vocab;              // the model's vocabulary V: the logits' last dimension
  const uint16_t* embedding;  // [V, d] bf16; nullptr: heads that read only the hidden state
  LowbitWeights up;  // [count * width, d] (or [.., 2d] with the embedding): head i's rows i*width..
  const float* up_bias;       // [count * width]
  LowbitWeights down;         // [count * d, width]: head i's rows i*d..
  const float* down_bias;     // [count, d]
  LowbitWeights rows;         // [R, d]: the output rows the heads draft from
  const int64_t* row_tokens;  // [R]: each row's token; nullptr: R == V and row v is token v
};

// Throws InvalidArgument unless the sizes of `w` fit together (RunDraftHeads checks them too).
void CheckDraftHeads(const DraftHeadsWeights& w);

// logits [batch, count, vocab] float32 of the heads at hidden states z [batch, d] (bf16), where
// the target chose tokens next [batch]; products on `threads` threads with `kernel` (matmul.h).
// Throws InvalidArgument for a next token outside 0..vocab-1 or inconsistent sizes.
void RunDraftHeads(const DraftHeadsWeights& w, const uint16_t* z, const int64_t* next,
                   int64_t batch, float* logits, int threads, const std::string& kernel);

}  // namespace dl::lowbit
