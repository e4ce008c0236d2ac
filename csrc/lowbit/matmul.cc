#include "lowbit/matmul.h"

#include <algorithm>
#include <thread>

#include "errors.h"
#include "lowbit/kernels.h"
#include "lowbit/spin_pool.h"

namespace dl::lowbit {

namespace {

// Tasks per thread of a product: enough that free threads take over a descheduled one's share.
constexpr int kTasksPerThread = 4;

// What a kernel multiplies the codes with: the bf16 activations as they are, in float32
// (Problem::xf) or quantized to int8 (Problem::quantized).
enum class Reads { kBf16, kFloat, kInt8 };

struct NamedKernel {
  const char* name;
  Kernel kernel;
  Reads reads;
};

const std::vector<NamedKernel>& Available() {
  static const std::vector<NamedKernel> kernels = [] {
    std::vector<NamedKernel> found;
    if (Kernel k = KernelAvx512Vnni()) found.push_back({"avx512-vnni", k, Reads::kInt8});
    if (Kernel k = KernelAmxInt8()) found.push_back({"amx-int8", k, Reads::kInt8});
    if (Kernel k = KernelAvx512Bf16()) found.push_back({"avx512-bf16", k, Reads::kBf16});
    if (Kernel k = KernelAvx2Int8()) found.push_back({"avx2-int8", k, Reads::kInt8});
    if (Kernel k = KernelAvx2()) found.push_back({"avx2", k, Reads::kFloat});
    found.push_back({"portable", KernelPortable(), Reads::kFloat});
    return found;
  }();
  return kernels;
}

const NamedKernel& Find(const std::string& name) {
  const auto& kernels = Available();
  if (name == "auto") return kernels.front();
  for (const auto& k : kernels)
    if (name == k.name) return k;
  std::string names;
  for (const auto& k : kernels) names += std::string(names.empty() ? "" : ", ") + k.name;
  throw InvalidArgument("low-bit kernel '" + name +
                        "' is not available on this CPU (available: auto, " + names + ")");
}

}  // namespace

std::vector<std::string> LowbitKernels() {
  std::vector<std::string> names;
  for (const auto& k : Available()) names.push_back(k.name);
  return names;
}

namespace {

void MatmulOn(const uint16_t* x, int64_t m, const LowbitWeights& w, uint16_t* out, int threads,
              const NamedKernel& chosen) {
  if (w.k <= 0 || w.k % kGroup != 0)
    throw InvalidArgument("low-bit weights need k a positive multiple of " +
                          std::to_string(kGroup) + ", got " + std::to_string(w.k));
  if (m <= 0 || w.n <= 0) return;
  const int64_t groups = w.k / kGroup;
  // Per call, a few KB: every row in float32 and its groups' sums (kInt4's minima).
  // Kept per calling thread: a step makes ~120 calls, each would allocate otherwise.
  thread_local std::vector<float> xf, sums;
  thread_local QuantizedRows quantized;
  xf.resize(chosen.reads == Reads::kFloat ? static_cast<size_t>(m * w.k) : 0);
  // the bf16 kernel folds kInt4's minima in through each group's activation sum
  const bool minima = w.format == Codes::kInt4 && chosen.reads == Reads::kBf16;
  sums.resize(minima ? static_cast<size_t>(m * groups) : 0);
  if (chosen.reads == Reads::kInt8) QuantizeRows(x, m, w.k, quantized);
  for (int64_t i = 0; i < static_cast<int64_t>(xf.size()); ++i) xf[i] = FromBf16(x[i]);
  for (int64_t row = 0; row < (sums.empty() ? 0 : m); ++row)
    for (int64_t g = 0; g < groups; ++g) {
      float sum = 0.0f;
      for (int64_t c = 0; c < kGroup; ++c) sum += FromBf16(x[row * w.k + g * kGroup + c]);
      sums[row * groups + g] = sum;
    }
  const Problem problem{x, xf.data(), sums.data(), &quantized, w, m, out};
  const int64_t blocks = (w.n + kLanes - 1) / kLanes;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Contiguous runs of blocks, a few per thread, claimed by whichever thread is free: which
  // thread computes a block never changes its result.
  const int tasks = static_cast<int>(std::min<int64_t>(int64_t{kTasksPerThread} * threads, blocks));
  SpinPool::Instance().Run(tasks, threads, [&](int t) {
    chosen.kernel(problem, blocks * t / tasks, blocks * (t + 1) / tasks);
  });
}

}  // namespace

void LowbitMatmul(const uint16_t* x, int64_t m, const LowbitWeights& w, uint16_t* out, int threads,
                  const std::string& kernel) {
  MatmulOn(x, m, w, out, threads, Find(kernel));
}

void LowbitMatmulInt8Kernel(const uint16_t* x, int64_t m, const LowbitWeights& w, uint16_t* out,
                            int threads, Kernel kernel) {
  if (kernel == nullptr) throw InvalidArgument("LowbitMatmulInt8Kernel: no kernel");
  MatmulOn(x, m, w, out, threads, NamedKernel{"given", kernel, Reads::kInt8});
}

}  // namespace dl::lowbit
