#include "ngram/arpa.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "errors.h"
#include "ngram/builder.h"
#include "ngram/line_reader.h"

namespace dl {
namespace {

constexpr double kLn10 = 2.302585092994045684;
// Entries the builder allocates up front for each order of a stream (see Run).
constexpr uint64_t kStreamPresize = uint64_t{1} << 18;

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool IsBlank(std::string_view line) { return Trim(line).empty(); }

// Splits on spaces/tabs into at most `max` fields; returns the number found (max + 1 if more).
size_t Split(std::string_view line, std::string_view* fields, size_t max) {
  size_t n = 0, i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (n == max) return max + 1;
    fields[n++] = line.substr(i, j - i);
    i = j;
  }
  return n;
}

float ParseLog10(std::string_view field, const LineReader& reader, const char* what) {
  double value = 0;
  const char* first = field.data();
  const char* last = first + field.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || std::isnan(value))
    reader.Fail("cannot parse ", what, " '", field, "' as a number");
  return static_cast<float>(value * kLn10);
}

uint64_t ParseCount(std::string_view s, const LineReader& reader) {
  uint64_t value = 0;
  s = Trim(s);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    reader.Fail("cannot parse n-gram count '", s, "'");
  return value;
}

// Parses the text section by section and hands every n-gram to an NgramBuilder.
class ArpaReader {
 public:
  ArpaReader(ByteSource* source, const std::string& name)
      : reader_(source, name, kMaxArpaLineBytes), bytes_(source->size()) {}

  std::unique_ptr<NgramLM> Run() {
    ReadHeader();
    // A stream's size is unknown, so its header's counts are unchecked until the sections end:
    // the tables start at most kStreamPresize entries large and grow with the n-grams read.
    const uint64_t presize = bytes_ ? std::numeric_limits<uint64_t>::max() : kStreamPresize;
    NgramBuilder builder(counts_, std::move(metadata_), reader_.name(), presize);
    for (int n = 1; n <= builder.order(); ++n) ReadSection(n, &builder);
    std::string_view line;
    if (!reader_.NextNonBlank(&line))
      reader_.Fail("missing \\end\\ after the ", builder.order(), "-grams");
    if (Trim(line) != "\\end\\") reader_.Fail("expected \\end\\, found '", Trim(line), "'");
    return builder.Finish("arpa");
  }

 private:
  // Metadata lines, \data\ and the counts.
  void ReadHeader() {
    std::string_view line;
    bool any = false;
    while (reader_.Next(&line)) {
      any = any || !IsBlank(line);
      const std::string_view t = Trim(line);
      if (t == "\\data\\") break;
      if (!t.empty() && t[0] == '#') {
        const size_t colon = t.find(':');
        if (colon != std::string_view::npos) {
          const std::string_view key = Trim(t.substr(1, colon - 1));
          if (!key.empty()) metadata_[std::string(key)] = std::string(Trim(t.substr(colon + 1)));
        }
      }
    }
    if (!any) reader_.Fail("empty ARPA file");
    if (Trim(line) != "\\data\\") reader_.Fail("no \\data\\ section (not an ARPA file?)");
    while (reader_.Next(&line) && !IsBlank(line)) {
      const std::string_view t = Trim(line);
      if (t.substr(0, 6) != "ngram ") reader_.Fail("expected 'ngram N=COUNT', found '", t, "'");
      const size_t eq = t.find('=');
      if (eq == std::string_view::npos) reader_.Fail("expected 'ngram N=COUNT', found '", t, "'");
      const uint64_t n = ParseCount(t.substr(6, eq - 6), reader_);
      const uint64_t count = ParseCount(t.substr(eq + 1), reader_);
      if (n != counts_.size() + 1)
        reader_.Fail("expected 'ngram ", counts_.size() + 1, "=...', found order ", n);
      if (n > static_cast<uint64_t>(kMaxOrder))
        reader_.Fail("order ", n, " is not supported (at most ", kMaxOrder, ")");
      counts_.push_back(count);
    }
    if (counts_.empty()) reader_.Fail("\\data\\ section lists no 'ngram N=COUNT' lines");
    if (counts_[0] == 0) reader_.Fail("the model has no 1-grams");
    CheckCountsFit();
  }

