#include "ngram/arpa.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>

#include "errors.h"
#include "ngram/vocab_index.h"
#include "ngram/word_bound.h"

namespace dl {
namespace {

using ngram::Entry;
constexpr double kLn10 = 2.302585092994045684;

class LineReader {
 public:
  LineReader(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  // Next line without its terminator; false at end of text.
  bool Next(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    const char* start = text_.data() + pos_;
    const void* nl = std::memchr(start, '\n', text_.size() - pos_);
    size_t len = nl ? static_cast<const char*>(nl) - start : text_.size() - pos_;
    pos_ += len + 1;
    if (len > 0 && start[len - 1] == '\r') --len;
    *line = std::string_view(start, len);
    ++line_no_;
    return true;
  }
  // Next line that is not blank (whitespace only); false at end.
  bool NextNonBlank(std::string_view* line) {
    while (Next(line))
      if (line->find_first_not_of(" \t") != std::string_view::npos) return true;
    return false;
  }
  template <typename... Parts>
  [[noreturn]] void Fail(const Parts&... parts) const {
    throw FormatError(Message(name_, ":", line_no_, ": ", parts...));
  }
  template <typename... Parts>
  [[noreturn]] void FailAt(size_t line_no, const Parts&... parts) const {
    throw FormatError(Message(name_, ":", line_no, ": ", parts...));
  }
  size_t line_no() const { return line_no_; }
  const std::string& name() const { return name_; }

 private:
  std::string_view text_;
  const std::string& name_;
  size_t pos_ = 0;
  size_t line_no_ = 0;
};

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

class Builder {
 public:
  struct WordOfFn {
    const std::vector<std::string_view>* words;
    std::string_view operator()(WordIndex i) const { return (*words)[i]; }
  };
  WordOfFn WordOf() const { return WordOfFn{&words_}; }

  Builder(std::string_view text, const std::string& name) : reader_(text, name) {}

  std::unique_ptr<NgramLM> Run() {
    ReadHeader();
    for (int n = 1; n <= parts_.order; ++n) ReadSection(n);
    std::string_view line;
    if (!reader_.NextNonBlank(&line)) reader_.Fail("missing \\end\\ after the ", parts_.order, "-grams");
    if (Trim(line) != "\\end\\") reader_.Fail("expected \\end\\, found '", Trim(line), "'");
    MarkBackoffContexts();
    parts_.suffix_closed = CheckDeferredSuffixes();
    parts_.word_bounds = bounds_->Finish();
    parts_.vocab_offsets.push_back(parts_.vocab_blob.size());
    for (auto& table : tables_) parts_.tables.push_back(std::move(table.buckets()));
    return std::make_unique<NgramLM>(std::move(parts_));
  }

 private:
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
          if (!key.empty())
            parts_.metadata[std::string(key)] = std::string(Trim(t.substr(colon + 1)));
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
      if (n != parts_.counts.size() + 1)
        reader_.Fail("expected 'ngram ", parts_.counts.size() + 1, "=...', found order ", n);
      if (n > static_cast<uint64_t>(kMaxOrder))
        reader_.Fail("order ", n, " is not supported (at most ", kMaxOrder, ")");
      parts_.counts.push_back(count);
    }
    if (parts_.counts.empty()) reader_.Fail("\\data\\ section lists no 'ngram N=COUNT' lines");
    if (parts_.counts[0] == 0) reader_.Fail("the model has no 1-grams");
    parts_.order = static_cast<int>(parts_.counts.size());
    for (int n = 2; n <= parts_.order; ++n)
      tables_.emplace_back(parts_.counts[n - 1]);
    bounds_.emplace(parts_.order, parts_.counts[0]);
    deferred_suffixes_.resize(parts_.order);
  }

