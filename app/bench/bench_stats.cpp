// Medians, percentiles and their printing (see bench_stats.h).
#include "app/bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvdesk::bench {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

Stats summarize(std::vector<double> values) {
  Stats s;
  if (values.empty()) return s;
  s.median = median(values);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  s.spread = s.median != 0 ? (s.max - s.min) / std::abs(s.median) : 0;
  s.values = std::move(values);
  return s;
}

nlohmann::json stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"spread", s.spread}, {"runs", s.values}};
}

std::string format_number(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string format_significant(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, value);
  return buf;
}

std::string format_stats(const Stats& s, int decimals) {
  if (s.values.size() < 2) return format_number(s.median, decimals);
  return format_number(s.median, decimals) + " (" + format_number(s.min, decimals) + ".." +
         format_number(s.max, decimals) + ")";
}

}  // namespace kvdesk::bench
