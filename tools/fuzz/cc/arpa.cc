// libFuzzer harness: ARPA text -> the C++ ARPA reader (in memory, or streamed in small blocks
// for every third input), then every query path of the model (harness.h).
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  dl::fuzz::Guarded([&] {
    std::shared_ptr<dl::NgramLM> model;
    if (size % 3 == 0) {
      dl::fuzz::ChunkSource source(text, 1 + size % 61);
      model = dl::LoadNgramStream(&source, "fuzz.arpa");
    } else {
      model = dl::LoadNgramText(text, "fuzz.arpa");
    }
    dl::fuzz::Exercise(std::move(model));
  });
  return 0;
}
