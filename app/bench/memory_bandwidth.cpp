// STREAM-style triad and read bandwidth over a ThreadPool (see memory_bandwidth.h).
#include "app/bench/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "engine/system/huge_page_buffer.h"
#include "engine/system/thread_pool.h"

namespace kvdesk::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Chunks per thread: enough that a core slowed by a neighbour hands work to the other.
constexpr int64_t kChunksPerThread = 8;

int64_t num_chunks(const ThreadPool& pool) { return int64_t(pool.num_threads()) * kChunksPerThread; }

// Calls body(begin, end) over [0, n) in num_chunks(pool) chunks on the pool; returns
// the seconds it took.
template <typename Body>
double timed_parallel(ThreadPool& pool, int64_t n, const Body& body) {
  const int64_t chunks = num_chunks(pool);
  const int64_t per_chunk = (n + chunks - 1) / chunks;
  const auto start = Clock::now();
  pool.parallel_for(
      chunks,
      [&](int64_t chunk, int) {
        const int64_t begin = std::min(n, chunk * per_chunk);
        body(begin, std::min(n, begin + per_chunk));
      },
      n);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// words[begin, end) summed over kLanes independent sums: one chain of dependent adds tops out
// near 16 bytes a cycle, below what two cores can read; independent lanes keep the loads, not
// the adds, the limit.
uint64_t sum_words(const uint64_t* words, int64_t begin, int64_t end) {
  constexpr int kLanes = 8;
  uint64_t lanes[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += words[i + k];
  }
  uint64_t sum = 0;
  for (; i < end; ++i) sum += words[i];
  for (uint64_t lane : lanes) sum += lane;
  return sum;
}

}  // namespace

Bandwidth measure_bandwidth(ThreadPool& pool, size_t array_bytes, int passes) {
  const int64_t n = int64_t(array_bytes / sizeof(double));
  HugePageBuffer a_buf(size_t(n) * sizeof(double)), b_buf(size_t(n) * sizeof(double)),
      c_buf(size_t(n) * sizeof(double));
  double* a = reinterpret_cast<double*>(a_buf.get());
  double* b = reinterpret_cast<double*>(b_buf.get());
  double* c = reinterpret_cast<double*>(c_buf.get());
  timed_parallel(pool, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) a[i] = 1.0, b[i] = 2.0, c[i] = 0.5;
  });
  // The read pass sums integers per chunk (vectorizes without reassociating floats) into an
  // atomic, which the compiler may not drop, so neither may it drop the reads.
  const uint64_t* words = reinterpret_cast<const uint64_t*>(b);
  std::atomic<uint64_t> checksum{0};
  Bandwidth best;
  for (int pass = 0; pass < std::max(passes, 1); ++pass) {
    const double triad_s = timed_parallel(pool, n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) a[i] = b[i] + 3.0 * c[i];
    });
    const double read_s = timed_parallel(pool, n, [&](int64_t begin, int64_t end) {
      checksum.fetch_add(sum_words(words, begin, end), std::memory_order_relaxed);
    });
    best.triad_gb_s = std::max(best.triad_gb_s, 3.0 * double(n) * sizeof(double) / triad_s / 1e9);
    best.read_gb_s = std::max(best.read_gb_s, double(n) * sizeof(double) / read_s / 1e9);
  }
  return best;
}

}  // namespace kvdesk::bench
