#include "lowbit/spin_pool.h"

#include <unistd.h>

#include <chrono>

namespace dl::lowbit {

namespace {
// Spinning is a plain loop of loads, without the PAUSE instruction: virtual machines trap a
// PAUSE loop as a lock holder's wait (KVM's pause-loop exiting) and deschedule the vCPU, which
// turned a 10 us product into 225 us (bench/RESULTS.md).
// How long an idle worker spins before it sleeps: longer than the gap between two matrix
// products of a step (a norm, the attention), far shorter than a step.
constexpr auto kSpin = std::chrono::microseconds(200);
}  // namespace

SpinPool& SpinPool::Instance() {
  // Never destroyed: workers blocked at exit would otherwise be joined during static
  // destruction, after the interpreter that called us has gone.
  static SpinPool* pool = new SpinPool();
  return *pool;
}

void SpinPool::Grow(int workers) {
  const int pid = static_cast<int>(getpid());
  if (workers_ == nullptr || owner_pid_ != pid) {
    // A forked child inherits the vector but not the threads: start afresh (the parent's
    // thread handles are abandoned, not joined).
    workers_ = new std::vector<std::thread>();
    owner_pid_ = pid;
    generation_ = 0;
    sleeping_ = 0;
  }
  while (static_cast<int>(workers_->size()) < workers) {
    const int index = static_cast<int>(workers_->size()) + 1;
    // The worker's first generation is read here, not in the thread: a job published before the
    // new thread runs must still count as new to it.
    const uint64_t seen = generation_.load();
    workers_->emplace_back([this, index, seen] { Work(index, seen); });
    workers_->back().detach();
  }
}

void SpinPool::Run(int tasks, const std::function<void(int)>& task) {
  if (tasks <= 1) {
    if (tasks == 1) task(0);
    return;
  }
  std::lock_guard<std::mutex> one_job(run_mutex_);
  Grow(tasks - 1);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    tasks_ = tasks;
    error_ = nullptr;
    pending_ = tasks - 1;
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleeping_.load() > 0) wake_.notify_all();
  std::exception_ptr mine;
  try {
    task(0);
  } catch (...) {
    mine = std::current_exception();
  }
  while (pending_.load(std::memory_order_acquire) > 0) {
  }
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void SpinPool::Work(int index, uint64_t seen) {
  for (;;) {
    auto spin_until = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen) {
      if (std::chrono::steady_clock::now() < spin_until) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleeping_;
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      --sleeping_;
    }
    const std::function<void(int)>* task;
    int tasks;
    {
      // The job and its generation read together: a worker that slept through a job it had no
      // part in must not take the next job's task for the old generation (and run it twice).
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_.load();
      task = task_;
      tasks = tasks_;
    }
    if (index < tasks) {
      try {
        (*task)(index);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

}  // namespace dl::lowbit
