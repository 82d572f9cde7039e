// CompletionRun: a stop string cancels that sample's engine request at once, but the run still
// waits for its Finished event, which carries the prompt and cache figures for usage.
#include "app/server/completion_run.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "app/server/api_error.h"

namespace kvdesk::server {
namespace {

// Engine errors that mean the request itself was unservable (prompt too long for the context
// or the KV pool, a bad token id): the client's fault, 400. Anything else is the server's.
ApiError engine_error(const std::string& message) {
  if (message.starts_with("the prompt has")) {
    return ApiError(400, message, "invalid_request_error", "messages", "context_length_exceeded");
  }
  // "chat template line": the model's template refused this conversation (raise_exception).
  constexpr std::array<std::string_view, 7> kRequestFaults = {"the prompt",      "max_tokens",       "this request can need",
                                                              "token id",        "invalid sampling", "chat template line",
                                                              "the grammar allows"};
  for (std::string_view prefix : kRequestFaults) {
    if (message.starts_with(prefix)) return invalid_request(message);
  }
  return ApiError(500, message, "server_error");
}

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length:
    case FinishReason::ContextFull: return "length";
    case FinishReason::Stop:
    case FinishReason::Cancelled: return "stop";
  }
  return "stop";
}

}  // namespace

CompletionRun::CompletionRun(RequestRouter& router, const CompletionRequest& request)
    : router_(router), stream_(router.submit(request.engine)), logprobs_(request.engine.top_logprobs >= 0) {
  for (int32_t i = 0; i < stream_->samples(); ++i) choices_.push_back(Choice{StopScanner(request.stop)});
}

CompletionRun::~CompletionRun() {
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (!choices_[i].ended) router_.abandon(stream_->id() + RequestId(i));
  }
}

bool CompletionRun::done() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const Choice& c) { return c.done; });
}

Usage CompletionRun::usage() const {
  Usage u = prompt_usage_;
  for (const Choice& c : choices_) u.completion_tokens += c.completion_tokens;
  return u;
}

std::optional<ChoicePiece> CompletionRun::next(std::chrono::milliseconds timeout) {
  if (done()) return std::nullopt;
  const std::optional<Event> event = stream_->next(timeout);
  if (!event) return std::nullopt;
  const int32_t index = int32_t(event->request - stream_->id());
  if (index < 0 || index >= choices()) return std::nullopt;
  switch (event->kind) {
    case EventKind::Token: return on_token(index, *event);
    case EventKind::Finished: return on_finished(index, *event);
    case EventKind::Error:
      end_all();
      throw engine_error(event->text);
    case EventKind::ModelLoaded:
    case EventKind::LoadProgress:
    case EventKind::KvQuality:
    case EventKind::Logits: break;   // the server's requests ask for no logits
  }
  return std::nullopt;
}

// The request failed: its other samples are cancelled (not counted as abandoned by a client).
void CompletionRun::end_all() {
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (!choices_[i].ended) router_.cancel(stream_->id() + RequestId(i));
    choices_[i].ended = true;
  }
}

ChoicePiece CompletionRun::on_token(int32_t index, const Event& event) {
  Choice& c = choices_[size_t(index)];
  ChoicePiece piece{index, {}, {}};
  if (c.stops.stopped()) return piece;
  if (event.token >= 0) ++c.tokens_seen;
  if (logprobs_ && event.token >= 0) {
    piece.logprobs.push_back(LogprobEntry{event.token_bytes, event.logprob, event.top_logprobs});
  }
  piece.text = c.stops.feed(event.text);
  if (c.stops.stopped()) router_.cancel(event.request);
  return piece;
}

ChoicePiece CompletionRun::on_finished(int32_t index, const Event& event) {
  Choice& c = choices_[size_t(index)];
  c.ended = true;
  c.done = true;
  c.finish_reason = c.stops.stopped() ? "stop" : openai_finish_reason(event.finish);
  c.completion_tokens = c.stops.stopped() ? c.tokens_seen : event.metrics.generated_tokens;
  if (index == 0) {
    prompt_usage_.prompt_tokens = event.metrics.prompt_tokens;
    prompt_usage_.cached_tokens = event.metrics.cached_tokens;
  }
  return ChoicePiece{index, c.stops.flush(), {}};
}

}  // namespace kvdesk::server
