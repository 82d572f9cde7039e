// ThreadPool: every task of every loop runs exactly once, whatever the thread count; each thread
// runs its own range of tasks in order; a helper that is late (here: stuck in a slow task) has
// the rest of its range taken over, and neither loses nor repeats tasks of the loops that follow.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/system/thread_pool.h"

using namespace kvdesk;

TEST_CASE("parallel_for runs every task once per loop, loop after loop", "[engine][thread_pool]") {
  const int threads = GENERATE(1, 2, 3, 4);
  ThreadPool pool(threads);
  for (int64_t tasks : {1, 2, 3, 7, 64, 1000}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
    std::atomic<int> bad_thread_index{0};  // Catch2's CHECK is not for helper threads
    for (int loop = 0; loop < 200; ++loop) {
      pool.parallel_for(tasks, [&](int64_t i, int thread) {
        if (thread < 0 || thread >= threads) bad_thread_index.fetch_add(1);
        runs[static_cast<size_t>(i)].fetch_add(1);
      }, ThreadPool::kMinParallelWork);
    }
    CHECK(bad_thread_index.load() == 0);
    for (const std::atomic<int>& r : runs) CHECK(r.load() == 200);
  }
}

TEST_CASE("a slow task on a helper delays only its own loop", "[engine][thread_pool]") {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int loop = 0; loop < 50; ++loop) {
    pool.parallel_for(16, [&](int64_t i, int thread) {
      if (thread != 0 && i % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      sum.fetch_add(i + 1);
    }, ThreadPool::kMinParallelWork);
    CHECK(sum.exchange(0) == 16 * 17 / 2);
  }
}

TEST_CASE("each thread runs its own contiguous tasks in memory order", "[engine][thread_pool]") {
  // Two threads: a loop then runs at two or, while the pool's tuner probes, one (all tasks on
  // the caller, in order); at three the tuner's two-thread loops would split in halves.
  const int threads = 2;
  ThreadPool pool(threads);
  const int64_t tasks = 96;
  for (int loop = 0; loop < 50; ++loop) {
    std::vector<std::vector<int64_t>> ran(static_cast<size_t>(threads));  // one writer each
    pool.parallel_for(tasks, [&](int64_t i, int thread) {
      ran[static_cast<size_t>(thread)].push_back(i);
      // Long enough that the threads' ranges run side by side and thieves meet owners.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(i % 7 == 0 ? 40 : 5);
      while (std::chrono::steady_clock::now() < until) {
      }
    }, ThreadPool::kMinParallelWork);
    for (int t = 0; t < threads; ++t) {
      const int64_t own_begin = tasks * t / threads, own_end = tasks * (t + 1) / threads;
      int64_t last_own = own_begin - 1;
      for (int64_t i : ran[static_cast<size_t>(t)]) {
        if (i < own_begin || i >= own_end) continue;
        CHECK(i == last_own + 1);  // the owner's tasks start at its range's front, none skipped
        last_own = i;
      }
    }
  }
}

TEST_CASE("the caller takes over the tasks of a helper stuck in one", "[engine][thread_pool]") {
  ThreadPool pool(2);
  const int64_t tasks = 32;
  std::vector<int> thread_of(static_cast<size_t>(tasks), -1);
  pool.parallel_for(tasks, [&](int64_t i, int thread) {
    thread_of[static_cast<size_t>(i)] = thread;
    if (thread == 1 && i == tasks / 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }, ThreadPool::kMinParallelWork);
  int helper_range_on_caller = 0;
  for (int64_t i = tasks / 2; i < tasks; ++i) helper_range_on_caller += thread_of[static_cast<size_t>(i)] == 0;
  CHECK(helper_range_on_caller >= tasks / 2 - 1);
}

TEST_CASE("small loops run on the caller alone", "[engine][thread_pool]") {
  ThreadPool pool(2);
  int on_caller = 0;
  pool.parallel_for(8, [&](int64_t, int thread) { on_caller += thread == 0; }, ThreadPool::kMinParallelWork - 1);
  CHECK(on_caller == 8);
}
