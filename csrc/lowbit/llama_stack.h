// The decoder layers of a Llama-architecture model as one C++ call per decoding step: the fused
// lean step. For each layer: RMS norm, the fused query/key/value product, rotary embedding, the
// new keys and values written into the cache, attention (attention.h), the output product and
// residual, RMS norm, the fused gate/up product, SiLU gate, the down product and residual.
//
// Why: the lean step's Python loop spends as long in ~15 small PyTorch ops a layer (dispatch,
// allocation, one thread) as in its matrix products; here they cost microseconds. Quantized
// weights (matmul.h, int4 codes) and bf16 activations; rounding to bf16 where transformers'
// eager forward rounds (after the norm, the rotary products and sum, the SiLU, the gate product,
// each residual sum). Every row is computed independently of the others, as in the kernels it
// calls, on any x86 CPU (its attention: attention.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/matmul.h"

namespace dl::lowbit {

struct LlamaShape {
  int64_t hidden, heads, kv_heads, head_dim, intermediate;
  float eps;  // RMS norm's epsilon
};

struct LlamaLayer {
  LowbitWeights qkv, o, gate_up, down;  // gate_up: the gate's rows, then the up's
  const uint16_t* attn_norm;            // [hidden] bf16
  const uint16_t* mlp_norm;
};

struct LlamaStep {
  uint16_t* x;  // [batch * tokens, hidden] bf16: the embeddings in, the last layer's output out
  int64_t batch, tokens;
  const uint16_t* cos;  // [batch * tokens, head_dim] bf16: each row's rotary tables
  const uint16_t* sin;
  std::vector<uint16_t*> keys, values;  // per layer, [batch, kv_heads, capacity, head_dim] bf16
  int64_t capacity, length;             // cache slots; slots in use before this step
  const uint16_t* mask;                 // additive [batch * tokens, length + tokens] bf16
  uint16_t*
      normed;  // [batch * tokens, hidden] bf16 out: the last layer's output after the final norm
};

// Runs every layer over `step` on `threads` threads with the product kernel `kernel` (matmul.h),
// then the model's final norm (`final_norm`, [hidden] bf16) into step.normed; writes the step's
// keys and values at slots [length, length + tokens) of each layer's cache. Throws
// InvalidArgument on inconsistent sizes or an unknown kernel.
void RunLlamaStack(const LlamaShape& shape, const std::vector<LlamaLayer>& layers,
                   const uint16_t* final_norm, LlamaStep& step, int threads,
                   const std::string& kernel);

}  // namespace dl::lowbit
