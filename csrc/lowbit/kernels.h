// The kernels behind LowbitMatmul (matmul.h), one per instruction set. Each computes the output
// blocks [block_begin, block_end) of every row; the caller splits blocks over threads.
#pragma once

#include <cstdint>
#include <type_traits>

#include "lowbit/matmul.h"
#include "lowbit/quantize.h"

namespace dl::lowbit {

struct Problem {
  const uint16_t* x;  // [m, k] bf16 bits
  const float* xf;    // [m, k] x in float32 (for the kernels that multiply in float32)
  const float* sums;  // [m, groups]: each row's group sums of x (the bf16 kernel's kInt4 minima)
  const QuantizedRows* quantized;  // x as int8 (for the kernels that multiply integers)
  LowbitWeights w;
  int64_t m;
  uint16_t* out;  // [m, n] bf16 bits
};

using Kernel = void (*)(const Problem& problem, int64_t block_begin, int64_t block_end);

// LowbitMatmul on a kernel given by pointer that reads int8 activations (tests: a kernel that
// LowbitKernels does not offer, as KernelAmxInt8Emulated).
void LowbitMatmulInt8Kernel(const uint16_t* x, int64_t m, const LowbitWeights& w, uint16_t* out,
                            int threads, Kernel kernel);

// nullptr when the CPU (or the compiler) lacks the instructions.
Kernel KernelAvx512Vnni();
// AMX tiles for the VNNI kernel's integer products (offered by name only: not yet measured on an
// AMX CPU, so "auto" keeps the VNNI kernel).
Kernel KernelAmxInt8();
// The AMX kernel with its tile products in plain C++ (tests, on any CPU the VNNI kernel runs on).
Kernel KernelAmxInt8Emulated();
Kernel KernelAvx512Bf16();
Kernel KernelAvx2Int8();
Kernel KernelAvx2();
Kernel KernelPortable();

// fn(std::integral_constant<int, R>{}) with R = rows (1 <= rows <= Max): a kernel's row count
// as a compile-time constant, so that each count keeps its sums in registers.
template <int Max, typename Fn>
inline void WithRowCount(int64_t rows, Fn&& fn) {
  if constexpr (Max > 1) {
    if (rows < Max) return WithRowCount<Max - 1>(rows, fn);
  }
  fn(std::integral_constant<int, Max>{});
}

// How far ahead of the tile being multiplied a kernel asks for the weights' codes. A one-token
// step streams ~96 MB of weights; with a few rows a tile's arithmetic is long enough that the
// hardware prefetcher alone leaves the next tile late (bench/RESULTS.md, the target step: 3- and
// 8-row products over streamed weights ~10% faster on Zen 4 with it, one row unchanged).
constexpr int64_t kPrefetchAhead = 2048;

// Prefetches the codes kPrefetchAhead bytes after one group's `bytes` bytes at `codes`.
inline void PrefetchAhead(const uint8_t* codes, int64_t bytes) {
  for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(codes + kPrefetchAhead + at, 0, 3);
}

// Four int8 activation codes as one int32, to broadcast to every lane of an integer product.
inline int32_t Broadcast4(const int8_t* bytes) {
  int32_t four;
  __builtin_memcpy(&four, bytes, 4);
  return four;
}

// float32 -> bf16 bits, rounding to nearest even (PyTorch's rounding); NaN stays NaN.
inline uint16_t ToBf16(float value) {
  uint32_t bits;
  __builtin_memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// float16 bits -> float32, exactly (the portable kernel's; vector kernels use vcvtph2ps).
inline float FromHalf(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // zero or subnormal
  } else if (exponent == 31) {
    magnitude = mantissa ? __builtin_nanf("") : __builtin_inff();
  } else {
    const uint32_t wide = ((exponent + 112u) << 23) | (mantissa << 13);
    __builtin_memcpy(&magnitude, &wide, 4);
  }
  uint32_t out;
  __builtin_memcpy(&out, &magnitude, 4);
  out |= sign;
  float value;
  __builtin_memcpy(&value, &out, 4);
  return value;
}

inline float FromBf16(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  __builtin_memcpy(&value, &wide, 4);
  return value;
}

}  // namespace dl::lowbit
