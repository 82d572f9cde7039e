// ThreadPool: a persistent set of workers for data-parallel loops inside one forward pass.
// The calling thread is worker 0, so a pool of N threads starts N-1 helpers. A loop splits its
// task indices into one contiguous range per thread; each thread runs its own range front to
// back, then steals the back half of what is left of another's and runs that front to back,
// and again (a slow or descheduled core runs fewer tasks). Callers number tasks in memory order
// (row chunks of a matrix), so each thread streams one contiguous run of weights: handing out
// indices from one shared counter interleaves the threads' chunks, and every chunk then starts a
// new stream the hardware prefetchers must find again (TinyLlama-shaped Q4_0 decode, 8 chunks a
// thread: 10-15% slower); so did stealing a late helper's tasks one at a time from its back end
// (beside a busy core, where the helper got 3% of one, 2 threads decoded at 0.94-0.96x of 1).
// A loop ends when every task has run, not when every helper has come and gone: a helper
// the OS has not run yet does not hold the loop up. The caller waits for the last tasks
// spinning briefly, then asleep, so its core is free for a helper that lost its own. How many
// threads a loop uses is measured (ThreadCountTuner), per size class of loop: with another
// process busy on a core, fewer threads can be faster for the small loops of decode while
// prefill's large ones still gain, and the count climbs back when the core is free. Which thread
// runs a task never changes what the task computes, so results do not depend on the count.
// Workers spin briefly between loops, then sleep, so the hundreds of loops of one decode step
// do not pay a kernel wake-up each.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/system/thread_count_tuner.h"

namespace kvdesk {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The most threads a loop may use: thread indices are below it, per-thread scratch and
  // chunking are sized by it.
  int num_threads() const { return num_threads_; }

  // Calls task(i, thread_index) for every i in [0, num_tasks) and returns when all are done.
  // Not reentrant: one loop at a time, from one caller thread. total_work (any unit, e.g.
  // multiply-adds) below kMinParallelWork runs on the caller alone: waking the other threads
  // costs more than a tiny model's whole matmul.
  using Task = std::function<void(int64_t task, int thread_index)>;
  static constexpr int64_t kMinParallelWork = int64_t(1) << 16;
  // The most tasks one loop may have (a task index fits half of a range word, below).
  static constexpr int64_t kMaxTasks = (int64_t(1) << 32) - 1;
  void parallel_for(int64_t num_tasks, const Task& task, int64_t total_work = kMinParallelWork);

  // As parallel_for, for tasks that one call can run together: task(begin, end, thread_index)
  // runs tasks [begin, end). Threads that share a loop take one task a call (so others can take
  // the rest of a late thread's range); a loop that runs on the caller alone (one thread, a
  // small loop, or the tuner's choice) is one call for all. A caller that cut its work into
  // chunks for every thread (row chunks of a matrix, each a new weight stream and its own setup)
  // then pays nothing for them: run chunk by chunk on the caller, TinyLlama-shaped Q4_0 decode
  // was 3-6% slower than a one-thread pool's, whose loops have half the chunks.
  using RangeTask = std::function<void(int64_t begin, int64_t end, int thread_index)>;
  void parallel_for_ranges(int64_t num_tasks, const RangeTask& task, int64_t total_work = kMinParallelWork);

 private:
  void run_loop(int64_t num_tasks, const RangeTask& task, int threads);
  void split_tasks(int64_t num_tasks, int threads);
  void run_tasks(int thread_index);
  int64_t take_front(int owner);
  bool steal_half(int thief, int threads);
  void wait_until_done(int64_t num_tasks);
  void worker_main(int thread_index);
  void wait_for_new_generation(int thread_index, uint64_t seen, std::chrono::steady_clock::time_point spin_until);
  bool join_loop(uint64_t generation, int thread_index);

  ThreadCountTuner& tuner_for(int64_t total_work);

  int num_threads_;
  // One tuner per size class of loop (total work within a factor of 4), the caller's alone.
  std::map<int, ThreadCountTuner> tuners_;
  std::vector<std::thread> workers_;

  // One loop's state. generation_ is odd while a loop is open and even between loops. The
  // caller writes task_, num_tasks_ and loop_threads_ only while the generation is even and no
  // helper is inside (helpers_inside_ == 0). A helper counts itself inside before it checks
  // that the generation it woke for is still open, and the caller closes the generation before
  // it checks that none is inside, so a late helper either sees the loop closed or is waited
  // for: it never reads the next loop's state half written, nor claims its tasks.
  const RangeTask* task_ = nullptr;
  int64_t num_tasks_ = 0;
  int loop_threads_ = 0;  // helpers with index below it take part

  // One thread's tasks of the open loop, [front, back), packed in one word (front in the low
  // half) so that its owner, taking from the front, and a thief, taking from the back, agree
  // by one compare-exchange. Ranges only shrink while the loop is open; one cache line each, so
  // owners taking their own tasks do not contend.
  struct alignas(64) TaskRange {
    std::atomic<uint64_t> bounds{0};
  };
  std::unique_ptr<TaskRange[]> ranges_;  // [num_threads_]
  std::atomic<int64_t> done_tasks_{0};   // added by each thread once it finds no task left
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> helpers_inside_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  // One per thread index (0 unused): a loop wakes only the helpers it uses.
  std::unique_ptr<std::condition_variable[]> wake_;
  std::condition_variable all_done_;  // the caller sleeps here when tasks outlast its spin
};

}  // namespace kvdesk
