// ThreadPool: every task of every loop runs exactly once, whatever the thread count, and a
// helper that is late (here: stuck in a slow task) neither loses nor repeats tasks of the loops
// that follow.
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

TEST_CASE("small loops run on the caller alone", "[engine][thread_pool]") {
  ThreadPool pool(2);
  int on_caller = 0;
  pool.parallel_for(8, [&](int64_t, int thread) { on_caller += thread == 0; }, ThreadPool::kMinParallelWork - 1);
  CHECK(on_caller == 8);
}
