// Activations quantized for the integer kernels (matmul_avx512_vnni.cc, matmul_avx2_int8.cc), in
// the scheme of llama.cpp's Q8_0: per row and group of 32 columns, a = max |x| / 127 and q =
// round(x / a) in -127..127 (ties to even; a = 0 and q = 0 for a group of zeros). A row's codes
// depend on that row only, so integer kernels keep rows independent of each other.
#pragma once

#include <cstdint>
#include <vector>

namespace dl::lowbit {

struct QuantizedRows {
  // [m, k]: each run of 8 columns stored as columns 0, 2, 4, 6, 1, 3, 5, 7 (the kernel's lanes)
  std::vector<int8_t> codes;
  std::vector<float> scales;       // [m, groups]: a
  std::vector<float> scaled_sums;  // [m, groups]: a * sum of the group's q
  std::vector<int32_t> sums;       // [m, groups]: sum of the group's q
};

// x [m, k] bf16 bits, k a multiple of 32: with AVX-512 (F, BW) instructions where the CPU has
// them, else QuantizeRowsPortable's scalar code, which gives the same codes, scales and sums
// (for finite activations).
void QuantizeRows(const uint16_t* x, int64_t m, int64_t k, QuantizedRows& out);
void QuantizeRowsPortable(const uint16_t* x, int64_t m, int64_t k, QuantizedRows& out);

}  // namespace dl::lowbit
