// ThreadPool: every task of every loop runs exactly once, whatever the thread count; each thread
// runs its tasks in a few runs in memory order; a helper that is late (here: stuck in a slow
// task) has the rest of its range taken over, in halves, and neither loses nor repeats tasks of
// the loops that follow; a range loop runs in one call when the caller runs it alone.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
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

TEST_CASE("each thread runs its tasks in a few runs in memory order", "[engine][thread_pool]") {
  // Two threads: a loop then runs at two or, while the pool's tuner probes, one (all tasks on
  // the caller, in order); at three the tuner's two-thread loops would split in halves. A
  // thread runs its own range from the front, then ranges it steals (halves of what another
  // has left), each front to back: its tasks are a few runs of consecutive indices.
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
    for (const std::vector<int64_t>& order : ran) {
      int runs = order.empty() ? 0 : 1;
      for (size_t k = 1; k < order.size(); ++k) runs += order[k] != order[k - 1] + 1;
      CHECK(runs <= 16);  // its own range, then at most one run per steal, each halving a range
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

TEST_CASE("the caller takes a stuck helper's tasks in halves, each in memory order", "[engine][thread_pool]") {
  // Stealing half of what is left at a time, the caller walks the helper's range in a few
  // ascending runs (one per steal), not task by task from its back end.
  ThreadPool pool(2);
  const int64_t tasks = 64;
  std::vector<int64_t> caller_order;  // the caller's tasks in the order it ran them
  pool.parallel_for(tasks, [&](int64_t i, int thread) {
    if (thread == 0) caller_order.push_back(i);
    if (thread == 1 && i == tasks / 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }, ThreadPool::kMinParallelWork);
  int descents = 0;
  for (size_t k = 1; k < caller_order.size(); ++k) descents += caller_order[k] < caller_order[k - 1];
  CHECK(caller_order.size() >= size_t(tasks - 1));
  CHECK(descents <= 6);  // log2 of the helper's 32 tasks, and one more
}

TEST_CASE("parallel_for_ranges runs every task once, in one call when the caller runs alone",
          "[engine][thread_pool]") {
  const int64_t tasks = 100;
  SECTION("one thread: one call for all") {
    ThreadPool pool(1);
    std::vector<std::pair<int64_t, int64_t>> calls;
    pool.parallel_for_ranges(tasks, [&](int64_t begin, int64_t end, int) { calls.emplace_back(begin, end); },
                             ThreadPool::kMinParallelWork);
    CHECK(calls == std::vector<std::pair<int64_t, int64_t>>{{0, tasks}});
  }
  SECTION("a small loop: one call on the caller") {
    ThreadPool pool(3);
    std::vector<std::pair<int64_t, int64_t>> calls;
    int on_helpers = 0;
    pool.parallel_for_ranges(tasks, [&](int64_t begin, int64_t end, int thread) {
      calls.emplace_back(begin, end);
      on_helpers += thread != 0;
    }, ThreadPool::kMinParallelWork - 1);
    CHECK(calls == std::vector<std::pair<int64_t, int64_t>>{{0, tasks}});
    CHECK(on_helpers == 0);
  }
  SECTION("threads sharing a loop: one task a call, each once") {
    ThreadPool pool(3);
    for (int loop = 0; loop < 100; ++loop) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
      std::atomic<int> calls{0};
      std::atomic<int> wide_helper_calls{0};  // Catch2's CHECK is not for helper threads
      pool.parallel_for_ranges(tasks, [&](int64_t begin, int64_t end, int thread) {
        calls.fetch_add(1);
        if (thread != 0 && end - begin != 1) wide_helper_calls.fetch_add(1);
        for (int64_t i = begin; i < end; ++i) runs[static_cast<size_t>(i)].fetch_add(1);
      }, ThreadPool::kMinParallelWork);
      for (const std::atomic<int>& r : runs) CHECK(r.load() == 1);
      CHECK(wide_helper_calls.load() == 0);
      CHECK((calls.load() == 1 || calls.load() == tasks));  // the tuner ran it on one thread, or shared
    }
  }
}

TEST_CASE("small loops run on the caller alone", "[engine][thread_pool]") {
  ThreadPool pool(2);
  int on_caller = 0;
  pool.parallel_for(8, [&](int64_t, int thread) { on_caller += thread == 0; }, ThreadPool::kMinParallelWork - 1);
  CHECK(on_caller == 8);
}
