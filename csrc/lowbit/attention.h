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
// its last bit.) q . k by vdpbf16ps (exact products) on AVX-512 BF16 CPUs beside the AVX-512
// product kernels; plain C++ with the same contract elsewhere (attention_portable.cc). Cost
// O(rows L d); L + 1 floats of scratch a row, and L more per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

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

using AttentionFn = void (*)(const AttentionProblem& problem, int threads);

// The fused step's attention for head size d beside the product kernel `kernel` (matmul.h's
// names, or "auto"): the AVX-512 BF16 one (d 64 or 128) beside the AVX-512 kernels on a CPU with
// AVX-512 BF16, else the portable one (attention_portable.cc: d a multiple of 8); nullptr when
// neither runs. The attention runs on `threads` threads; preconditions heads % kv_heads == 0,
// 1 <= length.
AttentionFn ChooseAttention(int64_t d, const std::string& kernel);

// The two implementations (attention.cc, attention_portable.cc), and the work split they share:
// rows(b, c, r0, r1) for query rows [r0, r1) of kv head c of batch row b (row r: query head
// c * g + r / tokens at token r % tokens), as tasks of the products' thread pool.
bool Avx512AttentionRuns(int64_t d);
void Avx512Attention(const AttentionProblem& problem, int threads);
bool PortableAttentionRuns(int64_t d);
void PortableAttention(const AttentionProblem& problem, int threads);
void ForEachQueryShare(const AttentionProblem& problem, int threads,
                       const std::function<void(int64_t, int64_t, int64_t, int64_t)>& rows);

}  // namespace dl::lowbit
