// The markers tool-call markup is written with, shared by the parser (tool_calls.cpp) and the
// grammars that make a model write them (tool_call_grammar.cpp). Internal to engine/chat.
#pragma once
#include <string_view>

namespace kvdesk::tool_call_markup {

constexpr std::string_view kToolCallTag = "<tool_call>";
constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";

}  // namespace kvdesk::tool_call_markup
