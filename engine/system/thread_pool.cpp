// ThreadPool: open a loop by making the generation odd, let everyone (the caller included)
// pull task indices until none are left, wait until every task is done, close the loop.
#include "engine/system/thread_pool.h"

#include <bit>

namespace kvdesk {
namespace {

using Clock = std::chrono::steady_clock;

// How long an idle helper polls for the next loop before sleeping. Long enough to bridge the
// gap between the matmuls of one layer, short enough not to burn a core while the app is idle.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(300);
// How long the caller polls for the last tasks before sleeping: a task of a decode matmul
// takes microseconds; a helper that is not done by then has likely lost its core, and a
// sleeping caller lets the OS run it on the caller's.
constexpr auto kCallerSpin = std::chrono::microseconds(50);

bool is_open(uint64_t generation) { return (generation & 1) != 0; }

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads < 1 ? 1 : num_threads),
      wake_(std::make_unique<std::condition_variable[]>(size_t(num_threads_))) {
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { worker_main(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
    generation_.fetch_add(2);
  }
  for (int i = 1; i < num_threads_; ++i) wake_[i].notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t num_tasks, const Task& task, int64_t total_work) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1 || total_work < kMinParallelWork) {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
    return;
  }
  ThreadCountTuner& tuner = tuner_for(total_work);
  const int threads = tuner.threads();
  const Clock::time_point start = Clock::now();
  if (threads == 1) {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
  } else {
    run_loop(num_tasks, task, threads);
  }
  tuner.record(LoopSignature{num_tasks, total_work}, std::chrono::duration<double>(Clock::now() - start).count());
}

ThreadCountTuner& ThreadPool::tuner_for(int64_t total_work) {
  const int size_class = std::bit_width(static_cast<uint64_t>(total_work)) / 2;
  return tuners_.try_emplace(size_class, num_threads_).first->second;
}

void ThreadPool::run_loop(int64_t num_tasks, const Task& task, int threads) {
  // A helper that joined the previous loop may still be on its way out.
  while (helpers_inside_.load() != 0) std::this_thread::yield();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    num_tasks_ = num_tasks;
    loop_threads_ = threads;
    next_task_.store(0, std::memory_order_relaxed);
    done_tasks_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1);  // open
  }
  for (int i = 1; i < threads; ++i) wake_[i].notify_one();
  run_tasks(0);
  wait_until_done(num_tasks);
  generation_.fetch_add(1);  // closed
}

void ThreadPool::run_tasks(int thread_index) {
  const int64_t num_tasks = num_tasks_;
  const Task& task = *task_;
  for (;;) {
    const int64_t i = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (i >= num_tasks) return;
    task(i, thread_index);
    const bool last = done_tasks_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_tasks;
    if (last && thread_index != 0) {
      { std::lock_guard<std::mutex> lock(mutex_); }  // the caller is either before its check or asleep
      all_done_.notify_one();
    }
  }
}

void ThreadPool::wait_until_done(int64_t num_tasks) {
  const Clock::time_point spin_until = Clock::now() + kCallerSpin;
  while (done_tasks_.load(std::memory_order_acquire) != num_tasks) {
    if (Clock::now() >= spin_until) {
      std::unique_lock<std::mutex> lock(mutex_);
      all_done_.wait(lock, [&] { return done_tasks_.load(std::memory_order_acquire) == num_tasks; });
      return;
    }
    std::this_thread::yield();
  }
}

void ThreadPool::worker_main(int thread_index) {
  uint64_t seen = 0;
  Clock::time_point spin_until = Clock::now() + kSpinBeforeSleep;
  for (;;) {
    wait_for_new_generation(thread_index, seen, spin_until);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    if (is_open(seen) && join_loop(seen, thread_index)) spin_until = Clock::now() + kSpinBeforeSleep;
  }
}

void ThreadPool::wait_for_new_generation(int thread_index, uint64_t seen, Clock::time_point spin_until) {
  while (generation_.load(std::memory_order_acquire) == seen) {
    if (Clock::now() >= spin_until) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_[thread_index].wait(lock, [&] { return generation_.load() != seen; });
      return;
    }
    std::this_thread::yield();
  }
}

// Counts the helper inside, then checks the loop is still the one it woke for (see the
// invariant in the header); true when it took part.
bool ThreadPool::join_loop(uint64_t generation, int thread_index) {
  helpers_inside_.fetch_add(1);
  bool took_part = false;
  if (generation_.load() == generation && thread_index < loop_threads_) {
    run_tasks(thread_index);
    took_part = true;
  }
  helpers_inside_.fetch_sub(1);
  return took_part;
}

}  // namespace kvdesk
