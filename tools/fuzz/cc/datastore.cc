// libFuzzer harness: bytes -> token records, offsets (valid, or raw one input in eight) and an
// index depth -> dl::TokenDatastore, then queries of fuzzed contexts and settings; every draft
// must hold token ids of the records and be no longer than asked.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "datastore.h"
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  const int depth = data[0] % 24;  // 0 and 1 are refused
  const size_t count = std::min<size_t>(data[1], size - 6);
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < count; ++i)
    tokens.push_back(data[6 + i] == 255 ? -1 : data[6 + i] % 13);  // 255: a refused negative id
  std::vector<int64_t> offsets{0};
  for (int r = 0; r < data[2] % 6; ++r) offsets.push_back(data[3 + r % 3] % (count + 1));
  if (data[5] % 8 != 0) std::sort(offsets.begin() + 1, offsets.end());
  offsets.push_back(static_cast<int64_t>(count));
  dl::fuzz::Guarded([&] {
    const dl::TokenDatastore store(tokens, offsets, depth);
    const uint8_t* rest = data + 6 + count;
    size_t left = size - 6 - count;
    while (left >= 4) {
      const dl::DatastoreQuery query{rest[0] % 6, rest[1] % 6, rest[2] % 9, rest[3] % 4};
      const size_t n = std::min<size_t>(left - 4, rest[0] % 9);
      std::vector<int32_t> context;
      for (size_t i = 0; i < n; ++i) context.push_back(rest[4 + i] % 13);
      dl::fuzz::Guarded([&] {
        const auto draft =
            store.Continuation(context.data(), static_cast<int64_t>(context.size()), query);
        dl::fuzz::Check(static_cast<int>(draft.size()) <= query.length, "draft longer than asked");
        for (int32_t t : draft) dl::fuzz::Check(t >= 0 && t < 13, "draft token not in the records");
      });
      rest += 4 + n;
      left -= 4 + n;
    }
  });
  return 0;
}
