// ThreadPool: publish a loop by bumping a generation counter, let everyone (the caller
// included) pull task indices until none are left, wait for helpers to leave.
#include "engine/system/thread_pool.h"

#include <chrono>

#include "kernels/check.h"

namespace kvdesk {
namespace {

// How long an idle worker polls for the next loop before sleeping on the condition variable.
// Long enough to bridge the gap between the matmuls of one layer, short enough not to burn a
// core while the app is idle.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(300);

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { worker_main(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t num_tasks, const Task& task, int64_t total_work) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1 || total_work < kMinParallelWork) {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
    return;
  }
  KVDESK_ASSERT(pending_workers_.load() == 0);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    num_tasks_ = num_tasks;
    next_task_.store(0);
    pending_workers_.store(num_threads_ - 1);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_tasks(0);
  while (pending_workers_.load(std::memory_order_acquire) != 0) {
    std::this_thread::yield();
  }
}

void ThreadPool::run_tasks(int thread_index) {
  for (;;) {
    const int64_t i = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (i >= num_tasks_) return;
    (*task_)(i, thread_index);
  }
}

void ThreadPool::worker_main(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    run_tasks(thread_index);
    pending_workers_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace kvdesk
