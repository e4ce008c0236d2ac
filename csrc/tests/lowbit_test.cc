// The low-bit matrix product (lowbit/matmul.h) without Python: every kernel this CPU runs agrees
// with the portable one, exact small-integer products come out exact, and a row's bits do not
// depend on the other rows or on the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "errors.h"
#include "lowbit/kernels.h"
#include "lowbit/matmul.h"
#include "lowbit/quantize.h"

namespace dl::lowbit {
namespace {

// Random codes, scales and minima in the packed layout for n outputs and k inputs.
struct Packed {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales, mins;  // float16 bits
  LowbitWeights weights(Codes format, int64_t n, int64_t k) const {
    return {format, codes.data(), scales.data(), format == Codes::kInt4 ? mins.data() : nullptr, n,
            k};
  }
};

uint16_t Half(float value) {
  const _Float16 half = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, 2);
  return bits;
}

Packed Random(Codes format, int64_t n, int64_t k, std::mt19937& rng) {
  const int64_t blocks = (n + kLanes - 1) / kLanes, groups = k / kGroup;
  Packed p;
  p.codes.resize(blocks * groups * (kGroup / 2) * PairBytes(format));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& c : p.codes) c = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  p.scales.resize(blocks * groups * kLanes);
  p.mins.resize(blocks * groups * kLanes);
  for (auto& s : p.scales) s = Half(0.01f + 0.01f * unit(rng));
  for (auto& m : p.mins) m = Half(0.1f * unit(rng));
  return p;
}

std::vector<uint16_t> Activations(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<uint16_t> x(m * k);
  for (auto& v : x) v = ToBf16(normal(rng));
  return x;
}

std::vector<uint16_t> Multiply(const std::vector<uint16_t>& x, int64_t m, const LowbitWeights& w,
                               int threads, const std::string& kernel) {
  std::vector<uint16_t> out(m * w.n);
  LowbitMatmul(x.data(), m, w, out.data(), threads, kernel);
  return out;
}

// The weight of output `out`, input `col`, decoded from the packed layout (matmul.h).
float Weight(const Packed& p, Codes format, int64_t k, int64_t out, int64_t col) {
  const int64_t groups = k / kGroup, block = out / kLanes, j = out % kLanes, g = col / kGroup;
  const int64_t pair = (col % kGroup) / 2, t = col % 2, at = (block * groups + g) * kLanes + j;
  const uint8_t* bytes =
      p.codes.data() + ((block * groups + g) * (kGroup / 2) + pair) * PairBytes(format);
  if (format == Codes::kInt4)
    return FromHalf(p.scales[at]) * static_cast<float>(t ? bytes[j] >> 4 : bytes[j] & 0xF) +
           FromHalf(p.mins[at]);
  return FromHalf(p.scales[at]) * static_cast<float>(static_cast<int8_t>(bytes[2 * j + t]));
}

// How far the integer kernel (quantize.h) may be from the exact product of row `row` and
// output `out`: each activation moves by at most half its group's step max |x| / 127.
double QuantizationBound(const Packed& p, Codes format, const std::vector<uint16_t>& x, int64_t k,
                         int64_t row, int64_t out) {
  double bound = 0.0;
  for (int64_t g = 0; g < k / kGroup; ++g) {
    float largest = 0.0f;
    for (int64_t c = 0; c < kGroup; ++c)
      largest = std::max(largest, std::abs(FromBf16(x[row * k + g * kGroup + c])));
    for (int64_t c = 0; c < kGroup; ++c)
      bound += std::abs(Weight(p, format, k, out, g * kGroup + c)) * largest / 127.0 / 2.0;
  }
  return bound;
}

TEST(Lowbit, EveryKernelAgreesWithThePortableOne) {
  std::mt19937 rng(1);
  for (const Codes format : {Codes::kInt4, Codes::kInt8}) {
    const int64_t n = 37, k = 96, m = 11;
    const Packed p = Random(format, n, k, rng);
    const auto w = p.weights(format, n, k);
    const auto x = Activations(m, k, rng);
    const auto reference = Multiply(x, m, w, 1, "portable");
    for (const std::string& kernel : LowbitKernels()) {
      const auto got = Multiply(x, m, w, 2, kernel);
      for (int64_t i = 0; i < m * n; ++i) {
        const float a = FromBf16(got[i]), b = FromBf16(reference[i]);
        // both rounded to bf16 (2^-8 each) from float32 sums; the integer kernel's activations
        // within its quantization bound
        const double slack = kernel == "avx512-vnni" || kernel == "avx2-int8"
                                 ? QuantizationBound(p, format, x, k, i / n, i % n)
                                 : 0.01 * (1.0 + std::abs(b));
        ASSERT_NEAR(a, b, 2 * 0.0039 * std::abs(b) + 1e-3 + slack) << kernel << " at " << i;
      }
    }
  }
}