  void ReadSection(int n) {
    std::string_view line;
    if (!reader_.NextNonBlank(&line))
      reader_.Fail("missing \\", n, "-grams: section (end of file)");
    const std::string header = Message("\\", n, "-grams:");
    if (Trim(line) != header) reader_.Fail("expected '", header, "', found '", Trim(line), "'");
    const uint64_t expected = parts_.counts[n - 1];
    uint64_t seen = 0;
    std::string_view fields[kMaxOrder + 3];
    if (n == 1) {
      parts_.unigrams.reserve(expected);
      words_.reserve(expected);
      index_ = ngram::VocabIndex(expected);
    }
    while (reader_.Next(&line)) {
      if (IsBlank(line)) break;
      if (line[0] == '\\') {
        reader_.Fail("section \\", n, "-grams: has ", seen, " entries but the header says ",
                     expected, " (missing blank line?)");
      }
      const size_t found = Split(line, fields, n + 2);
      const bool has_backoff = found == static_cast<size_t>(n + 2);
      if (found < static_cast<size_t>(n + 1) || found > static_cast<size_t>(n + 2) ||
          (has_backoff && n == parts_.order)) {
        reader_.Fail("a ", n, "-gram line needs ", n + 1,
                     n < parts_.order ? " or " + std::to_string(n + 2) : std::string(),
                     " fields (log10 prob, ", n, " words", n < parts_.order ? ", backoff" : "",
                     "), found ", found > static_cast<size_t>(n + 2) ? "more" : std::to_string(found));
      }
      const float prob = ParseLog10(fields[0], reader_, "probability");
      const float backoff = has_backoff ? ParseLog10(fields[n + 1], reader_, "backoff") : 0.0f;
      if (++seen > expected)
        reader_.Fail("section \\", n, "-grams: has more entries than the header's ", expected);
      if (n == 1) {
        AddUnigram(fields[1], prob, backoff);
      } else {
        AddNgram(n, fields + 1, prob, backoff);
      }
    }
    for (; pending_count_ > 0; --pending_count_)  // oldest first
      Insert(pending_[(pending_head_ + kPipeline - pending_count_) % kPipeline]);
    // Blank prefixes added to order n - 1 while reading order n may have grown its table.
    if (n >= 3) tables_[n - 3].Compact();
    if (seen != expected)
      reader_.Fail("section \\", n, "-grams: has ", seen, " entries but the header says ", expected);
  }

  void AddUnigram(std::string_view word, float prob, float backoff) {
    const WordIndex index = static_cast<WordIndex>(parts_.unigrams.size());
    if (!index_.Insert(word, index, WordOf())) reader_.Fail("duplicate 1-gram '", word, "'");
    words_.push_back(word);
    parts_.vocab_offsets.push_back(parts_.vocab_blob.size());
    parts_.vocab_blob.append(word);
    parts_.unigrams.push_back(Entry{ngram::kFlagListed, prob, backoff});
    bounds_->AddProb(1, index, prob);
    if (parts_.order > 1) bounds_->AddBackoff(1, backoff);
  }

  // A parsed n-gram waiting for insertion: the pipeline computes keys and prefetches the buckets
  // of kPipeline lines ahead, so that the random memory accesses of the inserts overlap.
  struct Pending {
    WordIndex ids[kMaxOrder];
    int n;
    float prob, backoff;
    uint64_t key, prefix_key, suffix_key;
    size_t line_no;
  };
  static constexpr int kPipeline = 16;

  void AddNgram(int n, const std::string_view* words, float prob, float backoff) {
    if (pending_count_ == kPipeline) {  // the slot to fill holds the oldest pending n-gram
      Insert(pending_[pending_head_]);
      --pending_count_;
    }
    Pending& p = pending_[pending_head_];
    for (int i = 0; i < n; ++i) {
      p.ids[i] = index_.Find(words[i], WordOf());
      if (p.ids[i] == kNoWord)
        reader_.Fail("word '", words[i], "' of this ", n, "-gram has no 1-gram entry");
    }
    p.n = n;
    p.prob = prob;
    p.backoff = backoff;
    p.line_no = reader_.line_no();
    p.key = KeyOf(p.ids, n);
    tables_[n - 2].Prefetch(p.key);
    if (n > 2) {
      p.prefix_key = KeyOf(p.ids, n - 1);
      tables_[n - 3].Prefetch(p.prefix_key);
      p.suffix_key = KeyOf(p.ids + 1, n - 1);
      tables_[n - 3].Prefetch(p.suffix_key);
    }
    pending_head_ = (pending_head_ + 1) % kPipeline;
    ++pending_count_;
  }

