// The synchronous driver: EngineCore stepped on the calling thread, for the front ends that
// run one job and wait for it (kvdesk-cli, kvdesk-bench, the lab, tests). The same step as the
// app's engine thread, so what the CLI prints is what the app would stream.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/runtime/engine_core.h"

namespace kvdesk {

// Steps core until it has no work, handing each event to on_event as it happens.
void run_until_idle(EngineCore& core, const std::function<void(const Event&)>& on_event);

// One request from prompt to finish.
struct Completion {
  std::vector<int32_t> tokens;   // generated
  std::string text;              // generated text (UTF-8 streamed, the tail flushed)
  FinishReason finish = FinishReason::Length;
  RequestMetrics metrics;
};

// Return false to cancel the request (it then finishes as Cancelled).
using TokenCallback = std::function<bool(int32_t token, const std::string& text)>;

// Runs request (its prompt_tokens) alone on an idle core. Throws kvdesk::Error when the core
// refuses it or it ends in an error.
Completion complete(EngineCore& core, const Request& request, const TokenCallback& on_token = {});

// Next-token logits at every prompt position, [prompt.size()][vocab], every token computed
// (no cached prefix). core must be idle.
std::vector<float> prompt_logits(EngineCore& core, const std::vector<int32_t>& prompt);

}  // namespace kvdesk
