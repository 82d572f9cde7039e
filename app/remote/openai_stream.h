// The OpenAI wire format as a client speaks it: a Request becomes a streamed
// /v1/chat/completions (messages) or /v1/completions (prompt_text) body, and each server-sent
// chunk is read into text deltas, the finish reason and the usage. Plain data, no network.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "engine/engine_types.h"

namespace kvdesk::remote {

struct OpenAiCall {
  std::string path;        // "/v1/chat/completions" or "/v1/completions"
  nlohmann::json body;
};

// Throws kvdesk::Error for a request a server cannot take (token ids only).
OpenAiCall openai_call(const Request& request, const std::string& model);

// What one stream has said so far.
struct StreamState {
  std::string delta;                          // text of the latest chunk (empty: none)
  std::optional<std::string> finish_reason;   // "stop", "length", ...
  bool done = false;                          // "[DONE]" arrived
  int32_t prompt_tokens = -1;                 // from usage, -1 until it arrives
  int32_t cached_tokens = 0;
  int32_t completion_tokens = -1;
  bool in_reasoning = false;                  // a <think> opened for reasoning_content is not closed yet
};

// Reads one SSE data payload into state (delta replaced, the rest accumulated). A chat delta's
// reasoning (reasoning_content, or vLLM's newer reasoning) joins the text inside <think> ...
// </think> before the answer, the form kvdesk stores and shows reasoning in. Throws
// kvdesk::Error for a payload that is not a chunk (an error object included: its message).
void read_stream_chunk(const std::string& data, StreamState& state);

FinishReason finish_reason_from_openai(const std::string& reason);

}  // namespace kvdesk::remote
