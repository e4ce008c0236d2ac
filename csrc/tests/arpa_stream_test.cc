// Streamed ARPA reading (issue 27): LineReader over a source that hands out a few bytes at a time,
// the line bound, and NgramBuilder's small-start tables against presized ones. References are
// written out here (the expected lines) or the builder's own presized path, whose tables the
// streamed path must reproduce bucket for bucket.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "errors.h"
#include "ngram/binary.h"
#include "ngram/builder.h"
#include "ngram/byte_source.h"
#include "ngram/line_reader.h"

namespace dl {
namespace {

// Hands out at most `step` bytes per Read.
class Trickle : public ByteSource {
 public:
  Trickle(std::string text, size_t step) : text_(std::move(text)), step_(step) {}
  size_t Read(char* out, size_t n) override {
    const size_t got = std::min({n, step_, text_.size() - pos_});
    std::memcpy(out, text_.data() + pos_, got);
    pos_ += got;
    return got;
  }

 private:
  std::string text_;
  size_t step_;
  size_t pos_ = 0;
};

std::vector<std::string> AllLines(ByteSource* source, size_t max_line) {
  const std::string name = "t";
  LineReader reader(source, name, max_line);
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.Next(&line)) lines.emplace_back(line);
  EXPECT_TRUE(line.empty());
  return lines;
}

TEST(LineReader, LinesAcrossAnyBlockBoundary) {
  const std::string text = "a b\r\n\n  \nlonger line here\r\nlast";
  const std::vector<std::string> expected = {"a b", "", "  ", "longer line here", "last"};
  for (size_t step : {1, 2, 3, 5, 64}) {
    Trickle source(text, step);
    EXPECT_EQ(AllLines(&source, 17), expected) << "step " << step;  // 17: with its \r
  }
  MemorySource empty("");
  EXPECT_TRUE(AllLines(&empty, 16).empty());
  MemorySource one_newline("\n");
  EXPECT_EQ(AllLines(&one_newline, 16), std::vector<std::string>{""});
}

TEST(LineReader, RefusesALineOverTheBoundWithItsNumber) {
  const std::string name = "bomb.arpa";
  for (const std::string text : {"ok\n0123456789\nnext\n", "ok\n0123456789"}) {
    Trickle exact(text, 3);
    EXPECT_EQ(AllLines(&exact, 10).size(), text.back() == '\n' ? 3u : 2u);  // 10 bytes: allowed
    Trickle source(text, 3);
    LineReader reader(&source, name, 9);
    std::string_view line;
    ASSERT_TRUE(reader.Next(&line));
    try {
      reader.Next(&line);
      FAIL() << "a 10-byte line passed a 9-byte bound";
    } catch (const FormatError& error) {
      EXPECT_EQ(std::string(error.what()).rfind("bomb.arpa:2: line is longer than 9 bytes", 0), 0u)
          << error.what();
    }
  }
}

// A 3-gram model of `words` words: every pair and some triples, probabilities made up.
std::unique_ptr<NgramLM> Build(uint64_t presize, int words) {
  std::vector<std::string> names;
  for (int i = 0; i < words; ++i) names.push_back("w" + std::to_string(i));
  std::vector<std::vector<int>> triples;
  for (int a = 0; a < words; ++a)
    for (int b = 0; b < words; b += 2) triples.push_back({a, b, (a + b) % words});
  const std::vector<uint64_t> counts = {static_cast<uint64_t>(words),
                                        static_cast<uint64_t>(words) * words, triples.size()};
  NgramBuilder builder(counts, {}, "t", presize);
  for (int i = 0; i < words; ++i) builder.AddUnigram(names[i], -1.0f - 0.01f * i, -0.1f, 0);
  builder.EndOrder(1);
  for (int a = 0; a < words; ++a)
    for (int b = 0; b < words; ++b) {
      const std::string_view pair[] = {names[a], names[b]};
      builder.AddNgram(2, pair, -2.0f - 0.001f * (a + b), -0.2f, 0);
    }
  builder.EndOrder(2);
  for (const auto& t : triples) {
    const std::string_view triple[] = {names[t[0]], names[t[1]], names[t[2]]};
    builder.AddNgram(3, triple, -0.5f - 0.001f * t[2], 0.0f, 0);
  }
  builder.EndOrder(3);
  return builder.Finish("test");
}

std::string Saved(const NgramLM& model, const std::string& name) {
  const std::string path = testing::TempDir() + name;
  SaveBinary(model, path, true);
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(NgramBuilder, SmallStartTablesEndAsPresizedOnes) {
  const auto presized = Build(~uint64_t{0}, 40);
  const std::string want_file = Saved(*presized, "presized.dlm");
  for (uint64_t presize : {1, 7, 100}) {
    const auto grown = Build(presize, 40);
    for (int n = 2; n <= 3; ++n) {
      const ngram::TableView& want = presized->table(n);
      const ngram::TableView& got = grown->table(n);
      ASSERT_EQ(got.size(), want.size()) << "order " << n << ", presize " << presize;
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(ngram::Entry)), 0)
          << "order " << n << ", presize " << presize;
    }
    EXPECT_EQ(Saved(*grown, "grown.dlm"), want_file) << "presize " << presize;  // bounds too
  }
}

}  // namespace
}  // namespace dl
