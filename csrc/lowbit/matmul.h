// Weight-only low-bit matrix product for the lean target step: out = x @ W^T, for a few rows of
// bf16 activations x [m, k] against quantized weights W [n, k] in groups of 32 input columns,
// out [m, n] in bf16. Two code formats, those of the default model's GGUF:
//   kInt4 (Q4_1): w = min + scale * q, q in 0..15, a scale and a minimum per group;
//   kInt8 (Q8_0): w = scale * q, q in -128..127, a scale per group.
//
// Why not PyTorch's kernels: their cost grows with m (8 rows cost 3x one) while a decoding step
// verifies up to ~16 draft tokens at once; these decode each weight tile once and reuse it for
// every row, so a step's cost grows slowly in m until compute binds.
//
// Every row is computed by the same instruction sequence whatever m and the thread count are:
// a row's result does not depend on the other rows (drafted decoding then equals one-token
// decoding bit for bit). Kernels: AVX-512 VNNI (vpdpbusd: activations quantized to int8 per
// group of 32 as llama.cpp's Q8_0, exact integer sums, float32 per group; quantize.h), AVX-512
// BF16 (vdpbf16ps: exact products of bf16 activations and codes, float32 sums), AVX2 with int8
// activations (vpmaddubsw: the VNNI kernel's results, bit for bit), AVX2+FMA (float32), and
// portable C++; "auto" takes the first the CPU runs. Cost O(m n k); weights read
// once per call.
//
// Packed layout (LowbitWeights): outputs in blocks of 16 (n padded up to a multiple of 16); for
// each block b, group g and column pair p (16 per group) the codes of columns 32g + 2p and
// 32g + 2p + 1 for the block's 16 outputs j:
//   kInt4: 16 bytes, byte j = q[16b + j][32g + 2p] | q[16b + j][32g + 2p + 1] << 4;
//   kInt8: 32 bytes, byte 2j + t = q[16b + j][32g + 2p + t] (two's complement).
// Scales and mins (kInt4 only) are float16 [blocks][groups][16], as the GGUF's Q4_1 and Q8_0
// blocks keep them (a one-token step reads every weight once: bytes are its cost).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dl::lowbit {

constexpr int64_t kGroup = 32;  // input columns per scale (Q4_1's and Q8_0's block)
constexpr int64_t kLanes = 16;  // outputs per block

enum class Codes { kInt4, kInt8 };

// Packed bytes of one column pair of a block (16 outputs).
constexpr int64_t PairBytes(Codes codes) { return codes == Codes::kInt4 ? 16 : 32; }

struct LowbitWeights {
  Codes format;
  const uint8_t* codes;    // [blocks][groups][16 pairs][PairBytes]
  const uint16_t* scales;  // [blocks][groups][16] float16 bits
  const uint16_t* mins;    // [blocks][groups][16] float16 bits for kInt4; unused for kInt8
  int64_t n;               // outputs (rows of W)
  int64_t k;               // inputs, a multiple of kGroup
};

// Kernels in order of preference; LowbitKernels() lists those this CPU runs.
std::vector<std::string> LowbitKernels();

// out [m, n] (bf16 bits, row-major) = x [m, k] (bf16 bits, row-major) @ W^T on `threads`
// threads (<= 0: the hardware's). `kernel` is one of LowbitKernels() or "auto" (the first).
// Throws InvalidArgument on an unknown kernel or k not a positive multiple of kGroup.
void LowbitMatmul(const uint16_t* x, int64_t m, const LowbitWeights& w, uint16_t* out, int threads,
                  const std::string& kernel = "auto");

}  // namespace dl::lowbit
