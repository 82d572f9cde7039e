// The JSON form of one request's metrics, the same for every front end that reports them
// (kvdesk-cli generate and replay, kvdesk-bench trace): they all run the same engine step.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/engine_types.h"

namespace kvdesk {

// prompt_tokens, cached_tokens, host_tier_tokens, generated_tokens, preemptions, peak_blocks, queue_ms, ttft_ms,
// prefill_tok_s, decode_tok_s, itl_p50_ms, itl_p95_ms.
nlohmann::json metrics_json(const RequestMetrics& m);

}  // namespace kvdesk
