// Chat traces: a workload as JSON lines, one user turn per line. A conversation's first turn
// arrives at arrival_ms; each later turn arrives after_ms after the previous answer ended and
// carries the whole history (as a real chat does).
//   {"conversation": "c1", "system": "...", "user": "...", "max_tokens": 64, "temperature": 0, "arrival_ms": 0}
//   {"conversation": "c1", "user": "...", "max_tokens": 64, "after_ms": 500}
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace kvdesk {

struct TraceTurn {
  std::string user;
  std::string system;
  int32_t max_tokens = 64;
  float temperature = 0;
  double start_ms = 0;   // first turns: arrival_ms; later turns: after_ms
};

struct TraceConversation {
  std::string name;
  std::vector<TraceTurn> turns;
};

// Throws kvdesk::Error naming the file and line of a bad entry.
std::vector<TraceConversation> read_trace(const std::string& path);
std::vector<TraceConversation> parse_trace(std::istream& in, const std::string& name);

}  // namespace kvdesk
