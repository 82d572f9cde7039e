// Tool call and tool result blocks (see tool_blocks.h). A block is drawn on a split draw list:
// its content first (channel 1), then the frame behind it (channel 0), once the content's height
// is known.
#include "ui/tool_blocks.h"

#include <imgui.h>

#include <algorithm>

#include "ui/emoji_text.h"

namespace kvdesk::ui {
namespace {

ImU32 with_alpha(ImVec4 colour, float alpha) {
  colour.w = alpha;
  return ImGui::GetColorU32(colour);
}

// Runs `content` inside a frame tinted with `accent`, as wide as the column.
template <class Content>
void framed(ImVec4 accent, Content content) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 top_left = ImGui::GetCursorScreenPos();
  const float width = ImGui::GetContentRegionAvail().x;
  draw->ChannelsSplit(2);
  draw->ChannelsSetCurrent(1);
  ImGui::Indent(style.FramePadding.x);
  ImGui::Dummy(ImVec2(0, style.FramePadding.y));
  ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width - 2 * style.FramePadding.x);
  ImGui::BeginGroup();
  content();
  ImGui::EndGroup();
  ImGui::PopTextWrapPos();
  ImGui::Unindent(style.FramePadding.x);
  const ImVec2 bottom_right(top_left.x + width, ImGui::GetItemRectMax().y + style.FramePadding.y);
  ImGui::Dummy(ImVec2(0, style.FramePadding.y));
  draw->ChannelsSetCurrent(0);
  draw->AddRectFilled(top_left, bottom_right, with_alpha(accent, 0.08f), style.FrameRounding + 3);
  draw->AddRect(top_left, bottom_right, with_alpha(accent, 0.55f), style.FrameRounding + 3);
  draw->ChannelsMerge();
}

// Display text (emoji as their atlas glyphs, ui/emoji_text.h) through TextUnformatted, not
// TextWrapped("%s"): ImGui 1.86 formats into a 3 KB buffer and cuts longer text; inside
// framed() the wrap position is set.
void unformatted(const std::string& real) {
  const std::string& text = display_text(real);
  ImGui::TextUnformatted(text.c_str(), text.c_str() + text.size());
}

void monospaced(const std::string& text, const Fonts& fonts) {
  if (fonts.mono) ImGui::PushFont(fonts.mono);
  unformatted(text);
  if (fonts.mono) ImGui::PopFont();
}

int line_count(const std::string& text) { return 1 + int(std::count(text.begin(), text.end(), '\n')); }

// The header's parts on one line: the accent label, the name, the dim detail; recorded with the
// width the line needed against the frame's inner width.
void header(const char* label, const std::string& name, const std::string& detail, ImVec4 accent,
            const std::string& where, LayoutReport& report) {
  const float had = ImGui::GetContentRegionAvail().x - ImGui::GetStyle().FramePadding.x;
  float needed = ImGui::CalcTextSize(label).x;
  ImGui::TextColored(accent, "%s", label);
  const auto part = [&](const std::string& real, bool dim) {
    if (real.empty()) return;
    const std::string& text = display_text(real);
    ImGui::SameLine();
    if (dim) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextUnformatted(text.c_str(), text.c_str() + text.size());
    if (dim) ImGui::PopStyleColor();
    needed += ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(text.c_str(), text.c_str() + text.size()).x;
  };
  part(name, false);
  part(detail, true);
  report.record(where, needed, had);
}

}  // namespace

void draw_tool_call(const ToolCallView& call, const Fonts& fonts, Theme theme, LayoutReport& report) {
  const ImVec4 accent = text_colour(TextTone::Tool, theme);
  framed(accent, [&] {
    header("Tool call", call.name.empty() ? "(no name)" : call.name, call.id, accent, "chat: tool call: " + call.name, report);
    if (!call.arguments.empty()) monospaced(call.arguments, fonts);
  });
}

void draw_tool_result(const MessageView& result, const Fonts& fonts, Theme theme, LayoutReport& report) {
  const ImVec4 accent = text_colour(TextTone::Tool, theme);
  framed(accent, [&] {
    const std::string detail = result.tool_call_id.empty() ? std::string() : "answers " + result.tool_call_id;
    header("Tool result", result.tool_name, detail, accent, "chat: tool result: " + result.tool_name, report);
    const int lines = line_count(result.text);
    if (lines > kToolResultFoldLines && !ImGui::TreeNode("##result", "%d lines", lines)) return;
    if (result.text_is_json) {
      monospaced(result.text, fonts);
    } else {
      unformatted(result.text);
    }
    if (lines > kToolResultFoldLines) ImGui::TreePop();
  });
}

}  // namespace kvdesk::ui
