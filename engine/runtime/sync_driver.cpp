// The synchronous driver: requests run to their end on the caller's thread.
#include "engine/runtime/sync_driver.h"

#include "engine/error.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

// The id of the one request a synchronous call runs; the core is idle before and after.
constexpr RequestId kRequest = 1;

}  // namespace

void run_until_idle(EngineCore& core, const std::function<void(const Event&)>& on_event) {
  std::vector<Event> events;
  while (core.has_work()) {
    core.step(events);
    for (const Event& e : events) on_event(e);
    events.clear();
  }
}

Completion complete(EngineCore& core, const Request& request, const TokenCallback& on_token) {
  KVDESK_ASSERT(!core.has_work());
  core.add(kRequest, request, request.prompt_tokens, EngineCore::Clock::now());
  Completion c;
  std::string error;
  std::vector<Event> cancelled;
  run_until_idle(core, [&](const Event& e) {
    if (e.kind == EventKind::Token) {
      if (e.token >= 0) c.tokens.push_back(e.token);
      c.text += e.text;
      if (on_token && !on_token(e.token, e.text)) core.cancel(kRequest, cancelled);
    } else if (e.kind == EventKind::Finished) {
      c.finish = e.finish;
      c.metrics = e.metrics;
    } else if (e.kind == EventKind::Error) {
      error = e.text;
    }
  });
  for (const Event& e : cancelled) {
    if (e.kind == EventKind::Token) c.text += e.text;
    if (e.kind == EventKind::Finished) {
      c.finish = e.finish;
      c.metrics = e.metrics;
    }
  }
  if (!error.empty()) throw Error(error);
  return c;
}

std::vector<float> prompt_logits(EngineCore& core, const std::vector<int32_t>& prompt) {
  KVDESK_ASSERT(!core.has_work());
  Request request;
  request.max_tokens = 0;
  request.logits = LogitsOutput::Prompt;
  core.add(kRequest, request, prompt, EngineCore::Clock::now());
  std::vector<float> logits;
  std::string error;
  run_until_idle(core, [&](const Event& e) {
    if (e.kind == EventKind::Logits) logits.insert(logits.end(), e.logits.begin(), e.logits.end());
    if (e.kind == EventKind::Error) error = e.text;
  });
  if (!error.empty()) throw Error(error);
  return logits;
}

}  // namespace kvdesk
