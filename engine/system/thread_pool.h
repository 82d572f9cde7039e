// ThreadPool: a persistent set of workers for data-parallel loops inside one forward pass.
// The calling thread is worker 0, so a pool of N threads starts N-1 helpers. A loop hands
// out task indices through one atomic claim word (dynamic scheduling: a slow or descheduled
// core takes fewer chunks). Invariants:
// - A loop is finished when all its tasks have run, not when every helper has checked in: a
//   helper that wakes late (its core busy with another process) finds nothing left to claim
//   and never holds the step up.
// - A claim names its loop (generation), so a late helper can never take a task of a loop that
//   is over, or one of the next loop with the last loop's count.
// - Nobody spins forever: helpers poll briefly between loops, then sleep; the caller, once it
//   can claim nothing more, polls briefly for the tasks still running, then sleeps until the
//   last one ends. A sleeping caller leaves its core idle, so the kernel can move a descheduled
//   helper there to finish its task.
// - On a busy machine a thread that loses its core while holding a task holds the loop up, so
//   the pool measures itself: now and then it runs a short stretch of loops on the caller alone
//   and one with the helpers, compares work done per second, and uses the faster way until the
//   next comparison. More threads are then never much slower than one.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
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
  // costs more than a tiny model's whole matmul. num_tasks must be below kMaxTasks.
  using Task = std::function<void(int64_t task, int thread_index)>;
  static constexpr int64_t kMinParallelWork = int64_t(1) << 16;
  static constexpr int64_t kMaxTasks = int64_t(1) << 22;
  void parallel_for(int64_t num_tasks, const Task& task, int64_t total_work = kMinParallelWork);

 private:
  using Clock = std::chrono::steady_clock;
  void worker_main(int thread_index);
  // Claims and runs tasks of loop `generation` until none is left.
  void run_tasks(uint64_t generation, int thread_index);
  void wait_for_loop(uint64_t generation) const;
  void wait_until_done(int64_t num_tasks);
  void run_with_helpers(int64_t num_tasks, const Task& task);

  // Which way the next loops run: probing each way in turn, then the faster one for a while.
  enum class Phase { ProbeHelpers, ProbeSolo, Chosen };
  bool use_helpers() const;
  void note_loop(int64_t work, Clock::duration took);

  int num_threads_;
  std::vector<std::thread> workers_;

  // The claim word: generation (20 bits) | task count (22) | next unclaimed task (22). A new loop
  // stores (generation + 1, count, 0); claiming is a compare-exchange that leaves the word
  // unchanged when the loop moved on. task_ belongs to the current generation and is read
  // only after a successful claim.
  std::atomic<uint64_t> claim_{0};
  const Task* task_ = nullptr;
  std::atomic<int64_t> done_{0};   // tasks of the current loop that have returned
  std::atomic<bool> stopping_{false};

  // The caller's measurements of the current phase.
  Phase phase_ = Phase::ProbeHelpers;
  double phase_work_ = 0;
  Clock::duration phase_time_{};
  int phase_loops_ = 0;
  double helpers_rate_ = 0;   // work per second of the last helpers probe
  bool solo_chosen_ = false;
};

}  // namespace kvdesk
