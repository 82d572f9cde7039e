// CompletionRun: one OpenAI completion carried through the engine. Submits the request, turns
// its events into text (cut at the first stop string), a finish reason and usage. Dropping a
// run before the engine ended it cancels the engine request, so its KV blocks are freed:
// that is how a client that goes away mid-answer stops costing anything.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "app/server/openai_request.h"
#include "app/server/openai_response.h"
#include "app/server/request_router.h"
#include "app/server/stop_scanner.h"

namespace kvdesk::server {

class CompletionRun {
 public:
  // Throws ApiError (503) when the router's queue is full.
  CompletionRun(RequestRouter& router, const CompletionRequest& request);
  ~CompletionRun();
  CompletionRun(const CompletionRun&) = delete;
  CompletionRun& operator=(const CompletionRun&) = delete;

  // Waits up to timeout for the engine's next event; returns the text now safe to send (""
  // when there is none yet). Throws ApiError when the engine refused or failed the request.
  std::string next_text(std::chrono::milliseconds timeout);
  bool done() const { return done_; }
  // Once done: "stop" (end of text or a stop string) or "length" (max_tokens, context, KV pool).
  const std::string& finish_reason() const { return finish_reason_; }
  const Usage& usage() const { return usage_; }

 private:
  std::string on_token(const Event& event);
  std::string on_finished(const Event& event);

  RequestRouter& router_;
  std::shared_ptr<RequestStream> stream_;
  StopScanner stops_;
  bool ended_ = false;             // the engine sent Finished or Error: nothing left to cancel
  bool done_ = false;              // Finished seen: finish_reason_ and usage_ are final
  int32_t tokens_seen_ = 0;        // generated tokens received, up to and with a stop string's
  std::string finish_reason_;
  Usage usage_;
};

}  // namespace kvdesk::server
