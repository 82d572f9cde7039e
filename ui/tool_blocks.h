// Tool calls and tool results in the chat, each a framed block of its own: a call shows the
// function's name, its id and the arguments (indented JSON in the monospaced font); a result
// shows which call it answers and its text, folded when long. The app does not run tools: these
// are the calls and results of imported transcripts and of answers that wrote calls.
#pragma once
#include "ui/fonts.h"
#include "ui/layout_report.h"
#include "ui/theme_colours.h"
#include "ui/view_model.h"

namespace kvdesk::ui {

// Each records its header line in `report` ("chat: tool call: NAME", "chat: tool result: NAME").
void draw_tool_call(const ToolCallView& call, const Fonts& fonts, Theme theme, LayoutReport& report);
void draw_tool_result(const MessageView& result, const Fonts& fonts, Theme theme, LayoutReport& report);

// A tool result longer than this many lines starts folded.
inline constexpr int kToolResultFoldLines = 12;

}  // namespace kvdesk::ui
