// Frame times: the work of each frame (events, update, draw, render, swap; not the wait for
// events), summarised as median and 95th percentile for --frame-stats.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kvdesk::gui {

class FrameStats {
 public:
  void add(double ms) { samples_.push_back(ms); }
  size_t count() const { return samples_.size(); }
  double percentile(double p) const;   // p in [0, 100]; 0 without samples
  // "frames 812, median 3.1 ms, p95 5.4 ms, max 12.0 ms"
  std::string summary() const;

 private:
  std::vector<double> samples_;
};

}  // namespace kvdesk::gui
