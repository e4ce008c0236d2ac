#include "lmbuild/arpa_writer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>

#include "errors.h"

namespace dl::lmbuild {
namespace {

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};

}  // namespace

void WriteArpa(const BackoffModel& model, const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& metadata, int digits) {
  if (digits < 1 || digits > 17)
    throw InvalidArgument(Message("ARPA digits must be in 1..17, got ", digits));
  std::vector<char> buffer(1 << 22);  // declared before the file: outlives it
  std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) throw FileError(errno, Message("cannot write ", path, ": ", std::strerror(errno)));
  std::setvbuf(file.get(), buffer.data(), _IOFBF, buffer.size());
  FILE* out = file.get();
  const double to_log10 = 1.0 / std::log(10.0);

  for (const auto& [key, value] : metadata)
    std::fprintf(out, "# %s: %s\n", key.c_str(), value.c_str());
  std::fprintf(out, "\n\\data\\\n");
  for (int k = 1; k <= model.order; ++k) {
    std::fprintf(out, "ngram %d=%llu\n", k, static_cast<unsigned long long>(model.NumNgrams(k)));
  }

  // rank[i]: position of n-gram i in the output order of its level.
  std::vector<uint32_t> prev_rank, rank;
  std::vector<uint32_t> by_rank;
  std::string line;
  std::vector<const std::string*> words(model.order);
  for (int k = 1; k <= model.order; ++k) {
    const ModelLevel& level = model.levels[k - 1];
    std::fprintf(out, "\n\\%d-grams:\n", k);
    by_rank.resize(level.size());
    std::iota(by_rank.begin(), by_rank.end(), 0u);
    if (k >= 2) {
      std::sort(by_rank.begin(), by_rank.end(), [&](uint32_t a, uint32_t b) {
        const uint32_t ra = prev_rank[level.prefix[a]], rb = prev_rank[level.prefix[b]];
        return ra != rb ? ra < rb : level.word[a] < level.word[b];
      });
    }
    rank.assign(level.size(), 0);
    for (uint32_t r = 0; r < by_rank.size(); ++r) rank[by_rank[r]] = r;
    for (uint32_t i : by_rank) {
      // Words: walk the prefix chain.
      uint32_t index = i;
      for (int m = k; m >= 2; --m) {
        const ModelLevel& l = model.levels[m - 1];
        words[m - 1] = &model.words[l.word[index]];
        index = l.prefix[index];
      }
      words[0] = &model.words[index];
      char number[32];
      const double p = level.prob[i];
      if (k == 1 && i == kBos) {
        std::snprintf(number, sizeof number, "-99");
      } else {
        std::snprintf(number, sizeof number, "%.*g", digits, std::log(p) * to_log10);
      }
      line.assign(number);
      for (int m = 0; m < k; ++m) {
        line.push_back(m == 0 ? '\t' : ' ');
        line.append(*words[m]);
      }
      const double bo = level.backoff_ln.empty() ? kNaN : level.backoff_ln[i];
      if (!std::isnan(bo)) {
        std::snprintf(number, sizeof number, "\t%.*g", digits, bo * to_log10);
        line.append(number);
      }
      line.push_back('\n');
      std::fwrite(line.data(), 1, line.size(), out);
    }
    prev_rank.swap(rank);
  }
  std::fprintf(out, "\n\\end\\\n");
  if (std::fflush(out) != 0 || std::ferror(out)) {
    throw FileError(errno, Message("error writing ", path, ": ", std::strerror(errno)));
  }
  FILE* raw = file.release();
  if (std::fclose(raw) != 0)
    throw FileError(errno, Message("error closing ", path, ": ", std::strerror(errno)));
}

}  // namespace dl::lmbuild
