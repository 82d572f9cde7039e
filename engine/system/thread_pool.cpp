// ThreadPool: publish a loop in the claim word, let everyone (the caller included) claim task
// indices until none are left, wait for the claimed ones to return.
#include "engine/system/thread_pool.h"

#include <chrono>

#include "kernels/check.h"

namespace kvdesk {
namespace {

// How long an idle helper polls for the next loop before sleeping. Long enough to bridge the
// gap between the matmuls of one layer, short enough not to burn a core while the app is idle.
constexpr auto kHelperSpin = std::chrono::microseconds(300);
// How long the caller polls for the tasks still running before sleeping: a task of a decode
// matmul takes tens of microseconds; a helper that is not back by then has likely lost its core.
constexpr auto kCallerSpin = std::chrono::microseconds(50);
// The self-measurement: each probe lasts at least kProbeTime and kProbeLoops loops; the chosen
// way then holds for kChosenTime. A solo probe on an idle machine costs about half its length,
// under 2% of the time.
constexpr auto kProbeTime = std::chrono::milliseconds(10);
constexpr int kProbeLoops = 16;
constexpr auto kChosenTime = std::chrono::milliseconds(500);

constexpr int kIndexBits = 22;
constexpr uint64_t kIndexMask = (uint64_t(1) << kIndexBits) - 1;
constexpr int kGenerationShift = 2 * kIndexBits;
constexpr uint64_t kGenerationMask = (uint64_t(1) << (64 - kGenerationShift)) - 1;

uint64_t generation_of(uint64_t word) { return word >> kGenerationShift; }
int64_t count_of(uint64_t word) { return int64_t((word >> kIndexBits) & kIndexMask); }
int64_t next_of(uint64_t word) { return int64_t(word & kIndexMask); }

uint64_t claim_word(uint64_t generation, int64_t count, int64_t next) {
  return generation << kGenerationShift | uint64_t(count) << kIndexBits | uint64_t(next);
}

// Polls `ready` with a pause, yielding now and then, for at most `spin`. True when ready.
template <class Ready>
bool poll(std::chrono::microseconds spin, Ready ready) {
  const auto until = std::chrono::steady_clock::now() + spin;
  for (int i = 1;; ++i) {
    if (ready()) return true;
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::yield();
    } else {
      __builtin_ia32_pause();
    }
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { worker_main(i); });
  }
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  claim_.fetch_add(claim_word(1, 0, 0));  // a new generation wakes every helper to see stopping_
  claim_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t num_tasks, const Task& task, int64_t total_work) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1 || total_work < kMinParallelWork) {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
    return;
  }
  const Clock::time_point start = Clock::now();
  if (use_helpers()) {
    run_with_helpers(num_tasks, task);
  } else {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
  }
  note_loop(total_work, Clock::now() - start);
}

void ThreadPool::run_with_helpers(int64_t num_tasks, const Task& task) {
  KVDESK_ASSERT(num_tasks < kMaxTasks);
  const uint64_t generation = (generation_of(claim_.load(std::memory_order_relaxed)) + 1) & kGenerationMask;
  task_ = &task;
  done_.store(0, std::memory_order_relaxed);
  claim_.store(claim_word(generation, num_tasks, 0), std::memory_order_release);
  claim_.notify_all();
  run_tasks(generation, 0);
  wait_until_done(num_tasks);
}

bool ThreadPool::use_helpers() const {
  return phase_ == Phase::ProbeHelpers || (phase_ == Phase::Chosen && !solo_chosen_);
}

void ThreadPool::note_loop(int64_t work, Clock::duration took) {
  phase_work_ += double(work);
  phase_time_ += took;
  ++phase_loops_;
  const bool probe_done = phase_loops_ >= kProbeLoops && phase_time_ >= kProbeTime;
  const double rate = phase_work_ / std::chrono::duration<double>(phase_time_).count();
  switch (phase_) {
    case Phase::ProbeHelpers:
      if (!probe_done) return;
      helpers_rate_ = rate;
      phase_ = Phase::ProbeSolo;
      break;
    case Phase::ProbeSolo:
      if (!probe_done) return;
      solo_chosen_ = rate > helpers_rate_;
      phase_ = Phase::Chosen;
      break;
    case Phase::Chosen:
      if (phase_time_ < kChosenTime) return;
      phase_ = Phase::ProbeHelpers;
      break;
  }
  phase_work_ = 0;
  phase_time_ = {};
  phase_loops_ = 0;
}

void ThreadPool::run_tasks(uint64_t generation, int thread_index) {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(word) != generation || next_of(word) >= count_of(word)) return;
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acquire, std::memory_order_acquire)) continue;
    (*task_)(next_of(word), thread_index);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_of(word)) done_.notify_one();
    word = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::wait_until_done(int64_t num_tasks) {
  if (poll(kCallerSpin, [&] { return done_.load(std::memory_order_acquire) == num_tasks; })) return;
  for (int64_t done = done_.load(std::memory_order_acquire); done != num_tasks;
       done = done_.load(std::memory_order_acquire)) {
    done_.wait(done, std::memory_order_acquire);
  }
}

void ThreadPool::wait_for_loop(uint64_t seen) const {
  if (poll(kHelperSpin, [&] { return generation_of(claim_.load(std::memory_order_acquire)) != seen; })) return;
  for (uint64_t word = claim_.load(std::memory_order_acquire); generation_of(word) == seen;
       word = claim_.load(std::memory_order_acquire)) {
    claim_.wait(word, std::memory_order_acquire);
  }
}

void ThreadPool::worker_main(int thread_index) {
  uint64_t seen = generation_of(claim_.load(std::memory_order_acquire));
  for (;;) {
    wait_for_loop(seen);
    seen = generation_of(claim_.load(std::memory_order_acquire));
    if (stopping_.load()) return;
    run_tasks(seen, thread_index);
  }
}

}  // namespace kvdesk