  // The tables are sized from the header before any entry is read: a header that claims more
  // n-grams than the text can hold (an n-gram line takes at least 2n + 2 bytes: a digit, a tab,
  // n one-byte words with spaces, a newline) would make a few bytes allocate gigabytes.
  void CheckCountsFit() const {
    if (!bytes_) return;
    double needed = 0;
    for (size_t n = 1; n <= counts_.size(); ++n)
      needed += static_cast<double>(counts_[n - 1]) * (2.0 * n + 2);
    if (needed > static_cast<double>(*bytes_))
      reader_.Fail("the header claims more n-grams than the file's ", *bytes_, " bytes can hold");
  }

  // The \n-grams: section: header line, entries, blank line (or end of file).
  void ReadSection(int n, NgramBuilder* builder) {
    const int order = builder->order();
    std::string_view line;
    if (!reader_.NextNonBlank(&line))
      reader_.Fail("missing \\", n, "-grams: section (end of file)");
    const std::string header = Message("\\", n, "-grams:");
    if (Trim(line) != header) reader_.Fail("expected '", header, "', found '", Trim(line), "'");
    const uint64_t expected = counts_[n - 1];
    uint64_t seen = 0;
    std::string_view fields[kMaxOrder + 3];
    while (reader_.Next(&line)) {
      if (IsBlank(line)) break;
      if (line[0] == '\\') {
        reader_.Fail("section \\", n, "-grams: has ", seen, " entries but the header says ",
                     expected, " (missing blank line?)");
      }
      const size_t found = Split(line, fields, n + 2);
      const bool has_backoff = found == static_cast<size_t>(n + 2);
      if (found < static_cast<size_t>(n + 1) || found > static_cast<size_t>(n + 2) ||
          (has_backoff && n == order)) {
        reader_.Fail("a ", n, "-gram line needs ", n + 1,
                     n < order ? " or " + std::to_string(n + 2) : std::string(),
                     " fields (log10 prob, ", n, " words", n < order ? ", backoff" : "",
                     "), found ",
                     found > static_cast<size_t>(n + 2) ? "more" : std::to_string(found));
      }
      const float prob = ParseLog10(fields[0], reader_, "probability");
      // -inf (an impossible n-gram) is allowed; a positive log10 probability is not a probability.
      if (prob > 0)
        reader_.Fail("log10 probability '", fields[0], "' is positive (probabilities are <= 1)");
      const float backoff = has_backoff ? ParseLog10(fields[n + 1], reader_, "backoff") : 0.0f;
      if (!std::isfinite(backoff)) reader_.Fail("backoff '", fields[n + 1], "' is not finite");
      if (++seen > expected)
        reader_.Fail("section \\", n, "-grams: has more entries than the header's ", expected);
      if (n == 1) {
        builder->AddUnigram(fields[1], prob, backoff, reader_.line_no());
      } else {
        builder->AddNgram(n, fields + 1, prob, backoff, reader_.line_no());
      }
    }
    builder->EndOrder(n);
    if (seen != expected)
      reader_.Fail("section \\", n, "-grams: has ", seen, " entries but the header says ",
                   expected);
  }

  LineReader reader_;
  std::optional<uint64_t> bytes_;  // size of the whole text, when known before reading
  std::vector<uint64_t> counts_;
  std::unordered_map<std::string, std::string> metadata_;
};

}  // namespace

std::unique_ptr<NgramLM> ReadArpa(ByteSource* source, const std::string& name) {
  return ArpaReader(source, name).Run();
}

std::unique_ptr<NgramLM> ReadArpa(std::string_view text, const std::string& name) {
  MemorySource source(text);
  return ReadArpa(&source, name);
}

std::unique_ptr<NgramLM> ReadArpaFile(const std::string& path) {
  FileSource source(path);
  return ReadArpa(&source, path);
}

}  // namespace dl
