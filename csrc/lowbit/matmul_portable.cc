// The portable kernel (any CPU): the AVX2 kernel's arithmetic in plain C++, the reference the
// vector kernels are tested against.
#include "lowbit/kernels.h"

namespace dl::lowbit {
namespace {

// The code of lane j, column 2p + t, in the packed bytes of a block's group.
inline float Code(Codes format, const uint8_t* group, int64_t p, int64_t j, int t) {
  if (format == Codes::kInt4) {
    const uint8_t byte = group[p * 16 + j];
    return static_cast<float>(t == 0 ? byte & 0xF : byte >> 4);
  }
  return static_cast<float>(static_cast<int8_t>(group[p * 32 + 2 * j + t]));
}

void Run(const Problem& pr, int64_t block_begin, int64_t block_end) {
  const int64_t k = pr.w.k, groups = k / kGroup, pair_bytes = PairBytes(pr.w.format);
  for (int64_t block = block_begin; block < block_end; ++block) {
    const uint8_t* codes = pr.w.codes + block * groups * (kGroup / 2) * pair_bytes;
    const uint16_t* scales = pr.w.scales + block * groups * kLanes;
    const int64_t column = block * kLanes;
    const int64_t valid = pr.w.n - column < kLanes ? pr.w.n - column : kLanes;
    for (int64_t row = 0; row < pr.m; ++row) {
      const float* x = pr.xf + row * k;
      float acc[kLanes] = {};
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* group = codes + g * (kGroup / 2) * pair_bytes;
        for (int64_t p = 0; p < kGroup / 2; ++p) {
          for (int64_t j = 0; j < kLanes; ++j) {
            const float scale = FromHalf(scales[g * kLanes + j]);
            const float low = pr.w.format == Codes::kInt4
                                  ? FromHalf(pr.w.mins[(block * groups + g) * kLanes + j])
                                  : 0.0f;
            acc[j] += (Code(pr.w.format, group, p, j, 0) * scale + low) * x[g * kGroup + 2 * p];
            acc[j] += (Code(pr.w.format, group, p, j, 1) * scale + low) * x[g * kGroup + 2 * p + 1];
          }
        }
      }
      uint16_t* out = pr.out + row * pr.w.n + column;
      for (int64_t j = 0; j < valid; ++j) out[j] = ToBf16(acc[j]);
    }
  }
}

}  // namespace

Kernel KernelPortable() { return &Run; }

}  // namespace dl::lowbit
