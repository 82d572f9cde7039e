// OpenAI request bodies -> engine Requests: POST /v1/chat/completions and /v1/completions.
// Every field is checked for its JSON type and range; a bad body throws ApiError (400) naming
// the field. Unknown fields are ignored, as OpenAI-compatible servers do; null means absent.
// Structured output (response_format, llama-server's grammar and json_schema) and forced tool
// calls become the engine request's grammar, compiled here, so a schema kvdesk cannot honour
// is a 400 naming its keyword before anything runs.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/tool_calls.h"
#include "engine/engine_types.h"

namespace kvdesk::server {

enum class Endpoint { ChatCompletions, Completions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::ChatCompletions;
  Request engine;                  // messages (chat) or prompt_text / prompt_tokens (completions)
  std::vector<std::string> stop;   // non-empty strings that end the answer
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage: a last chunk with usage
  bool echo = false;               // completions: the answer's text begins with the prompt's
  // Tools were offered: the answer's tool calls come in this markup and are parsed out of it
  // (None: no tools, or a tool_choice of "none").
  ToolCallFormat tool_format = ToolCallFormat::None;
};

// What parsing needs to know about the loaded model.
struct ModelLimits {
  int32_t context_length = 0;      // max_tokens is capped to it; also its default
  int32_t vocab_size = 0;          // logit_bias ids must be below it
  std::string chat_template_source;   // what tells the tool-call markup the model writes
};

// Throw ApiError (400) for malformed JSON, a wrong field type or an out-of-range value.
CompletionRequest parse_chat_request(std::string_view body, const ModelLimits& limits);
CompletionRequest parse_completion_request(std::string_view body, const ModelLimits& limits);

}  // namespace kvdesk::server