  void Insert(const Pending& p) {
    bool inserted = false;
    ngram::Entry* e = tables_[p.n - 2].FindOrInsert(p.key, &inserted);
    if (!inserted && e->listed())
      reader_.FailAt(p.line_no, "duplicate ", p.n, "-gram (or a 64-bit hash collision)");
    e->key |= ngram::kFlagListed;
    e->prob_ln = p.prob;
    e->backoff_ln = p.backoff;
    MarkPrefix(p.ids, p.n - 1);
    bounds_->AddProb(p.n, p.ids[p.n - 1], p.prob);
    if (p.n < parts_.order) bounds_->AddBackoff(p.n, p.backoff);
    // Suffix closure (see ngram_lm.h): the suffix "w_2 .. w_n" must be stored (listed, or blank
    // as a prefix of a listed n-gram). Most are by now; a blank may still be added later.
    if (p.n > 2 && tables_[p.n - 3].Find(p.suffix_key) == nullptr)
      deferred_suffixes_[p.n - 2].push_back(p.suffix_key);
  }

  // True when every deferred suffix is stored by now (the model is suffix-closed).
  bool CheckDeferredSuffixes() {
    for (int m = 2; m < parts_.order; ++m)
      for (uint64_t key : deferred_suffixes_[m - 1])
        if (tables_[m - 2].Find(key) == nullptr) return false;
    return true;
  }

  // The context w_1 .. w_m is a proper prefix of a listed n-gram: flag it (adding a blank entry).
  void MarkPrefix(const WordIndex* ids, int m) {
    while (m >= 1) {
      if (m == 1) {
        parts_.unigrams[ids[0]].key |= ngram::kFlagContext;
        return;
      }
      bool inserted = false;
      Entry* e = tables_[m - 2].FindOrInsert(KeyOf(ids, m), &inserted);
      const bool had = (e->key & ngram::kFlagContext) != 0;
      e->key |= ngram::kFlagContext;
      // A listed entry's prefixes were flagged when it was read; a blank's may not be.
      if (had || e->listed()) return;
      --m;
    }
  }

  static uint64_t KeyOf(const WordIndex* ids, int n) {
    uint64_t key = ngram::SeedKey(ids[n - 1]);
    for (int i = n - 2; i >= 0; --i) key = ngram::ExtendKey(key, ids[i]);
    return key;
  }

  // A listed context with a nonzero backoff also matters to later scores.
  void MarkBackoffContexts() {
    if (parts_.order < 2) {
      for (Entry& e : parts_.unigrams) e.key &= ~ngram::kFlagContext;
      return;
    }
    for (Entry& e : parts_.unigrams)
      if (e.backoff_ln != 0.0f) e.key |= ngram::kFlagContext;
    for (int n = 2; n < parts_.order; ++n)
      for (Entry& e : tables_[n - 2].buckets())
        if (e.key != 0 && e.listed() && e.backoff_ln != 0.0f) e.key |= ngram::kFlagContext;
  }

  LineReader reader_;
  NgramLM::Parts parts_;
  std::vector<ngram::TableBuilder> tables_;  // tables_[i]: order i + 2
  std::optional<ngram::WordBoundBuilder> bounds_;
  std::vector<std::vector<uint64_t>> deferred_suffixes_;  // [m - 1]: keys of m-grams to check

  Pending pending_[kPipeline];
  int pending_head_ = 0;   // next slot to fill
  int pending_count_ = 0;  // filled slots not yet inserted
  std::vector<std::string_view> words_;  // 1-grams' words, pointing into the ARPA text
  ngram::VocabIndex index_;
};

}  // namespace

std::unique_ptr<NgramLM> ReadArpa(std::string_view text, const std::string& name) {
  return Builder(text, name).Run();
}

std::unique_ptr<NgramLM> ReadArpaFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw FormatError(Message(path, ": cannot open file"));
  std::string text(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size())))
    throw FormatError(Message(path, ": read error"));
  return ReadArpa(text, path);
}

}  // namespace dl