TEST(Lowbit, TheAvx2IntegerKernelGivesTheVnniKernelsBits) {
  const auto kernels = LowbitKernels();
  const auto runs = [&](const std::string& name) {
    return std::find(kernels.begin(), kernels.end(), name) != kernels.end();
  };
  if (!runs("avx512-vnni") || !runs("avx2-int8")) GTEST_SKIP() << "this CPU lacks one of them";
  std::mt19937 rng(4);
  for (const Codes format : {Codes::kInt4, Codes::kInt8}) {
    const int64_t n = 45, k = 160, m = 9;  // n: a last block of 13 outputs, half of it empty
    const Packed p = Random(format, n, k, rng);
    const auto w = p.weights(format, n, k);
    const auto x = Activations(m, k, rng);
    ASSERT_EQ(Multiply(x, m, w, 2, "avx2-int8"), Multiply(x, m, w, 2, "avx512-vnni"));
  }
}

// The AMX kernel's tile products in plain C++ (everything of it but the tile instructions) on
// any CPU with the VNNI kernel, and the real tiles where the CPU has AMX: the VNNI kernel's bits
// for row counts across one and two tiles (1..16 rows a tile), a ragged last block, both formats.
TEST(Lowbit, TheAmxKernelGivesTheVnniKernelsBits) {
  const auto kernels = LowbitKernels();
  if (std::find(kernels.begin(), kernels.end(), "avx512-vnni") == kernels.end())
    GTEST_SKIP() << "this CPU lacks AVX-512 VNNI";
  const bool amx = std::find(kernels.begin(), kernels.end(), "amx-int8") != kernels.end();
  std::mt19937 rng(6);
  for (const Codes format : {Codes::kInt4, Codes::kInt8})
    for (const int64_t m : {1, 3, 8, 15, 16, 17, 33}) {
      const int64_t n = 45, k = 160;
      const Packed p = Random(format, n, k, rng);
      const auto w = p.weights(format, n, k);
      const auto x = Activations(m, k, rng);
      const auto vnni = Multiply(x, m, w, 2, "avx512-vnni");
      std::vector<uint16_t> emulated(m * n);
      LowbitMatmulInt8Kernel(x.data(), m, w, emulated.data(), 2, KernelAmxInt8Emulated());
      ASSERT_EQ(emulated, vnni) << "emulated tiles, m=" << m;
      if (amx) ASSERT_EQ(Multiply(x, m, w, 2, "amx-int8"), vnni) << "AMX tiles, m=" << m;
    }
}

TEST(Lowbit, PortableQuantizationGivesTheVectorOnesCodes) {
  std::mt19937 rng(5);
  const int64_t m = 7, k = 256;
  auto x = Activations(m, k, rng);
  for (int64_t i = 0; i < 32; ++i) x[3 * k + i] = 0;  // a group of zeros: scale 0, codes 0
  QuantizedRows vector, portable;
  QuantizeRows(x.data(), m, k, vector);
  QuantizeRowsPortable(x.data(), m, k, portable);
  EXPECT_EQ(vector.codes, portable.codes);
  EXPECT_EQ(vector.scales, portable.scales);
  EXPECT_EQ(vector.scaled_sums, portable.scaled_sums);
  EXPECT_EQ(vector.sums, portable.sums);
  EXPECT_EQ(portable.scales[3 * (k / kGroup)], 0.0f);
}

TEST(Lowbit, ARowsBitsDependOnItselfOnly) {
  std::mt19937 rng(2);
  for (const Codes format : {Codes::kInt4, Codes::kInt8}) {
    const int64_t n = 50, k = 64, m = 13;
    const Packed p = Random(format, n, k, rng);
    const auto w = p.weights(format, n, k);
    const auto x = Activations(m, k, rng);
    for (const std::string& kernel : LowbitKernels()) {
      const auto together = Multiply(x, m, w, 2, kernel);
      for (int64_t row = 0; row < m; ++row) {
        const std::vector<uint16_t> one(x.begin() + row * k, x.begin() + (row + 1) * k);
        const auto alone = Multiply(one, 1, w, 1, kernel);
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(alone[j], together[row * n + j]) << kernel << " row " << row;
      }
    }
  }
}

TEST(Lowbit, FromHalfConvertsEveryFloat16Exactly) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    _Float16 half;
    const auto narrow = static_cast<uint16_t>(bits);
    std::memcpy(&half, &narrow, 2);
    const float expected = static_cast<float>(half), got = FromHalf(narrow);
    if (std::isnan(expected))
      ASSERT_TRUE(std::isnan(got)) << bits;
    else
      ASSERT_EQ(std::memcmp(&expected, &got, 4), 0) << bits << ": " << got << " vs " << expected;
  }
}

TEST(Lowbit, UnknownKernelsAndRaggedInputsAreRefused) {
  std::mt19937 rng(3);
  const Packed p = Random(Codes::kInt4, 16, 32, rng);
  const auto x = Activations(1, 32, rng);
  std::vector<uint16_t> out(16);
  EXPECT_THROW(LowbitMatmul(x.data(), 1, p.weights(Codes::kInt4, 16, 32), out.data(), 1, "avx9000"),
               InvalidArgument);
  EXPECT_THROW(LowbitMatmul(x.data(), 1, p.weights(Codes::kInt4, 16, 30), out.data(), 1),
               InvalidArgument);
  EXPECT_EQ(LowbitKernels().back(), "portable");
}

}  // namespace
}  // namespace dl::lowbit
