// Text layout: where styled text goes when it wraps to a width, and how a line is shortened
// with "..." to fit. Widths come from a measuring function (the font's, in the window; a fixed
// width per byte in tests), so the line breaking is tested without ImGui.
//
// Invariants: every byte of the spans' text lands in exactly one run, in order; a run never
// crosses a line; a line is no wider than `width` unless one character alone is wider; lines
// break after spaces and at '\n', and inside a word only when the word alone is wider than a line.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ui/markdown_document.h"

namespace kvdesk::ui {

struct PlacedRun {
  size_t span = 0;       // index into the spans laid out
  std::string text;      // may end in spaces (they take room but draw nothing)
  float x = 0;
  float width = 0;
  int32_t line = 0;
};

struct TextLayout {
  std::vector<PlacedRun> runs;
  int32_t lines = 0;
  float widest = 0;      // the widest line
};

// The width of `text` drawn in the style of `span`.
using MeasureSpanText = std::function<float(std::string_view text, const MdSpan& span)>;
TextLayout layout_spans(const MdSpans& spans, float width, const MeasureSpanText& measure);

using MeasureText = std::function<float(std::string_view text)>;
// `text` when it fits in `width`, else its longest start (on a UTF-8 boundary) followed by
// "..." that does; "" when not even "..." fits.
std::string elide_to_width(std::string_view text, float width, const MeasureText& measure);

// Bytes in the UTF-8 character starting at text[i] (1 for a stray continuation byte).
size_t utf8_char_length(std::string_view text, size_t i);

}  // namespace kvdesk::ui
