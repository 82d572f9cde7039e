// A stored message's tool calls and tool result as the chat shows them, and an answer's kept
// reasoning: the fields the store keeps (imported transcripts, served chats), or, for an answer
// that has no calls stored, the calls it wrote in the loaded model's tool-call markup
// (engine/chat/tool_calls.h), which then become blocks and leave the answer's text.
#pragma once
#include "app/store/store_types.h"
#include "engine/chat/tool_calls.h"
#include "ui/view_model.h"

namespace kvdesk {

void add_tool_views(const store::Message& message, ToolCallFormat answer_format, ui::MessageView& view);

}  // namespace kvdesk
