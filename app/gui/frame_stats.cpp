// Frame-time percentiles (nearest rank).
#include "app/gui/frame_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvdesk::gui {

double FrameStats::percentile(double p) const {
  if (samples_.empty()) return 0;
  std::vector<double> sorted = samples_;
  std::sort(sorted.begin(), sorted.end());
  const double rank = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * double(sorted.size()));
  return sorted[size_t(std::max(rank, 1.0)) - 1];
}

std::string FrameStats::summary() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "frames %zu, median %.2f ms, p95 %.2f ms, max %.2f ms", samples_.size(), percentile(50),
                percentile(95), percentile(100));
  return buf;
}

}  // namespace kvdesk::gui
