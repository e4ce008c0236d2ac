#include "lowbit/llama_stack.h"

#include <cmath>
#include <cstring>
#include <string>

#include "errors.h"
#include "lowbit/attention.h"
#include "lowbit/kernels.h"
#include "vector_math.h"

namespace dl::lowbit {

namespace {

inline uint16_t Round(float value) { return ToBf16(value); }

// transformers' LlamaRMSNorm: x / rms(x) in float32, rounded to bf16, times the weight, rounded.
DL_VECTOR_CLONES
void RmsNorm(const uint16_t* x, const uint16_t* weight, int64_t rows, int64_t n, float eps,
             uint16_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = x + r * n;
    float lane[16] = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      for (int l = 0; l < 16; ++l) lane[l] += FromBf16(row[i + l]) * FromBf16(row[i + l]);
    for (; i < n; ++i) lane[0] += FromBf16(row[i]) * FromBf16(row[i]);
    for (int w = 8; w > 0; w /= 2)
      for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
    const float inverse = 1.0f / std::sqrt(lane[0] / static_cast<float>(n) + eps);
    for (i = 0; i < n; ++i) {
      const float normed = FromBf16(Round(FromBf16(row[i]) * inverse));
      out[r * n + i] = Round(FromBf16(weight[i]) * normed);
    }
  }
}

// x * cos + rotate_half(x) * sin on `heads` heads of a row, each product and the sum rounded.
DL_VECTOR_CLONES
void Rotate(uint16_t* x, int64_t heads, int64_t d, const uint16_t* cos, const uint16_t* sin) {
  const int64_t half = d / 2;
  uint16_t rotated[512];
  for (int64_t h = 0; h < heads; ++h) {
    uint16_t* v = x + h * d;
    for (int64_t i = 0; i < d; ++i) {
      const float other = i < half ? -FromBf16(v[i + half]) : FromBf16(v[i - half]);
      const float a = FromBf16(Round(FromBf16(v[i]) * FromBf16(cos[i])));
      const float b = FromBf16(Round(other * FromBf16(sin[i])));
      rotated[i] = Round(a + b);
    }
    std::memcpy(v, rotated, d * sizeof(uint16_t));
  }
}

// silu(gate) * up, each rounded to bf16 (PyTorch's F.silu then the product). silu(g) =
// g / (1 + e^-g) through e = exp(-|g|) <= 1 (branch-free, vectorized).
DL_VECTOR_CLONES
void SiluGate(const uint16_t* gate_up, int64_t rows, int64_t n, uint16_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* gate = gate_up + r * 2 * n;
    const uint16_t* up = gate + n;
    for (int64_t i = 0; i < n; ++i) {
      const float g = FromBf16(gate[i]);
      const float e = ExpNonPositive(g >= 0.0f ? -g : g);
      const float sigmoid = g >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
      out[r * n + i] = Round(FromBf16(Round(g * sigmoid)) * FromBf16(up[i]));
    }
  }
}

DL_VECTOR_CLONES
void AddInPlace(uint16_t* x, const uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Round(FromBf16(x[i]) + FromBf16(y[i]));
}

void Check(bool ok, const std::string& message) {
  if (!ok) throw InvalidArgument(message);
}

}  // namespace

void RunLlamaStack(const LlamaShape& s, const std::vector<LlamaLayer>& layers,
                   const uint16_t* final_norm, LlamaStep& step, int threads,
                   const std::string& kernel) {
  const int64_t M = step.batch * step.tokens, d = s.head_dim;
  const int64_t q_width = s.heads * d, kv_width = s.kv_heads * d,
                qkv_width = q_width + 2 * kv_width;
  const AttentionFn attention = ChooseAttention(d, kernel);  // once a step, not once a layer
  Check(attention != nullptr, "the fused lean step needs a head size that is a multiple of 8");
  Check(s.kv_heads > 0 && s.heads % s.kv_heads == 0, "heads must be a multiple of kv_heads");
  Check(step.keys.size() == layers.size() && step.values.size() == layers.size(),
        "one cache layer per layer");
  Check(step.length >= 0 && step.length + step.tokens <= step.capacity,
        "the step's tokens pass the cache's capacity");
  Check(M > 0, "a step needs at least one token");
  for (const LlamaLayer& layer : layers)
    Check(layer.qkv.n == qkv_width && layer.qkv.k == s.hidden && layer.o.n == s.hidden &&
              layer.o.k == q_width && layer.gate_up.n == 2 * s.intermediate &&
              layer.gate_up.k == s.hidden && layer.down.n == s.hidden &&
              layer.down.k == s.intermediate,
          "a layer's weights do not have the model's shapes");
  std::vector<uint16_t> h(M * s.hidden), qkv(M * qkv_width), attn(M * q_width),
      gate_up(M * 2 * s.intermediate), gated(M * s.intermediate), y(M * s.hidden);
  const int64_t total = step.length + step.tokens;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LlamaLayer& layer = layers[i];
    RmsNorm(step.x, layer.attn_norm, M, s.hidden, s.eps, h.data());
    LowbitMatmul(h.data(), M, layer.qkv, qkv.data(), threads, kernel);
    for (int64_t r = 0; r < M; ++r) {
      uint16_t* row = qkv.data() + r * qkv_width;
      Rotate(row, s.heads + s.kv_heads, d, step.cos + r * d, step.sin + r * d);
      const int64_t b = r / step.tokens, slot = step.length + r % step.tokens;
      for (int64_t c = 0; c < s.kv_heads; ++c) {
        const int64_t at = ((b * s.kv_heads + c) * step.capacity + slot) * d;
        std::memcpy(step.keys[i] + at, row + q_width + c * d, d * sizeof(uint16_t));
        std::memcpy(step.values[i] + at, row + q_width + kv_width + c * d, d * sizeof(uint16_t));
      }
    }
    const AttentionProblem problem{qkv.data(),
                                   qkv_width,
                                   step.keys[i],
                                   step.values[i],
                                   s.kv_heads * step.capacity * d,
                                   step.capacity * d,
                                   step.mask,
                                   total,
                                   attn.data(),
                                   step.batch,
                                   step.tokens,
                                   s.heads,
                                   s.kv_heads,
                                   d,
                                   total,
                                   1.0f / std::sqrt(static_cast<float>(d))};
    attention(problem, threads);
    LowbitMatmul(attn.data(), M, layer.o, y.data(), threads, kernel);
    AddInPlace(step.x, y.data(), M * s.hidden);
    RmsNorm(step.x, layer.mlp_norm, M, s.hidden, s.eps, h.data());
    LowbitMatmul(h.data(), M, layer.gate_up, gate_up.data(), threads, kernel);
    SiluGate(gate_up.data(), M, s.intermediate, gated.data());
    LowbitMatmul(gated.data(), M, layer.down, y.data(), threads, kernel);
    AddInPlace(step.x, y.data(), M * s.hidden);
  }
  // here rather than in PyTorch: an op right after the step reads caches the step has flushed
  RmsNorm(step.x, final_norm, M, s.hidden, s.eps, step.normed);
}

}  // namespace dl::lowbit
