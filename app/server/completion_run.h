// CompletionRun: one OpenAI completion carried through the engine: one engine request whose
// samples are the response's choices (n), their events turned into text (each cut at its
// first stop string), log-probabilities, finish reasons and usage. Dropping a run before the
// engine ended it cancels every sample, so their KV blocks are freed: that is how a client that
// goes away mid-answer stops costing anything.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/server/openai_request.h"
#include "app/server/openai_response.h"
#include "app/server/request_router.h"
#include "app/server/stop_scanner.h"

namespace kvdesk::server {

// What one event added to one choice: text now safe to send, and the log-probabilities of the
// tokens it came with (when the request asked for them).
struct ChoicePiece {
  int32_t index = 0;
  std::string text;
  std::vector<LogprobEntry> logprobs;
};

class CompletionRun {
 public:
  // Throws ApiError (503) when the router's queue is full.
  CompletionRun(RequestRouter& router, const CompletionRequest& request);
  ~CompletionRun();
  CompletionRun(const CompletionRun&) = delete;
  CompletionRun& operator=(const CompletionRun&) = delete;

  // Waits up to timeout for the engine's next event; nullopt when none came. Throws ApiError
  // when the engine refused or failed the request.
  std::optional<ChoicePiece> next(std::chrono::milliseconds timeout);
  int32_t choices() const { return int32_t(choices_.size()); }
  // Every choice has finished: finish reasons and usage are final.
  bool done() const;
  bool choice_done(int32_t index) const { return choices_[size_t(index)].done; }
  // Once that choice is done: "stop" (end of text or a stop string) or "length" (max_tokens,
  // context, KV pool).
  const std::string& finish_reason(int32_t index) const { return choices_[size_t(index)].finish_reason; }
  // The prompt counted once (the choices share it), the completions of every choice summed.
  Usage usage() const;

 private:
  // Invariant: ended means the engine sent this sample's Finished or Error (nothing left to
  // cancel); done means Finished was seen and finish_reason is final.
  struct Choice {
    StopScanner stops;
    bool ended = false;
    bool done = false;
    int32_t tokens_seen = 0;        // generated tokens received, up to and with a stop string's
    int32_t completion_tokens = 0;
    std::string finish_reason = {};
  };

  ChoicePiece on_token(int32_t index, const Event& event);
  ChoicePiece on_finished(int32_t index, const Event& event);
  void end_all();

  RequestRouter& router_;
  std::shared_ptr<RequestStream> stream_;
  bool logprobs_ = false;
  std::vector<Choice> choices_;   // [n]
  Usage prompt_usage_;            // prompt and cached tokens, from the first Finished
};

}  // namespace kvdesk::server
