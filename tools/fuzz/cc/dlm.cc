// libFuzzer harness: a binary .dlm file -> LoadBinary (mapped, or read into memory for odd
// sizes), then every query path of the model (harness.h). The checksum is re-sealed after
// mutation (it detects corruption, it is no security boundary), so mutations reach the
// validation behind it.
#include <unistd.h>

#include <fstream>
#include <string>

#include "harness.h"
#include "ngram/binary.h"

namespace {

// The header's length (uint32 at byte 20) and checksum (uint64 at byte 32), as binary.cc lays
// them out; the checksum covers the header with the field zeroed, then the rest.
std::string Resealed(const uint8_t* data, size_t size) {
  std::string file(reinterpret_cast<const char*>(data), size);
  if (size < 40) return file;
  uint32_t header_bytes = 0;
  std::memcpy(&header_bytes, data + 20, 4);
  if (header_bytes < 40 || header_bytes > size) return file;
  std::memset(&file[32], 0, 8);
  const uint64_t seed = dl::BinaryChecksum(file.data(), header_bytes, 0);
  const uint64_t checksum =
      dl::BinaryChecksum(file.data() + header_bytes, size - header_bytes, seed);
  std::memcpy(&file[32], &checksum, 8);
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/dlfuzz-" + std::to_string(getpid()) + ".dlm";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::string file = Resealed(data, size);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }
  dl::fuzz::Guarded([&] { dl::fuzz::Exercise(dl::LoadBinary(path, size % 2 == 1)); });
  return 0;
}
