// CompletionRun: a stop string cancels the engine request at once, but the run still waits for
// its Finished event, which carries the prompt and cache figures for usage.
#include "app/server/completion_run.h"

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
  constexpr std::array<std::string_view, 6> kRequestFaults = {
      "the prompt", "max_tokens", "this request can need", "token id", "invalid sampling", "unknown chat role"};
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
    : router_(router), stream_(router.submit(request.engine)), stops_(request.stop) {}

CompletionRun::~CompletionRun() {
  if (!ended_) router_.abandon(stream_->id());
}

std::string CompletionRun::next_text(std::chrono::milliseconds timeout) {
  if (done_) return {};
  const std::optional<Event> event = stream_->next(timeout);
  if (!event) return {};
  switch (event->kind) {
    case EventKind::Token: return on_token(*event);
    case EventKind::Finished: return on_finished(*event);
    case EventKind::Error:
      ended_ = true;
      throw engine_error(event->text);
    case EventKind::ModelLoaded:
    case EventKind::LoadProgress:
    case EventKind::KvQuality:
    case EventKind::Logits: break;   // the server's requests ask for no logits
  }
  return {};
}

std::string CompletionRun::on_token(const Event& event) {
  if (stops_.stopped()) return {};
  if (event.token >= 0) ++tokens_seen_;
  std::string text = stops_.feed(event.text);
  if (stops_.stopped()) router_.cancel(stream_->id());
  return text;
}

std::string CompletionRun::on_finished(const Event& event) {
  ended_ = true;
  done_ = true;
  finish_reason_ = stops_.stopped() ? "stop" : openai_finish_reason(event.finish);
  usage_.prompt_tokens = event.metrics.prompt_tokens;
  usage_.cached_tokens = event.metrics.cached_tokens;
  usage_.completion_tokens = stops_.stopped() ? tokens_seen_ : event.metrics.generated_tokens;
  return stops_.flush();
}

}  // namespace kvdesk::server
