// The chat's "Prompt as the model sees it": the selected conversation rendered with the chat
// template in use (vm.chat.prompt, which the app renders when the conversation or the template
// changes), wrapped in the monospaced font, the template's own text (where its control tokens
// live) in the template colour and the conversation's content in the text colour. A template
// that cannot render the conversation shows its error instead; Copy takes the whole prompt.
#include <imgui.h>

#include <algorithm>
#include <cfloat>

#include "ui/emoji_text.h"
#include "ui/panel_data.h"
#include "ui/panels.h"
#include "ui/text_layout.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {
namespace {

MdSpans piece_spans(const PromptView& prompt) {
  MdSpans spans;
  spans.reserve(prompt.pieces.size());
  for (const PromptPiece& piece : prompt.pieces) spans.emplace_back(piece.text);
  return spans;
}

// Which colour is which, and Copy.
void draw_legend(const ViewModel& vm) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextColored(text_colour(TextTone::Template, vm.ui.layout_prefs.theme), "template text (%s)",
                     vm.model.chat_template.c_str());
  ImGui::SameLine();
  ImGui::TextUnformatted("| conversation content");
  ImGui::SameLine();
  if (ImGui::SmallButton("Copy prompt")) ImGui::SetClipboardText(display_text(prompt_text(vm.chat.prompt)).c_str());
}

// The pieces wrapped to the width left, each run in its piece's colour; runs outside the visible
// part of the view are not drawn. A Dummy reserves the space so the view scrolls over all of it.
// The widest line goes to the layout report.
void draw_pieces(ViewModel& vm, const Fonts& fonts) {
  const std::vector<PromptPiece>& pieces = vm.chat.prompt.pieces;
  ImFont* mono = fonts.mono ? fonts.mono : ImGui::GetFont();
  const float size = ImGui::GetFontSize();
  const float width = std::max(1.0f, ImGui::GetContentRegionAvail().x);
  const TextLayout layout = layout_spans(piece_spans(vm.chat.prompt), width, [&](std::string_view text, const MdSpan&) {
    return mono->CalcTextSizeA(size, FLT_MAX, 0, text.data(), text.data() + text.size()).x;
  });
  const float line_h = size + ImGui::GetStyle().ItemSpacing.y;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImU32 template_colour = ImGui::GetColorU32(text_colour(TextTone::Template, vm.ui.layout_prefs.theme));
  const ImU32 content_colour = ImGui::GetColorU32(ImGuiCol_Text);
  ImDrawList* draw_list = ImGui::GetWindowDrawList();
  for (const PlacedRun& run : layout.runs) {
    const ImVec2 pos(origin.x + run.x, origin.y + float(run.line) * line_h);
    if (!ImGui::IsRectVisible(pos, ImVec2(pos.x + run.width, pos.y + line_h))) continue;
    const ImU32 colour = pieces[run.span].from_template ? template_colour : content_colour;
    draw_list->AddText(mono, size, pos, colour, run.text.data(), run.text.data() + run.text.size());
  }
  ImGui::Dummy(ImVec2(std::min(width, std::max(1.0f, layout.widest)),
                      float(std::max(1, layout.lines)) * line_h - ImGui::GetStyle().ItemSpacing.y));
  vm.ui.layout.record("chat: prompt", layout.widest, width);
}

}  // namespace

void draw_prompt_view(ViewModel& vm, const Fonts& fonts) {
  const PromptView& prompt = vm.chat.prompt;
  if (!prompt.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, text_colour(TextTone::Error, vm.ui.layout_prefs.theme));
    ImGui::TextWrapped("The chat template cannot render this conversation: %s", prompt.error.c_str());
    ImGui::PopStyleColor();
    return;
  }
  if (prompt.pieces.empty()) {
    ImGui::TextDisabled("%s", prompt.note.empty() ? "Rendering the prompt..." : prompt.note.c_str());
    return;
  }
  draw_legend(vm);
  ImGui::Separator();
  draw_pieces(vm, fonts);
}

}  // namespace kvdesk::ui
