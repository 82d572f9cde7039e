// Request metrics as JSON; see metrics_json.h.
#include "app/replay/metrics_json.h"

namespace kvdesk {

nlohmann::json metrics_json(const RequestMetrics& m) {
  return {
      {"prompt_tokens", m.prompt_tokens}, {"cached_tokens", m.cached_tokens},
      {"host_tier_tokens", m.host_tier_tokens},
      {"generated_tokens", m.generated_tokens}, {"preemptions", m.preemptions},
      {"peak_blocks", m.peak_blocks}, {"queue_ms", m.queue_ms},
      {"ttft_ms", m.ttft_ms}, {"prefill_tok_s", m.prefill_tok_s},
      {"decode_tok_s", m.decode_tok_s}, {"itl_p50_ms", m.itl_p50_ms},
      {"itl_p95_ms", m.itl_p95_ms},
  };
}

}  // namespace kvdesk
