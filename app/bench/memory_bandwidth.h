// The machine's memory bandwidth, measured the STREAM way, so decode speed can be reported as
// the fraction of it that it reaches. Decode reads every weight once per token (and the whole
// context's KV), so its ceiling is bandwidth / bytes per token.
//
// Two kernels over arrays far larger than any cache, split over a ThreadPool exactly as the
// forward pass splits its matmuls: triad a[i] = b[i] + s * c[i] (STREAM's headline; counts
// 2 reads + 1 write per element, write-allocate traffic not counted, as STREAM does) and read
// (a sum over one array: the access pattern of decode, which only reads). Each figure is the
// best of the passes (STREAM's rule: the machine's capability, not its noise).
#pragma once
#include <cstddef>

namespace kvdesk {
class ThreadPool;
}

namespace kvdesk::bench {

struct Bandwidth {
  double triad_gb_s = 0;   // 10^9 bytes per second
  double read_gb_s = 0;
};

// array_bytes per array (3 arrays are allocated, in huge pages like the weights), passes >= 1.
Bandwidth measure_bandwidth(ThreadPool& pool, size_t array_bytes, int passes);

}  // namespace kvdesk::bench
