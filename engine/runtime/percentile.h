// Percentiles of a sample (latencies, frame times, benchmark runs): one definition shared by
// the scheduler's request metrics, trace replay, the benchmarks and the app's frame statistics.
#pragma once
#include <vector>

namespace kvdesk {

// Nearest-rank percentile: the value at rank round(p * (n - 1)) of the sorted sample,
// p in [0, 1] (clamped); 0 for an empty sample.
double percentile(std::vector<double> values, double p);

}  // namespace kvdesk
