// libFuzzer harness: the n-gram trainer's input. Text (whole lines, in one to three pieces, as
// ngram/build.py hands them over) or token-id sentences -> NgramCounter, then Katz estimation,
// relative-entropy pruning, the model as an NgramLM (to_ngram.h) and its query paths.
#include <fuzzer/FuzzedDataProvider.h>

#include <string>

#include "harness.h"
#include "lmbuild/counts.h"
#include "lmbuild/katz.h"
#include "lmbuild/prune.h"
#include "lmbuild/to_ngram.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int order = in.ConsumeIntegralInRange(0, 9);
  const bool tokens = in.ConsumeIntegralInRange(0, 3) == 0;
  const int min_count = in.ConsumeIntegralInRange(1, 3);
  const int prune = in.ConsumeIntegralInRange(0, 3);
  const double threshold = in.ConsumeFloatingPointInRange(0.0, 1.0);
  dl::fuzz::Guarded([&] {
    dl::lmbuild::NgramCounter counter(order);  // InvalidArgument outside 1..8
    if (tokens) {
      while (in.remaining_bytes() > 0) {
        std::vector<int32_t> sentence;
        for (int i = in.ConsumeIntegralInRange(0, 12); i > 0; --i)
          sentence.push_back(in.ConsumeIntegralInRange<int32_t>(-1, 40));
        counter.AddTokens(sentence.data(), sentence.size());
      }
    } else {
      const std::string text = in.ConsumeRemainingBytesAsString();
      size_t begin = 0;
      for (int piece = 0; piece < 3 && begin < text.size(); ++piece) {  // cut after a newline
        size_t end = piece == 2 ? text.size() : text.find('\n', begin + (text.size() - begin) / 2);
        end = end == std::string::npos ? text.size() : end + 1;
        counter.AddText(std::string_view(text).substr(begin, end - begin));
        begin = end;
      }
    }
    if (counter.sentences() == 0) return;
    dl::lmbuild::KatzOptions katz;
    for (int n = 1; n <= order; ++n) katz.min_counts.push_back(n == 1 ? 1 : min_count);
    dl::lmbuild::KatzStats stats;
    dl::lmbuild::BackoffModel model = dl::lmbuild::EstimateKatz(&counter, katz, &stats);
    if (prune == 1) {
      dl::lmbuild::PruneOptions options;
      options.threshold = threshold;
      dl::lmbuild::PruneRelativeEntropy(&model, options);
    } else if (prune == 2) {
      dl::lmbuild::PruneOptions options;
      options.target = static_cast<int64_t>(model.NumNgrams(1)) + 3;
      dl::lmbuild::PruneRelativeEntropy(&model, options);
    }
    dl::fuzz::Exercise(dl::lmbuild::ToNgramLM(model, {}));
  });
  return 0;
}
