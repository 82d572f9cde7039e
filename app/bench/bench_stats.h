// Summaries of repeated measurements. A benchmark figure is the median of its runs, quoted
// with the min and max and the spread (max - min) / median, so a reader sees at once how
// noisy the machine was while it ran (a shared 2-core box can swing by tens of percent).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/percentile.h"

namespace kvdesk::bench {

struct Stats {
  double median = 0;
  double min = 0;
  double max = 0;
  double spread = 0;           // (max - min) / median; 0 for one run
  std::vector<double> values;  // the runs, in the order they were measured
};

// Empty input gives all zeros.
Stats summarize(std::vector<double> values);
double median(std::vector<double> values);

// {"median", "min", "max", "spread", "runs": [...]}
nlohmann::json stats_json(const Stats& s);
// "123.4 (120.1..125.0)" with the given decimals; just the value for one run.
std::string format_stats(const Stats& s, int decimals);
std::string format_number(double value, int decimals);
// value with the given significant digits ("0.000123"), for figures of any magnitude.
std::string format_significant(double value, int digits);

}  // namespace kvdesk::bench
