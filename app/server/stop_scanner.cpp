// StopScanner: earliest match wins; held_ never contains a whole stop string between calls.
#include "app/server/stop_scanner.h"

#include <algorithm>

namespace kvdesk::server {

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopScanner::feed(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string before = held_.substr(0, first);
    held_.clear();
    return before;
  }
  const size_t keep = undecided_tail();
  std::string ready = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return ready;
}

std::string StopScanner::flush() {
  std::string rest;
  rest.swap(held_);
  return stopped_ ? std::string() : rest;
}

size_t StopScanner::undecided_tail() const {
  size_t longest = 0;
  for (const std::string& stop : stops_) {
    const size_t most = std::min(held_.size(), stop.size() - 1);
    for (size_t len = most; len > longest; --len) {
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace kvdesk::server
