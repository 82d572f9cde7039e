// Prometheus text exposition format, read: "# HELP" / "# TYPE" comments and
// `name{label="value",...} value [timestamp]` samples. What a server's /metrics says, as data.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::remote {

struct MetricSample {
  std::string name;                           // "vllm:kv_cache_usage_perc"
  std::map<std::string, std::string> labels;  // label values unescaped
  double value = 0;
};

// Every well-formed sample, in order. Lines that are not (garbage, a cut-off last line) are
// skipped: a server's metrics are read for display, and one bad line must not hide the rest.
std::vector<MetricSample> parse_prometheus_text(std::string_view text);

}  // namespace kvdesk::remote
