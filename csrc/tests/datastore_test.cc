// C++ tests of the retrieval datastore (datastore.h) without Python: drafts worked out by hand.
#include "datastore.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "errors.h"

namespace dl {
namespace {

TokenDatastore Store(const std::vector<std::vector<int32_t>>& records, int depth = 12) {
  std::vector<int32_t> tokens;
  std::vector<int64_t> offsets{0};
  for (const auto& record : records) {
    tokens.insert(tokens.end(), record.begin(), record.end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
  }
  return TokenDatastore(tokens, offsets, depth);
}

std::vector<int32_t> Draft(const TokenDatastore& store, std::vector<int32_t> context,
                           DatastoreQuery query) {
  return store.Continuation(context.data(), static_cast<int64_t>(context.size()), query);
}

TEST(Datastore, FollowsTheMostFrequentContinuationOfTheLongestMatch) {
  const auto store = Store({{1, 2, 3, 4}, {1, 2, 3, 5}, {1, 2, 3, 5}, {7, 2, 9, 4}});
  DatastoreQuery query{4, 1, 4, 2};
  EXPECT_EQ(Draft(store, {8, 1, 2}, query), (std::vector<int32_t>{3, 5}));  // 5 twice, 4 once
  EXPECT_EQ(Draft(store, {7, 2}, query), (std::vector<int32_t>{9}));        // seen once: one token
  query.min_count = 1;
  EXPECT_EQ(Draft(store, {7, 2}, query), (std::vector<int32_t>{9, 4}));
  EXPECT_TRUE(Draft(store, {6}, query).empty());
  EXPECT_EQ(store.num_tokens(), 16);
  EXPECT_EQ(store.num_records(), 4);
}

TEST(Datastore, TiesGoToTheLowerTokenAndMatchesStopAtRecordEnds) {
  const auto store = Store({{1, 8}, {1, 6}, {2}});
  DatastoreQuery query{2, 1, 3, 1};
  EXPECT_EQ(Draft(store, {1}, query), (std::vector<int32_t>{6}));
  EXPECT_TRUE(Draft(store, {2}, query).empty());  // only a record's end follows
}

TEST(Datastore, RejectsBadInputWithItsValues) {
  EXPECT_THROW(Store({{1, -2}}), InvalidArgument);
  EXPECT_THROW(TokenDatastore({1, 2}, {0, 3}, 8), InvalidArgument);
  EXPECT_THROW(TokenDatastore({1, 2}, {0, 2, 1, 2}, 8), InvalidArgument);
  EXPECT_THROW(TokenDatastore({}, {0, 64, 0}, 8), InvalidArgument);  // a record past the end
  EXPECT_THROW(Store({{1}}, 1), InvalidArgument);
  const auto store = Store({{1, 2}}, 6);
  EXPECT_THROW(Draft(store, {1}, DatastoreQuery{4, 1, 3, 1}), InvalidArgument);  // 4 + 3 > 6
  EXPECT_THROW(Draft(store, {1}, DatastoreQuery{2, 3, 1, 1}), InvalidArgument);
  try {
    Store({{1, -2}});
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("-2"), std::string::npos);
  }
}

}  // namespace
}  // namespace dl
