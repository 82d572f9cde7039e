// Markdown view: text runs are placed by layout_spans (ui/text_layout.h) and drawn on the
// window's draw list; a Dummy item reserves the space they take, so ImGui's layout and
// scrolling see each paragraph as one item.
#include "ui/markdown_view.h"

#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <string>

#include "ui/text_layout.h"

namespace kvdesk::ui {
namespace {

constexpr float kHeadingScale[] = {1.0f, 1.5f, 1.3f, 1.15f, 1.05f, 1.0f, 1.0f};
constexpr float kQuoteIndentEm = 1.0f;
constexpr float kListIndentEm = 1.5f;
const ImVec4 kLinkColour(0.45f, 0.7f, 1.0f, 1);
const ImVec4 kEmphasisColour(0.85f, 0.8f, 1.0f, 1);
const ImVec4 kCodeBackground(0.2f, 0.2f, 0.24f, 1);
const ImVec4 kCodeBlockBackground(0.1f, 0.1f, 0.12f, 1);

struct SpanFonts {
  ImFont* body;
  ImFont* mono;
  float size;
  bool bold_all;   // headings and table headers
};

ImFont* font_for(const MdSpan& span, const SpanFonts& f) { return span.style & kSpanCode ? f.mono : f.body; }

bool is_bold(const MdSpan& span, const SpanFonts& f) { return f.bold_all || (span.style & kSpanStrong); }

float measure(std::string_view text, const MdSpan& span, const SpanFonts& f) {
  const float w = font_for(span, f)->CalcTextSizeA(f.size, FLT_MAX, 0, text.data(), text.data() + text.size()).x;
  return is_bold(span, f) ? w + 1 : w;
}

ImU32 span_colour(const MdSpan& span) {
  if (span.style & kSpanLink) return ImGui::GetColorU32(kLinkColour);
  if (span.style & kSpanEmphasis) return ImGui::GetColorU32(kEmphasisColour);
  return ImGui::GetColorU32(ImGuiCol_Text);
}

// A link under the mouse: its address as a tooltip; a click copies it.
void link_interaction(const MdSpan& span, ImVec2 min, ImVec2 max) {
  if (!ImGui::IsWindowHovered() || !ImGui::IsMouseHoveringRect(min, max)) return;
  ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
  ImGui::SetTooltip("%s\n(click to copy the address)", span.href.c_str());
  if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) ImGui::SetClipboardText(span.href.c_str());
}

void draw_run(const PlacedRun& run, const MdSpan& span, const SpanFonts& f, ImVec2 origin, float line_h) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 pos(origin.x + run.x, origin.y + float(run.line) * line_h);
  const ImVec2 end(pos.x + run.width, pos.y + f.size);
  const char* text = run.text.c_str();
  const char* text_end = text + run.text.size();
  if (span.style & kSpanCode) draw->AddRectFilled(ImVec2(pos.x - 1, pos.y), ImVec2(end.x + 1, end.y), ImGui::GetColorU32(kCodeBackground), 2);
  const ImU32 colour = span_colour(span);
  draw->AddText(font_for(span, f), f.size, pos, colour, text, text_end);
  if (is_bold(span, f)) draw->AddText(font_for(span, f), f.size, ImVec2(pos.x + 1, pos.y), colour, text, text_end);
  if (span.style & kSpanStrike) draw->AddLine(ImVec2(pos.x, pos.y + f.size * 0.55f), ImVec2(end.x, pos.y + f.size * 0.55f), colour);
  if (span.style & kSpanLink) {
    draw->AddLine(ImVec2(pos.x, end.y), end, colour);
    link_interaction(span, pos, end);
  }
}

// Wrapped styled text at the cursor, in the width left on the line. Returns the layout.
TextLayout draw_spans(const MdSpans& spans, const SpanFonts& f) {
  const float width = std::max(1.0f, ImGui::GetContentRegionAvail().x);
  const TextLayout layout =
      layout_spans(spans, width, [&](std::string_view text, const MdSpan& span) { return measure(text, span, f); });
  const float line_h = f.size + ImGui::GetStyle().ItemSpacing.y;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  for (const PlacedRun& run : layout.runs) draw_run(run, spans[run.span], f, origin, line_h);
  ImGui::Dummy(ImVec2(std::min(width, std::max(1.0f, layout.widest)), std::max(1, layout.lines) * line_h - ImGui::GetStyle().ItemSpacing.y));
  return layout;
}

SpanFonts span_fonts(const Fonts& fonts, float scale = 1.0f, bool bold_all = false) {
  ImFont* body = ImGui::GetFont();
  return {body, fonts.mono ? fonts.mono : body, ImGui::GetFontSize() * scale, bold_all};
}

