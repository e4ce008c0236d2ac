// ScratchMemory (scratch.h): the thread's buffer is reused across calls, grows after a call that
// overflowed it, and is never shared by a nested arena.
#include "scratch.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace dl {
namespace {

const void* FirstAllocation(ScratchMemory& scratch) {
  return scratch.resource()->allocate(64, alignof(std::max_align_t));
}

TEST(Scratch, ConsecutiveCallsReuseTheThreadsBuffer) {
  const void* first;
  {
    ScratchMemory scratch;
    first = FirstAllocation(scratch);
  }
  ScratchMemory again;
  EXPECT_EQ(FirstAllocation(again), first);
}

TEST(Scratch, NestedArenasDoNotShareMemory) {
  ScratchMemory outer;
  ScratchVector<int64_t> a(1000, 7, outer.resource());
  {
    ScratchMemory inner;
    ScratchVector<int64_t> b(1000, 9, inner.resource());
    EXPECT_TRUE(b.data() + b.size() <= a.data() || a.data() + a.size() <= b.data());
  }
  for (int64_t x : a) ASSERT_EQ(x, 7);  // the inner arena wrote nothing over the outer one
}

TEST(Scratch, OverflowGoesToTheHeapAndTheBufferGrows) {
  const size_t big = size_t{1} << 20;  // beyond the initial 64 KiB
  {
    ScratchMemory scratch;
    ScratchVector<char> v(big, 'x', scratch.resource());
    EXPECT_EQ(v[big - 1], 'x');
  }
  // The next call finds room for the same request in the grown buffer: two allocations of the
  // same size in a row are adjacent (no new upstream block between them).
  ScratchMemory scratch;
  char* a = static_cast<char*>(scratch.resource()->allocate(big / 2, 1));
  char* b = static_cast<char*>(scratch.resource()->allocate(big / 4, 1));
  EXPECT_EQ(b, a + big / 2);
}

}  // namespace
}  // namespace dl
