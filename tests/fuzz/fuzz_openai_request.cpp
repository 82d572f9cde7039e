// Fuzz target: arbitrary bytes as an OpenAI request body, parsed as the server parses it
// (app/server/openai_request.cpp): JSON, every field, response_format schemas and GBNF grammars
// compiled, tools with their forced-call grammars, for a model whose chat template writes
// Hermes-style <tool_call> markup. The first byte picks chat or completions. Anything malformed
// must be an ApiError (a 400 naming the field); any other exception, a crash, a hang or a
// sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "app/server/api_error.h"
#include "app/server/openai_request.h"

namespace {

const kvdesk::server::ModelLimits kLimits{
    4096, 512, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
               "{% if tools %}<tools>{{ tools | tojson }}</tools> reply with <tool_call>{...}</tool_call>{% endif %}"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] & 1) {
      kvdesk::server::parse_completion_request(body, kLimits);
    } else {
      kvdesk::server::parse_chat_request(body, kLimits);
    }
  } catch (const kvdesk::server::ApiError&) {
  }
  return 0;
}
