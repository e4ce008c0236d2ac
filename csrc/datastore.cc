#include "datastore.h"

#include <algorithm>
#include <limits>

#include "errors.h"

namespace dl {

namespace {

// Ends every record, and pads the text: below every token id, so a suffix that stops sorts
// first and no pattern (token ids only) matches across it.
constexpr int32_t kSeparator = -1;
constexpr int kMaxDepth = 64;

// A suffix's first two tokens as one sortable key (separators as 0): most comparisons of the
// sort end here, without reading the text at random.
uint64_t PairKey(const std::vector<int32_t>& text, int64_t start) {
  const auto first = static_cast<uint64_t>(static_cast<int64_t>(text[start]) + 1);
  const auto second = static_cast<uint64_t>(static_cast<int64_t>(text[start + 1]) + 1);
  return (first << 32) | second;
}

struct Keyed {
  uint64_t key;
  int32_t start;
};

}  // namespace

TokenDatastore::TokenDatastore(const std::vector<int32_t>& tokens,
                               const std::vector<int64_t>& offsets, int depth)
    : depth_(depth) {
  if (depth < 2 || depth > kMaxDepth)
    throw InvalidArgument(Message("datastore depth must be in 2..", kMaxDepth, ", got ", depth));
  if (offsets.empty() || offsets.front() != 0 ||
      offsets.back() != static_cast<int64_t>(tokens.size()))
    throw InvalidArgument(Message("datastore offsets must run from 0 to the ", tokens.size(),
                                  " tokens, got ", offsets.size(), " offsets"));
  const int64_t records = static_cast<int64_t>(offsets.size()) - 1;
  const int64_t text_size = static_cast<int64_t>(tokens.size()) + records + depth;
  if (text_size >= std::numeric_limits<int32_t>::max())
    throw InvalidArgument(Message("a datastore holds fewer than 2^31 tokens, got ", tokens.size()));
  // Every offset first: with them non-decreasing from 0 to tokens.size(), no record reads
  // past the tokens.
  for (int64_t r = 0; r < records; ++r)
    if (offsets[r + 1] < offsets[r])
      throw InvalidArgument(Message("datastore offsets must not decrease: offsets[", r + 1,
                                    "] = ", offsets[r + 1], " < offsets[", r, "] = ", offsets[r]));
  text_.reserve(static_cast<size_t>(text_size));
  for (int64_t r = 0; r < records; ++r) {
    for (int64_t i = offsets[r]; i < offsets[r + 1]; ++i) {
      if (tokens[i] < 0)
        throw InvalidArgument(
            Message("datastore token ids must be >= 0, got ", tokens[i], " at position ", i));
      text_.push_back(tokens[i]);
    }
    text_.push_back(kSeparator);
  }
  text_.insert(text_.end(), depth, kSeparator);
  num_tokens_ = static_cast<int64_t>(tokens.size());
  num_records_ = records;

  std::vector<Keyed> keyed;
  keyed.reserve(static_cast<size_t>(num_tokens_));
  const auto stored = static_cast<int64_t>(text_.size()) - depth;
  for (int64_t start = 0; start < stored; ++start)
    if (text_[start] != kSeparator)
      keyed.push_back({PairKey(text_, start), static_cast<int32_t>(start)});
  std::sort(keyed.begin(), keyed.end(), [this](const Keyed& a, const Keyed& b) {
    if (a.key != b.key) return a.key < b.key;
    for (int offset = 2; offset < depth_; ++offset) {
      const int32_t x = At(a.start, offset), y = At(b.start, offset);
      if (x != y) return x < y;
    }
    return a.start < b.start;  // one order for equal prefixes: queries are deterministic
  });
  suffixes_.reserve(keyed.size());
  for (const Keyed& k : keyed) suffixes_.push_back(k.start);
}

std::vector<int32_t> TokenDatastore::Continuation(const int32_t* context, int64_t size,
                                                  const DatastoreQuery& query) const {
  if (query.min_ngram < 1 || query.max_ngram < query.min_ngram || query.length < 1 ||
      query.min_count < 1 || query.max_ngram + query.length > depth_)
    throw InvalidArgument(Message(
        "datastore query needs 1 <= min_ngram <= max_ngram, length >= 1, min_count >= 1 and "
        "max_ngram + length <= the index depth ",
        depth_, "; got min_ngram=", query.min_ngram, ", max_ngram=", query.max_ngram,
        ", length=", query.length, ", min_count=", query.min_count));
  std::vector<int32_t> draft;
  const auto begin = suffixes_.begin(), end = suffixes_.end();
  for (int64_t n = std::min<int64_t>(query.max_ngram, size); n >= query.min_ngram; --n) {
    const int32_t* pattern = context + size - n;
    // Suffixes whose first n tokens are the pattern: one range of the sorted suffixes.
    const auto lo = std::lower_bound(begin, end, pattern, [&](int32_t start, const int32_t* p) {
      for (int64_t j = 0; j < n; ++j)
        if (At(start, static_cast<int>(j)) != p[j]) return At(start, static_cast<int>(j)) < p[j];
      return false;
    });
    const auto hi = std::upper_bound(lo, end, pattern, [&](const int32_t* p, int32_t start) {
      for (int64_t j = 0; j < n; ++j)
        if (At(start, static_cast<int>(j)) != p[j]) return p[j] < At(start, static_cast<int>(j));
      return false;
    });
    if (lo == hi) continue;
    auto first = lo, last = hi;
    for (int i = 0; i < query.length; ++i) {
      const int offset = static_cast<int>(n) + i;
      // The range is sorted by the token at `offset`: each next token is one run.
      auto best_begin = first, best_end = first;
      for (auto run = first; run != last && last - run > best_end - best_begin;) {
        const int32_t token = At(*run, offset);
        const auto run_end = std::upper_bound(
            run, last, token, [&](int32_t t, int32_t start) { return t < At(start, offset); });
        if (run_end - run > best_end - best_begin) best_begin = run, best_end = run_end;
        run = run_end;
      }
      const int32_t token = At(*best_begin, offset);
      if (token == kSeparator || (i > 0 && best_end - best_begin < query.min_count)) break;
      draft.push_back(token);
      first = best_begin, last = best_end;
    }
    return draft;
  }
  return draft;
}

}  // namespace dl
