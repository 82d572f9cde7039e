// ThreadPool: a persistent set of workers for data-parallel loops inside one forward pass.
// The calling thread is worker 0, so a pool of N threads starts N-1 helpers. A loop hands
// out task indices through one atomic counter (dynamic scheduling: a slow core takes fewer
// chunks). Workers spin briefly between loops, then sleep, so the hundreds of loops of one
// decode step do not pay a kernel wake-up each.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvdesk {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls task(i, thread_index) for every i in [0, num_tasks) and returns when all are done.
  // Not reentrant: one loop at a time, from one caller thread. total_work (any unit, e.g.
  // multiply-adds) below kMinParallelWork runs on the caller alone: waking the other threads
  // costs more than a tiny model's whole matmul.
  using Task = std::function<void(int64_t task, int thread_index)>;
  static constexpr int64_t kMinParallelWork = int64_t(1) << 16;
  void parallel_for(int64_t num_tasks, const Task& task, int64_t total_work = kMinParallelWork);

 private:
  void worker_main(int thread_index);
  void run_tasks(int thread_index);

  int num_threads_;
  std::vector<std::thread> workers_;

  // One loop's state. generation_ changes when a new loop is published; workers that saw the
  // old value pick it up. pending_workers_ counts helpers still inside run_tasks.
  const Task* task_ = nullptr;
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_workers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace kvdesk
