// A remote server's KV statistics from its /metrics samples. Each server family names its
// figures differently (vLLM's vllm:*, SGLang's sglang:*, llama-server's llamacpp:*, kvdesk
// serve's kvdesk:*); one table per family maps them onto ServerStats. What a family does not
// expose stays empty, so the panels can say "not exposed" rather than show a zero.
#pragma once
#include <string>
#include <vector>

#include "app/remote/prometheus_text.h"
#include "engine/engine_types.h"

namespace kvdesk::remote {

// kind is taken from the metric names' prefix ("unknown" when none is recognized).
ServerStats read_server_stats(const std::vector<MetricSample>& samples, const std::string& url);

}  // namespace kvdesk::remote
