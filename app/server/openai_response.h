// OpenAI response bodies: the whole answer (chat.completion / text_completion) and the
// streamed chunks (chat.completion.chunk / text_completion) sent as server-sent events.
// One ResponseShape per request: it fixes the id, creation time and model every chunk repeats.
// A chat answer's reasoning (<think>, harmony's analysis channel; engine/chat/answer_parts.h)
// goes in reasoning_content beside content, as llama-server and vLLM send it.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "app/server/openai_request.h"
#include "engine/chat/answer_parts.h"

namespace kvdesk::server {

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;   // prompt tokens whose KV came from the prefix cache
};

nlohmann::json usage_json(const Usage& usage);

class ResponseShape {
 public:
  // opened_in_reasoning: the chat prompt ended inside a <think> (DeepSeek R1, Qwen3 thinking),
  // so the answer starts as reasoning.
  ResponseShape(Endpoint endpoint, std::string model_id, bool opened_in_reasoning = false);

  // The whole answer of a request that did not stream.
  nlohmann::json full(const std::string& text, const std::string& finish_reason, const Usage& usage) const;
  // Streamed chunks, in order: first() (chat: the assistant role; nothing for completions),
  // then per piece of text content() (completions) or, through answer_stream(), answer_delta()
  // (chat), last() with the finish reason, then usage() when asked.
  nlohmann::json first() const;
  bool has_first() const { return endpoint_ == Endpoint::ChatCompletions; }
  bool splits_reasoning() const { return endpoint_ == Endpoint::ChatCompletions; }
  nlohmann::json content(const std::string& text) const;
  AnswerStream answer_stream() const { return AnswerStream(opened_in_reasoning_); }
  // A chat chunk of what one piece added: delta.reasoning_content and / or delta.content.
  nlohmann::json answer_delta(const AnswerParts& delta) const;
  nlohmann::json last(const std::string& finish_reason) const;
  nlohmann::json usage(const Usage& usage) const;

 private:
  nlohmann::json chunk(nlohmann::json choice) const;

  Endpoint endpoint_;
  std::string id_;        // "chatcmpl-..." or "cmpl-...", the same in every chunk
  int64_t created_;       // Unix seconds
  std::string model_id_;
  bool opened_in_reasoning_;
};

// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& value);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace kvdesk::server
