// A small persistent thread pool for kernels called hundreds of times a second (the lean step's
// matrix products: ~120 calls a decoding step, 20-200 us each).
//
// Why not batch.h's ParallelFor: starting threads costs ~50 us a call, as much as the work. Here
// workers stay alive, spin briefly after a job (the next call comes within microseconds) and
// then sleep on a condition variable, so an idle process burns no CPU. One job at a time; calls
// from several threads queue. After fork() the child starts its own workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dl::lowbit {

class SpinPool {
 public:
  // The process's pool.
  static SpinPool& Instance();

  // Calls task(t) for t in [0, tasks), task 0 on the calling thread and the others on workers;
  // returns when all are done. The first exception a task throws is rethrown here.
  void Run(int tasks, const std::function<void(int)>& task);

 private:
  void Grow(int workers);
  void Work(int index, uint64_t seen);

  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleeping_{0};
  const std::function<void(int)>* task_ = nullptr;
  int tasks_ = 0;
  std::exception_ptr error_;
  std::vector<std::thread>* workers_ = nullptr;  // leaked on purpose: see spin_pool.cc
  int owner_pid_ = 0;
};

}  // namespace dl::lowbit
