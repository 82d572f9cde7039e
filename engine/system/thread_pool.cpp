// ThreadPool: open a loop by making the generation odd, let everyone (the caller included)
// run its own range of tasks and then the rest of the others', wait until every task is done,
// close the loop.
#include "engine/system/thread_pool.h"

#include <bit>

#include "kernels/check.h"

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

uint64_t pack_range(int64_t front, int64_t back) { return uint64_t(front) | (uint64_t(back) << 32); }
int64_t range_front(uint64_t bounds) { return int64_t(bounds & 0xffffffffu); }
int64_t range_back(uint64_t bounds) { return int64_t(bounds >> 32); }

constexpr int64_t kNoTask = -1;

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads < 1 ? 1 : num_threads),
      ranges_(std::make_unique<TaskRange[]>(size_t(num_threads_))),
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
  parallel_for_ranges(num_tasks, [&task](int64_t begin, int64_t end, int thread_index) {
    for (int64_t i = begin; i < end; ++i) task(i, thread_index);
  }, total_work);
}

void ThreadPool::parallel_for_ranges(int64_t num_tasks, const RangeTask& task, int64_t total_work) {
  if (num_tasks <= 0) return;
  KVDESK_ASSERT(num_tasks <= kMaxTasks);
  if (num_threads_ == 1 || num_tasks == 1 || total_work < kMinParallelWork) {
    task(0, num_tasks, 0);
    return;
  }
  ThreadCountTuner& tuner = tuner_for(total_work);
  const int threads = tuner.threads();
  const Clock::time_point start = Clock::now();
  if (threads == 1) {
    task(0, num_tasks, 0);
  } else {
    run_loop(num_tasks, task, threads);
  }
  tuner.record(LoopSignature{num_tasks, total_work}, std::chrono::duration<double>(Clock::now() - start).count());
}

ThreadCountTuner& ThreadPool::tuner_for(int64_t total_work) {
  const int size_class = std::bit_width(static_cast<uint64_t>(total_work)) / 2;
  return tuners_.try_emplace(size_class, num_threads_).first->second;
}

void ThreadPool::run_loop(int64_t num_tasks, const RangeTask& task, int threads) {
  // A helper that joined the previous loop may still be on its way out.
  while (helpers_inside_.load() != 0) std::this_thread::yield();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    num_tasks_ = num_tasks;
    loop_threads_ = threads;
    split_tasks(num_tasks, threads);
    done_tasks_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1);  // open
  }
  for (int i = 1; i < threads; ++i) wake_[i].notify_one();
  run_tasks(0);
  wait_until_done(num_tasks);
  generation_.fetch_add(1);  // closed
}

// Thread t of T owns tasks [t * N / T, (t + 1) * N / T); threads past T own none.
void ThreadPool::split_tasks(int64_t num_tasks, int threads) {
  for (int t = 0; t < num_threads_; ++t) {
    const int64_t front = t < threads ? num_tasks * t / threads : 0;
    const int64_t back = t < threads ? num_tasks * (t + 1) / threads : 0;
    ranges_[t].bounds.store(pack_range(front, back), std::memory_order_relaxed);
  }
}

// The owner's range front to back; then the back half of another thread's range, the next
// thread's first, moved into the owner's range and run the same way; until a pass over the
// others finds every range empty. Only a thread that is running can refill its own range (by
// stealing), so a range seen empty on that pass either stays empty or belongs to a thread that
// will run what it took: no task is left untaken. The tasks run are counted in done_tasks_
// once, at the end.
void ThreadPool::run_tasks(int thread_index) {
  const int threads = loop_threads_;
  const RangeTask& task = *task_;
  int64_t ran = 0;
  do {
    for (int64_t i = take_front(thread_index); i != kNoTask; i = take_front(thread_index)) {
      task(i, i + 1, thread_index);
      ++ran;
    }
  } while (steal_half(thread_index, threads));
  const bool last = done_tasks_.fetch_add(ran, std::memory_order_acq_rel) + ran == num_tasks_;
  if (last && thread_index != 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }  // the caller is either before its check or asleep
    all_done_.notify_one();
  }
}

int64_t ThreadPool::take_front(int owner) {
  std::atomic<uint64_t>& bounds = ranges_[owner].bounds;
  uint64_t seen = bounds.load(std::memory_order_relaxed);
  while (range_front(seen) < range_back(seen)) {
    if (bounds.compare_exchange_weak(seen, pack_range(range_front(seen) + 1, range_back(seen)),
                                     std::memory_order_relaxed)) {
      return range_front(seen);
    }
  }
  return kNoTask;
}

// Moves the back half of the first other thread's range that has tasks (the larger half when
// it is odd) into the thief's own range, which is empty: the thief then runs them front to back,
// one stream through memory per steal, and a helper that lost its core gives up half of what is
// left at a time (log2 of its tasks in steals) rather than its tasks one by one from the back
// end, each a new stream. Only the owner makes its own range non-empty, so the plain store
// races with no one. False when every other range is empty.
bool ThreadPool::steal_half(int thief, int threads) {
  for (int k = 1; k < threads; ++k) {
    std::atomic<uint64_t>& bounds = ranges_[(thief + k) % threads].bounds;
    uint64_t seen = bounds.load(std::memory_order_relaxed);
    while (range_front(seen) < range_back(seen)) {
      const int64_t middle = range_front(seen) + (range_back(seen) - range_front(seen)) / 2;
      if (bounds.compare_exchange_weak(seen, pack_range(range_front(seen), middle), std::memory_order_relaxed)) {
        ranges_[thief].bounds.store(pack_range(middle, range_back(seen)), std::memory_order_relaxed);
        return true;
      }
    }
  }
  return false;
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
