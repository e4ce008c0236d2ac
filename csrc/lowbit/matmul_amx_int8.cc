// The AMX kernel (Sapphire Rapids and later): the VNNI kernel's integer products as tile
// products. Why: on a CPU with AMX a step verifying 8-32 tokens is bound by vpdpbusd's rate
// (64 multiply-adds per instruction); one tdpbsud multiplies a 16-row by 32-column tile of int8
// activations with 32 x 16 unsigned codes (8,192 multiply-adds), so the rows of a tree cost
// little more than one row. The codes are decoded as the VNNI kernel decodes them
// (vnni_codes.h: lane j's four bytes are exactly a tile row of B), one group at a time into a
// 512-byte B tile; each group's exact integer sums come back through a C tile and get the VNNI
// kernel's float terms in its order, so its outputs are the VNNI kernel's bit for bit.
//
// Tiles (Intel SDM, "Intel AMX"): A = activations [rows x 32 bytes], B = codes [8 x 64 bytes],
// C = int32 [rows x 16]; tdpbsud computes C[m][n] += sum_t sum_i A[m][4t+i] (signed) x
// B[t][4n+i] (unsigned). Linux gives a process the tiles' state only after
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it, or where one tile product
// run in a child process at first use does not give the emulated product's sums (TilesWork), the
// kernel is not offered.
//
// The tile instructions sit behind a small interface (Tiles below) that a plain C++ version also
// implements (EmulatedTiles), so that tests check everything but the instructions themselves on
// any CPU with AVX-512 VNNI (KernelAmxInt8Emulated); on an AMX CPU the tests compare the real
// kernel with the VNNI one as well.
#include "lowbit/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "lowbit/vnni_codes.h"

#define DL_AMX_INT8 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,amx-tile,amx-int8")))

namespace dl::lowbit {
namespace {

using namespace vnni;  // NOLINT: the VNNI kernel's decoding and float terms

constexpr int kMaxTileRows = 16;
constexpr int kTileRowsB = kGroup / 4;  // 8 rows of B: four activation bytes each per output

// The tile configuration (palette 1): tile 0 = C [rows x 64 B], 1 = A [rows x 32 B], 2 = B
// [8 x 64 B].
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TileConfig ConfigFor(int rows) {
  TileConfig config;
  config.colsb[0] = 64, config.rows[0] = static_cast<uint8_t>(rows);
  config.colsb[1] = kGroup, config.rows[1] = static_cast<uint8_t>(rows);
  config.colsb[2] = 64, config.rows[2] = kTileRowsB;
  return config;
}

// The three operations the kernel asks of the tiles, on real AMX tiles.
struct AmxTiles {
  DL_AMX_INT8 static void Configure(const TileConfig& config) { _tile_loadconfig(&config); }
  // C = A x B for one group: A's rows from `activations` (a row every `stride` bytes), B from
  // `codes` (8 rows of 64 bytes); C stored to `sums` [rows][16].
  DL_AMX_INT8 static void GroupProduct(const int8_t* activations, int64_t stride,
                                       const uint8_t* codes, int32_t* sums) {
    _tile_zero(0);
    _tile_loadd(1, activations, stride);
    _tile_loadd(2, codes, 64);
    _tile_dpbsud(0, 1, 2);
    _tile_stored(0, sums, 64);
  }
  DL_AMX_INT8 static void Release() { _tile_release(); }
};

// The same operations in plain C++ (tests only).
struct EmulatedTiles {
  static thread_local int rows;
  static void Configure(const TileConfig& config) { rows = config.rows[0]; }
  static void GroupProduct(const int8_t* activations, int64_t stride, const uint8_t* codes,
                           int32_t* sums) {
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < kLanes; ++n) {
        int32_t sum = 0;
        for (int t = 0; t < kTileRowsB; ++t)
          for (int i = 0; i < 4; ++i)
            sum += static_cast<int32_t>(activations[m * stride + 4 * t + i]) *
                   static_cast<int32_t>(codes[t * 64 + 4 * n + i]);
        sums[m * kLanes + n] = sum;
      }
  }
  static void Release() {}
};
thread_local int EmulatedTiles::rows = 0;

// Rows [row, row + rows) of one output block, rows <= 16.
template <class Tiles, Codes C>
DL_AMX_INT8 void BlockRows(const Problem& pr, int64_t block, int64_t row, int rows) {
  constexpr int64_t pair_bytes = PairBytes(C);
  const int64_t k = pr.w.k, groups = k / kGroup;
  const uint8_t* codes = pr.w.codes + block * groups * (kGroup / 2) * pair_bytes;
  const QuantizedRows& q = *pr.quantized;
  const Decoder decoder = MakeDecoder<C>();
  alignas(64) uint8_t tile_b[kTileRowsB * 64];
  alignas(64) int32_t sums[kMaxTileRows * kLanes];
  __m512 acc[kMaxTileRows];
  for (int r = 0; r < rows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* bytes = codes + g * (kGroup / 2) * pair_bytes;
    PrefetchAhead(bytes, (kGroup / 2) * pair_bytes);
    for (int c = 0; c < kGroup / 8; ++c) {  // B's rows 2c and 2c + 1: chunk c's two vectors
      __m512i even, odd;
      DecodeChunk<C>(bytes, c, decoder, even, odd);
      _mm512_store_si512(tile_b + 128 * c, even);
      _mm512_store_si512(tile_b + 128 * c + 64, odd);
    }
    Tiles::GroupProduct(q.codes.data() + row * k + g * kGroup, k, tile_b, sums);
    __m512 scale, low;
    GroupTerms<C>(pr, block, g, scale, low);
    for (int r = 0; r < rows; ++r)
      acc[r] = AddGroup(acc[r], _mm512_load_si512(sums + r * kLanes), scale, low, q,
                        (row + r) * groups + g);
  }
  for (int r = 0; r < rows; ++r) StoreRow(pr, block, row + r, acc[r]);
}

template <class Tiles>
DL_AMX_INT8 void Run(const Problem& pr, int64_t block_begin, int64_t block_end) {
  // the configuration is per thread: set here, on the thread that runs these blocks
  int configured = 0;
  for (int64_t row = 0; row < pr.m; row += kMaxTileRows) {
    const int rows = static_cast<int>(pr.m - row < kMaxTileRows ? pr.m - row : kMaxTileRows);
    if (rows != configured) Tiles::Configure(ConfigFor(rows)), configured = rows;
    for (int64_t block = block_begin; block < block_end; ++block) {
      if (pr.w.format == Codes::kInt4)
        BlockRows<Tiles, Codes::kInt4>(pr, block, row, rows);
      else
        BlockRows<Tiles, Codes::kInt8>(pr, block, row, rows);
    }
  }
  Tiles::Release();
}

// CPUID leaf 7: AMX-TILE (EDX bit 24) and AMX-INT8 (bit 25). Read directly: not every compiler's
// __builtin_cpu_supports knows them (clang 14 does not).
bool AmxInt8Runs() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (edx >> 24 & 1u) && (edx >> 25 & 1u);
}

