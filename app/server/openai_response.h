// OpenAI response bodies: the whole answer (chat.completion / text_completion) and the
// streamed chunks (chat.completion.chunk / text_completion) sent as server-sent events.
// One ResponseShape per request: it fixes the id, creation time and model every chunk repeats.
// A chat answer's reasoning (<think>, harmony's analysis channel; engine/chat/answer_parts.h)
// goes in reasoning_content beside content, as llama-server and vLLM send it; its tool calls,
// in the markup of the template's family (engine/chat/tool_calls.h), go in tool_calls with
// finish_reason "tool_calls". Each of the n choices carries its index.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/server/openai_request.h"
#include "engine/chat/answer_parts.h"
#include "engine/chat/tool_calls.h"

namespace kvdesk::server {

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;   // prompt tokens whose KV came from the prefix cache
};

nlohmann::json usage_json(const Usage& usage);

// One generated token's log-probability, its bytes and the most likely alternatives.
struct LogprobEntry {
  std::string bytes;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

// One choice's whole answer.
struct ChoiceAnswer {
  std::string text;
  std::string finish_reason;
  std::vector<LogprobEntry> logprobs;   // empty unless asked for
};

// What streaming one choice needs to remember between its pieces.
struct ChoiceStream {
  explicit ChoiceStream(bool opened_in_reasoning, ToolCallFormat tools)
      : answer(opened_in_reasoning), tool_calls(tools) {}
  AnswerStream answer;         // the reasoning and answer so far
  ToolCallStream tool_calls;   // the answer's tool-call markup held back and parsed
  bool called_tools = false;   // a tool call was streamed: the finish reason is "tool_calls"
  size_t text_offset = 0;      // completions: bytes of text streamed so far (logprobs' text_offset)
};

class ResponseShape {
 public:
  // opened_in_reasoning: the chat prompt ended inside a <think> (DeepSeek R1, Qwen3 thinking),
  // so the answer starts as reasoning. tools: the markup the answer's tool calls come in
  // (None: no tools were offered). logprobs: the request asked for log-probabilities.
  ResponseShape(Endpoint endpoint, std::string model_id, bool opened_in_reasoning = false,
                ToolCallFormat tools = ToolCallFormat::None, bool logprobs = false);

  // The whole answer of a request that did not stream: one choice per answer.
  nlohmann::json full(const std::vector<ChoiceAnswer>& choices, const Usage& usage) const;
  // Streamed chunks, in order for each choice: first() (chat: the assistant role; nothing for
  // completions), then the chunks of each piece (piece()), then finish() with the finish
  // reason; once every choice is done, usage() when asked.
  bool has_first() const { return endpoint_ == Endpoint::ChatCompletions; }
  nlohmann::json first(int32_t index) const;
  ChoiceStream choice_stream() const { return ChoiceStream(opened_in_reasoning_, tools_); }
  // The chunks one piece of text (and its tokens' log-probabilities) adds; none while it adds
  // nothing yet (a channel marker, the start of a tool call's markup).
  std::vector<nlohmann::json> piece(ChoiceStream& stream, int32_t index, const std::string& text,
                                    const std::vector<LogprobEntry>& logprobs) const;
  // What the choice still held back, then its finish chunk.
  std::vector<nlohmann::json> finish(ChoiceStream& stream, int32_t index, const std::string& finish_reason) const;
  nlohmann::json usage(const Usage& usage) const;

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  nlohmann::json delta_chunk(int32_t index, nlohmann::json delta, const std::vector<LogprobEntry>& logprobs) const;
  nlohmann::json logprobs_json(const std::vector<LogprobEntry>& entries, size_t text_offset = 0) const;
  std::vector<nlohmann::json> harmony_chunks(ChoiceStream& stream, int32_t index, const std::vector<ToolCallDelta>& deltas,
                                             const std::vector<LogprobEntry>& logprobs) const;
  std::vector<nlohmann::json> answer_chunks(ChoiceStream& stream, int32_t index, const AnswerParts& delta,
                                            const std::vector<LogprobEntry>& logprobs) const;

  Endpoint endpoint_;
  std::string id_;        // "chatcmpl-..." or "cmpl-...", the same in every chunk
  int64_t created_;       // Unix seconds
  std::string model_id_;
  bool opened_in_reasoning_;
  ToolCallFormat tools_;
  bool logprobs_;
};

// A response's assistant message (full()'s choice "message") as a chat message: its content,
// and its tool_calls and reasoning_content as the message's fields.
ChatMessage chat_message_of(const nlohmann::json& message);

// One choice's message put together from the chunks streamed for it, as an OpenAI client joins
// them: content and reasoning_content appended, each tool call opened by its first delta (id,
// name) and its arguments appended by index. So what is kept of a streamed answer is what the
// client received, call ids included.
class StreamedMessage {
 public:
  explicit StreamedMessage(int32_t index) : index_(index) {}
  void add(const nlohmann::json& chunk);   // chunks of other choices are ignored
  const nlohmann::json& message() const { return message_; }

 private:
  int32_t index_;
  nlohmann::json message_ = {{"role", "assistant"}, {"content", ""}};
};

// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& value);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace kvdesk::server
