// Runs independent per-sequence work on a few std::threads (the bindings release the GIL).
//
// ParallelFor(n, threads, fn) calls fn(i) once for every i in [0, n), with at most `threads`
// workers taking indices from a shared atomic counter; results are written by index, so the
// output is identical to a serial loop whatever the thread count. The first exception thrown by
// any fn is rethrown in the caller after all workers stop. threads <= 0 means the hardware
// concurrency.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dl {

inline int ResolveThreads(int threads, int64_t n) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
}

template <typename Fn>
void ParallelFor(int64_t n, int threads, Fn fn) {
  threads = ResolveThreads(threads, n);
  if (threads == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&]() {
    for (int64_t i; !failed.load() && (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w) pool.emplace_back(worker);
  for (auto& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace dl
