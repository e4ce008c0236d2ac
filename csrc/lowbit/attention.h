// Attention of a decoding step's few query rows over a key/value cache, for the fused lean step
// (llama_stack.h):
//   out[b, t, h] = softmax(scale * q[b, t, h] . K[b, h / g, :L] + mask[b, t, :L]) V[b, h / g, :L]
// with g = heads / kv_heads (grouped-query attention), bf16 in and out, float32 inside.
//
// A masked key (mask -inf or bf16's lowest finite value) weighs exactly 0 and is skipped: a
// row's softmax runs over its visible keys alone, in their order, so its bits depend on those
// keys only, not on where masked ones sit between them (a row that sees no key gets zeros).
//
// Why not PyTorch's scaled_dot_product_attention: the fused step runs in one C++ call per step
// on the matrix products' thread pool. And every query row is computed by the same instructions
// whatever the other rows are, like the products: a drafted step's token gets the bits a
// one-token step gives it, even in a token tree, whose other branches sit masked among the
// token's ancestors. (Summing the weights in lanes by key index, as a plain vector loop does,
// broke that: a masked key moved the next visible ones into other lanes, and the sum changed in
// its last bit.) AVX-512 BF16 only (q . k by vdpbf16ps: exact products); the step uses
// PyTorch's attention on other CPUs. Cost O(rows L d); L + 1 floats of scratch a row, and L
// more per thread.
#pragma once

#include <cstdint>

namespace dl::lowbit {

struct AttentionProblem {
  const uint16_t* q;  // bf16 bits; row (b, t, h) at q + (b * tokens + t) * q_row + h * d
  int64_t q_row;
  const uint16_t* keys;  // bf16 bits; slot j of kv head c at keys + b*kv_batch + c*kv_head + j*d
  const uint16_t* values;
  int64_t kv_batch, kv_head;
  const uint16_t* mask;  // additive bf16 bits; (b, t, j) at mask + (b * tokens + t) * mask_row + j
  int64_t mask_row;
  uint16_t* out;  // [batch, tokens, heads, d] bf16 bits, contiguous
  int64_t batch, tokens, heads, kv_heads, d, length;
  float scale;  // multiplies q . k (1 / sqrt(d) usually)
};

// Whether this CPU runs Attention (AVX-512 BF16) for head size d (64 or 128).
bool AttentionRuns(int64_t d);

// The attention on `threads` threads. Preconditions: AttentionRuns(d), heads % kv_heads == 0,
// 1 <= length.
void Attention(const AttentionProblem& problem, int threads);

}  // namespace dl::lowbit
