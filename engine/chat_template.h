// Chat templates: how a conversation becomes the text a model continues. The family is
// recognized from the GGUF's tokenizer.chat_template text; a model without one (stories260K)
// gets Plain, which joins the messages so the model simply continues the story.
#pragma once
#include <string>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk {

class GgufFile;

enum class ChatFormat : uint8_t { Plain, ChatML, Llama2, Llama3, Zephyr };
const char* chat_format_name(ChatFormat format);

// From tokenizer.chat_template; Plain when the file has none, ChatML for an unknown one.
ChatFormat detect_chat_format(const GgufFile& file);

// The prompt text for messages, ending where the assistant's next answer begins. BOS is not
// included (the tokenizer adds it). Throws kvdesk::Error for an unknown role or no messages.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages);

}  // namespace kvdesk
