// Per-thread scratch memory for one search call (nbest.h): a bump arena over a buffer that the
// thread keeps between calls.
//
// Why: a search allocates some thirty small arrays (graph, bounds, passes, extractor). At small
// shapes malloc and free were a quarter of a call (perf, a 1x1 lattice: 28% of 2.3 us), and
// every shape paid them. With the arena an allocation is a pointer bump and a free is nothing;
// the whole arena is dropped when the call ends.
//
// The buffer starts at kInitialBytes and grows, for the next call, to what a call needed (up to
// kMaxKeptBytes, so that one huge lattice does not pin its memory to the thread forever). A call
// nested inside another on the same thread (none today) gets a fresh heap-backed arena instead of
// sharing the buffer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <memory_resource>
#include <vector>  // std::pmr::vector

namespace dl {

template <typename T>
using ScratchVector = std::pmr::vector<T>;

class ScratchMemory {
 public:
  ScratchMemory()
      : owner_(!InUse()),
        arena_(owner_ ? Buffer().data.get() : nullptr, owner_ ? Buffer().size : 0, &overflow_) {
    if (owner_) InUse() = true;
  }
  ScratchMemory(const ScratchMemory&) = delete;
  ScratchMemory& operator=(const ScratchMemory&) = delete;
  ~ScratchMemory() {
    arena_.release();
    if (!owner_) return;
    InUse() = false;
    if (overflow_.bytes > 0) {
      Block& buffer = Buffer();
      const size_t want = std::min(buffer.size + overflow_.bytes, kMaxKeptBytes);
      if (want > buffer.size) buffer = Block(want);
    }
  }

  std::pmr::memory_resource* resource() { return &arena_; }

 private:
  static constexpr size_t kInitialBytes = size_t{64} << 10;
  static constexpr size_t kMaxKeptBytes = size_t{16} << 20;

  // The heap behind the arena once the buffer is used up; counts what it handed out.
  class Overflow : public std::pmr::memory_resource {
   public:
    size_t bytes = 0;

   private:
    void* do_allocate(size_t n, size_t align) override {
      bytes += n;
      return std::pmr::new_delete_resource()->allocate(n, align);
    }
    void do_deallocate(void* p, size_t n, size_t align) override {
      std::pmr::new_delete_resource()->deallocate(p, n, align);
    }
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
      return this == &other;
    }
  };

  // Uninitialized bytes (a vector would zero up to kMaxKeptBytes each time it grows).
  struct Block {
    explicit Block(size_t bytes) : data(new std::byte[bytes]), size(bytes) {}
    std::unique_ptr<std::byte[]> data;
    size_t size;
  };
  static Block& Buffer() {
    thread_local Block buffer(kInitialBytes);
    return buffer;
  }
  static bool& InUse() {
    thread_local bool in_use = false;
    return in_use;
  }

  const bool owner_;
  Overflow overflow_;
  std::pmr::monotonic_buffer_resource arena_;
};

}  // namespace dl
