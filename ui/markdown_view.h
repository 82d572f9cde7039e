// Markdown view: draws a parsed message (ui/markdown_document.h) with ImGui in the space left
// on the current line's width: headings larger and bold, emphasis tinted, strong drawn bold,
// links underlined (hover shows the address, a click copies it), inline code and code blocks in
// the monospaced font, code blocks with a Copy button each, lists with their bullets, quotes
// with a bar, tables as ImGui tables. Widths are recorded in the layout report.
#pragma once
#include "ui/fonts.h"
#include "ui/layout_report.h"
#include "ui/markdown_document.h"

namespace kvdesk::ui {

void draw_markdown(const MdDocument& document, const Fonts& fonts, LayoutReport& report);

}  // namespace kvdesk::ui