// Asks Linux for the tiles' state (once per process); false where it is refused or absent.
bool TilesGranted() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
}

// One tile product in a child process, checked against the emulated one: the kernel is offered
// only where the tiles really work (the tile instructions of other programs have faulted in
// some VMs whose CPUID lists AMX). The child touches only its stack and leaves by _exit.
bool TilesWork() {
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    alignas(64) int8_t a[kMaxTileRows * kGroup];
    alignas(64) uint8_t b[kTileRowsB * 64];
    alignas(64) int32_t got[kMaxTileRows * kLanes], want[kMaxTileRows * kLanes];
    for (int i = 0; i < kMaxTileRows * kGroup; ++i) a[i] = static_cast<int8_t>(i * 37 % 255 - 127);
    for (int i = 0; i < kTileRowsB * 64; ++i) b[i] = static_cast<uint8_t>(i * 91 % 256);
    const TileConfig config = ConfigFor(kMaxTileRows);
    AmxTiles::Configure(config);
    AmxTiles::GroupProduct(a, kGroup, b, got);
    AmxTiles::Release();
    EmulatedTiles::Configure(config);
    EmulatedTiles::GroupProduct(a, kGroup, b, want);
    bool same = true;
    for (int i = 0; i < kMaxTileRows * kLanes; ++i) same = same && got[i] == want[i];
    _exit(same ? 0 : 1);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

Kernel KernelAmxInt8() {
  const bool ok = vnni::Runs() && AmxInt8Runs() && TilesGranted() && TilesWork();
  return ok ? &Run<AmxTiles> : nullptr;
}

Kernel KernelAmxInt8Emulated() { return vnni::Runs() ? &Run<EmulatedTiles> : nullptr; }

}  // namespace dl::lowbit

#else

namespace dl::lowbit {
Kernel KernelAmxInt8() { return nullptr; }
Kernel KernelAmxInt8Emulated() { return nullptr; }
}  // namespace dl::lowbit

#endif
