// A datastore of token records for retrieval drafts (REST, He et al. 2024): the continuation
// that most often followed the context's final n tokens in a corpus (a model's own answers).
//
// Index: the records back to back, each closed by a separator, and the start of every suffix
// sorted by its first `depth` tokens (a suffix array cut at that depth; the separator sorts
// before every token, so no match runs across two records). Building it sorts N suffixes,
// O(N log N) comparisons of at most `depth` tokens; it holds 8 bytes per token (fewer than 2^31).
//
// Query (Continuation): for n from max_ngram down to min_ngram, the suffixes that start with the
// context's last n tokens form one range (two binary searches). The first n for which it is not
// empty is used: the draft then follows, token by token, the most frequent next token among the
// occurrences still in the range (ties: the lower token id), keeping those that continue with it.
// Within a range the suffixes are sorted by their next token, so each candidate is a run, and
// counting costs a binary search per distinct next token. It stops at `length` tokens, at a
// record's end, and where the most frequent next token has fewer than `min_count` occurrences
// (past the draft's first token: a continuation seen once drafts one token).
#pragma once

#include <cstdint>
#include <vector>

namespace dl {

// How a datastore query matches and how far it follows (see Continuation).
struct DatastoreQuery {
  int max_ngram = 4;  // longest context suffix matched
  int min_ngram = 2;  // shortest one
  int length = 6;     // most draft tokens
  int min_count = 2;  // occurrences a draft token past the first needs
};

class TokenDatastore {
 public:
  // `tokens`: records back to back; `offsets` [R + 1]: record r is tokens[offsets[r],
  // offsets[r + 1]) (non-decreasing, from 0 to tokens.size()). Token ids must be >= 0. `depth`:
  // how many tokens of each suffix the index orders, the longest max_ngram + length a query may
  // use (1..64). Throws InvalidArgument naming the bad value (a negative token, offsets out of
  // order, 2^31 tokens or more).
  TokenDatastore(const std::vector<int32_t>& tokens, const std::vector<int64_t>& offsets,
                 int depth);

  // The draft for `context[0..size)` under `query` (empty when no suffix of at least
  // min_ngram tokens occurs). Throws InvalidArgument for a query outside 1 <= min_ngram <=
  // max_ngram, length >= 1, min_count >= 1, max_ngram + length <= depth.
  std::vector<int32_t> Continuation(const int32_t* context, int64_t size,
                                    const DatastoreQuery& query) const;

  int64_t num_tokens() const { return num_tokens_; }
  int64_t num_records() const { return num_records_; }
  int depth() const { return depth_; }

 private:
  // Token `offset` of the suffix at `start` (separators past the end: no bounds checks).
  int32_t At(int64_t start, int offset) const { return text_[start + offset]; }

  std::vector<int32_t> text_;  // records, each followed by a separator; `depth_` more at the end
  std::vector<int32_t> suffixes_;  // starts of the non-separator positions, sorted to depth_
  int64_t num_tokens_ = 0;
  int64_t num_records_ = 0;
  int depth_ = 0;
};

}  // namespace dl
