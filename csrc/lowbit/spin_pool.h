// A small persistent thread pool for kernels called hundreds of times a second (the lean step's
// matrix products: ~120 calls a decoding step, 20-200 us each).
//
// Why not batch.h's ParallelFor: starting threads costs ~50 us a call, as much as the work. Here
// workers stay alive, spin briefly after a job (the next call comes within microseconds) and
// then sleep on a condition variable, so an idle process burns no CPU. One job at a time; calls
// from several threads queue. After fork() the child starts its own workers.
//
// Tasks are claimed one by one by whichever thread is free, the caller included, and the caller
// waits only for tasks a worker has started: when another process holds a core and a worker is
// descheduled, the others finish its share instead of waiting a time slice for it (a step took
// 15x longer beside one busy process with a fixed share per thread). Callers split their work
// so that a task's result does not depend on which thread runs it.
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

  // Calls task(t) for t in [0, tasks) on the calling thread and up to threads - 1 workers;
  // returns when all are done. The first exception a task throws is rethrown here.
  void Run(int tasks, int threads, const std::function<void(int)>& task);

 private:
  void Grow(int workers);
  void Work(int index, uint64_t seen);
  // Claims and runs tasks of job `generation` until none is left.
  void RunClaimed(uint64_t generation, int tasks, const std::function<void(int)>* task);

  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> claim_{0};  // the job's generation << 32 | its next unclaimed task
  std::atomic<int> active_{0};      // workers inside the current or a finished job
  int threads_ = 0;                 // threads that may take the current job's tasks
  std::atomic<int> sleeping_{0};
  const std::function<void(int)>* task_ = nullptr;
  int tasks_ = 0;
  std::exception_ptr error_;
  std::vector<std::thread>* workers_ = nullptr;  // leaked on purpose: see spin_pool.cc
  int owner_pid_ = 0;
};

}  // namespace dl::lowbit
