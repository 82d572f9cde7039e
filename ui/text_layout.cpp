// Text layout: greedy line breaking over words (a word keeps the spaces after it), one span at
// a time; neighbouring pieces of one span on one line merge into one run.
#include "ui/text_layout.h"

#include <algorithm>

namespace kvdesk::ui {
namespace {

class LineBreaker {
 public:
  LineBreaker(float width, const MeasureSpanText& measure) : width_(width), measure_(measure) {}

  void add_span(size_t index, const MdSpan& span) {
    std::string_view text = span.text;
    while (!text.empty()) {
      if (text.front() == '\n') {
        new_line();
        text.remove_prefix(1);
        continue;
      }
      const size_t word_end = std::min(text.find_first_of(" \n"), text.size());
      size_t end = word_end;
      while (end < text.size() && text[end] == ' ') ++end;
      add_word(index, span, text.substr(0, word_end), text.substr(word_end, end - word_end));
      text.remove_prefix(end);
    }
  }

  TextLayout finish() {
    if (!layout_.runs.empty()) layout_.lines = line_ + 1;
    return std::move(layout_);
  }

 private:
  void new_line() {
    ++line_;
    x_ = 0;
  }

  void add_word(size_t index, const MdSpan& span, std::string_view word, std::string_view spaces) {
    const float word_w = measure_(word, span);
    if (x_ > 0 && x_ + word_w > width_) new_line();
    if (word_w > width_) {
      split_word(index, span, word);
    } else if (!word.empty()) {
      place(index, word, word_w);
    }
    if (!spaces.empty()) place(index, spaces, measure_(spaces, span), false);
  }

  // A word wider than a line: as many characters per line as fit (at least one).
  void split_word(size_t index, const MdSpan& span, std::string_view word) {
    while (!word.empty()) {
      size_t cut = 0;
      float w = 0;
      while (cut < word.size()) {
        const size_t next = cut + utf8_char_length(word, cut);
        const float next_w = measure_(word.substr(0, next), span);
        if (cut > 0 && x_ + next_w > width_) break;
        cut = next;
        w = next_w;
      }
      if (x_ > 0 && x_ + w > width_) {
        new_line();
        continue;
      }
      place(index, word.substr(0, cut), w);
      word.remove_prefix(cut);
      if (!word.empty()) new_line();
    }
  }

  void place(size_t index, std::string_view text, float w, bool counts_for_width = true) {
    std::vector<PlacedRun>& runs = layout_.runs;
    if (!runs.empty() && runs.back().span == index && runs.back().line == line_) {
      runs.back().text += text;
      runs.back().width += w;
    } else {
      runs.push_back({index, std::string(text), x_, w, line_});
    }
    x_ += w;
    if (counts_for_width && x_ > layout_.widest) layout_.widest = x_;
  }

  float width_;
  const MeasureSpanText& measure_;
  TextLayout layout_;
  int32_t line_ = 0;
  float x_ = 0;
};

}  // namespace

size_t utf8_char_length(std::string_view text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  return std::min(n, text.size() - i);
}

TextLayout layout_spans(const MdSpans& spans, float width, const MeasureSpanText& measure) {
  LineBreaker breaker(width, measure);
  for (size_t i = 0; i < spans.size(); ++i) breaker.add_span(i, spans[i]);
  return breaker.finish();
}

std::string elide_to_width(std::string_view text, float width, const MeasureText& measure) {
  if (measure(text) <= width) return std::string(text);
  const std::string_view dots = "...";
  if (measure(dots) > width) return {};
  size_t keep = 0;
  while (keep < text.size()) {
    const size_t next = keep + utf8_char_length(text, keep);
    if (measure(std::string(text.substr(0, next)) + std::string(dots)) > width) break;
    keep = next;
  }
  return std::string(text.substr(0, keep)) + std::string(dots);
}

}  // namespace kvdesk::ui
