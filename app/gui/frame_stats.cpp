// Frame-time percentiles (nearest rank).
#include "app/gui/frame_stats.h"

#include <cstdio>

#include "engine/runtime/percentile.h"

namespace kvdesk::gui {

double FrameStats::percentile(double p) const { return kvdesk::percentile(samples_, p / 100.0); }

std::string FrameStats::summary() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "frames %zu, median %.2f ms, p95 %.2f ms, max %.2f ms", samples_.size(), percentile(50),
                percentile(95), percentile(100));
  return buf;
}

}  // namespace kvdesk::gui
