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
    claim_ = 0;
    active_ = 0;
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

void SpinPool::Run(int tasks, int threads, const std::function<void(int)>& task) {
  if (tasks <= 0) return;
  if (tasks == 1 || threads <= 1) {
    for (int t = 0; t < tasks; ++t) task(t);
    return;
  }
  std::lock_guard<std::mutex> one_job(run_mutex_);
  Grow(threads - 1);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    tasks_ = tasks;
    threads_ = threads;
    error_ = nullptr;
    generation = (generation_.load() + 1) & 0xffffffffu;
    claim_.store(generation << 32);
    generation_.store(generation, std::memory_order_release);
  }
  if (sleeping_.load() > 0) wake_.notify_all();
  RunClaimed(generation, tasks, &task);
  // Every task is claimed; wait for those workers still running one. A worker that joins from
  // here on finds nothing to claim and never calls `task`.
  while (active_.load() > 0) {
  }
  if (error_) std::rethrow_exception(error_);
}

void SpinPool::RunClaimed(uint64_t generation, int tasks, const std::function<void(int)>* task) {
  for (;;) {
    uint64_t claim = claim_.load();
    int next;
    do {
      next = static_cast<int>(claim & 0xffffffffu);
      if ((claim >> 32) != generation || next >= tasks) return;
    } while (!claim_.compare_exchange_weak(claim, claim + 1));
    try {
      (*task)(next);  // alive: its job cannot end while this claim's task runs
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
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
    int tasks, threads;
    {
      // The job and its generation read together, and the worker counted as active before it
      // claims anything: Run returns only when no active worker can still run one of its tasks.
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_.load();
      task = task_;
      tasks = tasks_;
      threads = threads_;
      active_.fetch_add(1);
    }
    if (index < threads) RunClaimed(seen, tasks, task);
    active_.fetch_sub(1);
  }
}

}  // namespace dl::lowbit