void draw_code_block(const MdBlock& block, const Fonts& fonts) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextDisabled("%s", block.language.empty() ? "code" : block.language.c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("Copy")) ImGui::SetClipboardText(block.code.c_str());
  ImFont* mono = fonts.mono ? fonts.mono : ImGui::GetFont();
  const ImVec2 text = mono->CalcTextSizeA(ImGui::GetFontSize(), FLT_MAX, 0, block.code.c_str(), block.code.c_str() + block.code.size());
  const ImGuiStyle& style = ImGui::GetStyle();
  const float width = ImGui::GetContentRegionAvail().x;
  const bool scrolls = text.x + style.WindowPadding.x * 2 > width;
  const float height = text.y + style.WindowPadding.y * 2 + (scrolls ? style.ScrollbarSize : 0);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kCodeBlockBackground);
  ImGui::BeginChild("##code", ImVec2(width, height), false, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushFont(mono);
  ImGui::TextUnformatted(block.code.c_str(), block.code.c_str() + block.code.size());
  ImGui::PopFont();
  ImGui::EndChild();
  ImGui::PopStyleColor();
}

void draw_table(const MdBlock& block, const Fonts& fonts, LayoutReport& report) {
  size_t columns = 1;
  for (const auto& row : block.rows) columns = std::max(columns, row.size());
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchSame;
  if (!ImGui::BeginTable("##table", int(columns), flags)) return;
  for (size_t r = 0; r < block.rows.size(); ++r) {
    ImGui::TableNextRow(r < size_t(block.header_rows) ? ImGuiTableRowFlags_Headers : 0);
    for (size_t c = 0; c < columns; ++c) {
      ImGui::TableNextColumn();
      if (c >= block.rows[r].size()) continue;
      const float had = ImGui::GetContentRegionAvail().x;
      const TextLayout layout = draw_spans(block.rows[r][c], span_fonts(fonts, 1.0f, r < size_t(block.header_rows)));
      report.record("chat: table cell", layout.widest, had);
    }
  }
  ImGui::EndTable();
}

// Bars left of quoted text, one per quote level, over the block just drawn.
void draw_quote_bars(int32_t depth, float left_x, float top_y) {
  const float bottom_y = ImGui::GetItemRectMax().y;
  const float step = ImGui::GetFontSize() * kQuoteIndentEm;
  for (int32_t q = 0; q < depth; ++q) {
    const float x = left_x + float(q) * step + 2;
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(x, top_y), ImVec2(x + 3, bottom_y), ImGui::GetColorU32(ImGuiCol_Separator));
  }
}

void draw_block(const MdBlock& block, const Fonts& fonts, LayoutReport& report) {
  const float em = ImGui::GetFontSize();
  const float indent = float(block.quote_depth) * em * kQuoteIndentEm + float(block.list_depth) * em * kListIndentEm;
  const ImVec2 start = ImGui::GetCursorScreenPos();
  if (indent > 0) ImGui::Indent(indent);
  if (!block.bullet.empty()) {
    const float bullet_w = ImGui::CalcTextSize(block.bullet.c_str()).x;
    ImGui::GetWindowDrawList()->AddText(ImVec2(start.x + indent - bullet_w - em * 0.4f, start.y),
                                        ImGui::GetColorU32(ImGuiCol_Text), block.bullet.c_str());
  }
  switch (block.kind) {
    case MdBlockKind::Paragraph: {
      const float had = ImGui::GetContentRegionAvail().x;
      report.record("chat: paragraph", draw_spans(block.spans, span_fonts(fonts)).widest, had);
      break;
    }
    case MdBlockKind::Heading:
      draw_spans(block.spans, span_fonts(fonts, kHeadingScale[std::clamp(block.heading_level, 0, 6)], true));
      if (block.heading_level <= 2) ImGui::Separator();
      break;
    case MdBlockKind::Code: draw_code_block(block, fonts); break;
    case MdBlockKind::Table: draw_table(block, fonts, report); break;
    case MdBlockKind::Rule: ImGui::Separator(); break;
  }
  if (indent > 0) ImGui::Unindent(indent);
  if (block.quote_depth > 0) draw_quote_bars(block.quote_depth, start.x, start.y);
}

}  // namespace

void draw_markdown(const MdDocument& document, const Fonts& fonts, LayoutReport& report) {
  for (size_t i = 0; i < document.blocks.size(); ++i) {
    ImGui::PushID(int(i));
    draw_block(document.blocks[i], fonts, report);
    ImGui::PopID();
  }
}

}  // namespace kvdesk::ui
